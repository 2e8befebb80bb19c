import {
  type Address,
  decodeFunctionResult,
  encodeFunctionData,
  type Hash,
  type Hex,
  numberToHex,
  type TransactionReceipt,
} from 'viem'
import { permit2Address } from '../../../../protocol/evm/index.js'
import { permit2AllowanceAbi } from '../../../../protocol/evm/permit2.js'
import { FenceLost, holdFences } from '../../jobs/fence.js'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import { failPayment, succeedPayments } from '../../payments/lifecycle.js'
import type { BatchedSettlement } from '../../payments/settlementItems.js'
import { loadPaymentAndSettlement } from '../../payments/settlements.js'
import { inTransaction } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import type { ChargeOutcome } from '../../subscriptions/lifecycle.js'
import { type MandateChargePayload, reportLiveCharge } from '../../subscriptions/liveCharges.js'
import type { SubscriptionRow } from '../../subscriptions/schema.js'
import { eip3009Abi } from './abi.js'
import type { EvmChain } from './chain.js'
import { type EvmMandateState, permitOf } from './mandate.js'
import { evmJobKinds } from './outcome.js'
import { settlementAddress } from './quote.js'
import { chainOf, type JobSettings, relayerOf } from './relay.js'
import type { EvmTxPurpose } from './schema.js'
import type { EvmFees } from './sender.js'
import { recordedSteps, sendOnce, sendStepAndWait, setTxStatus } from './transactions.js'
import { hasTransfer, refuseOnRevert } from './transfers.js'

/** Permit2 refused the call in simulation: the chain changed under the verdict (balance moved, revoked). */
class Permit2Refused extends Error {}

/** The period's payment stopped processing (the subscription was cancelled) before its charge was signed. */
class ChargeNotWanted extends Error {}

interface Charge {
  ctx: JobRunContext
  job: JobRow
  payload: MandateChargePayload
  chain: EvmChain
  subscription: SubscriptionRow
  state: EvmMandateState
  amount: bigint
}

/**
 * Job `evm.mandate_charge`, one per period's payment (armed again for each retry of that period): submits
 * the buyer's Permit2 grant once per subscription (`permit`, recorded under its first period's payment),
 * then pulls the period's price with Permit2 `transferFrom` to the collection address (`charge`), both
 * through the executor's sender: recorded under this claim's fence before they are broadcast, found again
 * after a crash, never signed twice. Before a new charge is signed, the chain decides at a pinned block
 * whether the mandate still stands (Permit2 allowance, expiration) and the buyer can pay (balance, ERC-20
 * allowance of Permit2): `revoked` cancels the subscription, `insufficient` is dunning's. A landed charge
 * succeeds its payment like a relay's (ledger, settlement batch) and advances the subscription in the
 * same database transaction.
 */
export function mandateChargeJob(settings: JobSettings): JobHandler {
  return {
    // A period's job is armed again for each retry; its claims keep counting (they are its fences).
    maxAttempts: 50,
    async run(job, ctx) {
      const payload = job.payload as MandateChargePayload
      const subscription = await ctx.db
        .selectFrom('subscriptions')
        .selectAll()
        .where('id', '=', payload.subscriptionId)
        .executeTakeFirstOrThrow()
      const state = (payload.mandate?.state ?? subscription.mandate) as EvmMandateState | null
      if (!state) throw new Error(`Subscription ${subscription.id} has no mandate to charge.`)
      const { payment } = await loadPaymentAndSettlement(ctx.db, job.payment_id, undefined)
      if (payment.status !== 'processing') return { skipped: payment.status }
      const charge: Charge = {
        ctx,
        job,
        payload,
        chain: chainOf(settings, state.chain),
        subscription,
        state,
        amount: BigInt(payload.mandate?.amountPerPeriod ?? subscription.amount_per_period ?? '0'),
      }
      const inFlight = (await recordedSteps(ctx.db, job.payment_id, 'charge')).length > 0
      if (!inFlight && stopped(subscription.status))
        return unwanted(charge, `The subscription is ${subscription.status}.`)
      if (!inFlight) {
        let verdict = await chargeVerdict(charge)
        if (verdict === 'grant') {
          await submitGrant(settings, charge)
          verdict = await chargeVerdict(charge)
        }
        if (verdict === 'grant') throw new RetryLater('The Permit2 grant has not taken effect yet.')
        // The first period may run before the buyer's approve of Permit2 (sent by the wallet with the
        // grant) is mined: it waits for it as long as the grant itself could still be submitted.
        if (
          verdict === 'insufficient' &&
          payload.period === 0 &&
          Math.floor(ctx.now().getTime() / 1000) <= Number(state.sigDeadline)
        )
          throw new RetryLater("Waiting for the buyer's balance or approve of Permit2.")
        if (verdict !== 'ready') return report(charge, verdict)
      }
      // The last look before signing: a cancel since the job started charges nothing. (A cancel leaves
      // an armed charge to this job, so one landing after this look is a charge the job books.)
      const stillWanted = async () => {
        const { status, subscription } = await ctx.db
          .selectFrom('payments')
          .select((eb) => [
            'status',
            eb
              .selectFrom('subscriptions')
              .select('status')
              .where('id', '=', payload.subscriptionId)
              .as('subscription'),
          ])
          .where('id', '=', job.payment_id)
          .executeTakeFirstOrThrow()
        if (status !== 'processing') throw new ChargeNotWanted(`The period's payment is ${status}.`)
        if (stopped(subscription)) throw new ChargeNotWanted(`The subscription is ${subscription}.`)
      }
      const sent = await send(
        settings,
        charge,
        'charge',
        job.payment_id,
        transferFromCall(charge),
        stillWanted,
      ).catch((error: unknown) => {
        if (error instanceof Permit2Refused) return { refused: error.message }
        if (error instanceof ChargeNotWanted) return error
        throw error
      })
      if (sent instanceof ChargeNotWanted) return unwanted(charge, sent.message)
      if ('refused' in sent) {
        ctx.log.warn({ paymentId: job.payment_id, reason: sent.refused }, 'Mandate charge refused')
        return report(charge, (await chargeVerdict(charge)) === 'revoked' ? 'revoked' : 'insufficient')
      }
      const { hash, receipt } = sent
      const expected = { token: state.token, from: state.owner, to: charge.chain.executor.address }
      if (receipt.status !== 'success' || !hasTransfer(receipt, { ...expected, value: charge.amount })) {
        // It passed its simulation; the buyer's balance or allowance moved in its block. The next
        // attempt (dunning's) signs a new one.
        await setTxStatus(ctx.db, hash, 'reverted')
        return report(charge, 'insufficient', hash)
      }
      await succeed(settings, charge, hash)
      ctx.log.info({ paymentId: job.payment_id, hash, period: payload.period }, 'Charged a mandate period')
      return { hash, period: payload.period }
    },
    async onGiveUp(job, error, ctx) {
      // Nothing is in flight (retryWhileInFlight): the attempt counts as one the buyer could not pay.
      ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'Mandate charge gave up')
      const payload = job.payload as MandateChargePayload
      await inTransaction(ctx.db, async (trx) => {
        if (payload.period === 0)
          await failPayment(trx, {
            paymentId: job.payment_id,
            failureCode: 'chain_unavailable',
            now: ctx.now(),
          })
        else
          await reportLiveCharge(trx, {
            paymentId: job.payment_id,
            payload,
            outcome: { status: 'insufficient' },
            at: ctx.now(),
          })
      })
    },
  }
}

type Verdict = 'grant' | 'ready' | 'revoked' | 'insufficient'

/**
 * What the chain says of the next charge, read at one block at or past the newest seen, in one request to a
 * node that has it (a node behind proves nothing: its error is NodesBehind, a wait, never a failed try): `grant` while Permit2's nonce for (buyer, token, executor) has not passed the grant's
 * (never submitted: submit it, unless its deadline passed); `revoked` when the allowance left is short of
 * a period or expired (the buyer zeroed it, locked down, or invalidated the nonce); `insufficient` when
 * the buyer's balance or ERC-20 allowance of Permit2 is short; else `ready`.
 */
async function chargeVerdict({ chain, state, amount }: Charge): Promise<Verdict> {
  const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 })
  const blockNumber = head > chain.nodes.highest() ? head : chain.nodes.highest()
  const at = numberToHex(blockNumber)
  const call = (to: Address, data: Hex) => ({ method: 'eth_call', params: [{ to, data }, at] })
  const permit2Allowance = {
    abi: permit2AllowanceAbi,
    functionName: 'allowance',
    args: [state.owner, state.token, chain.executor.address],
  } as const
  const balanceOf = { abi: eip3009Abi, functionName: 'balanceOf', args: [state.owner] } as const
  const allowance = {
    abi: eip3009Abi,
    functionName: 'allowance',
    args: [state.owner, permit2Address],
  } as const
  // One request to a node at that block (a node behind it is NodesBehind: the job waits, never fails on it).
  const [block, permit2, balanceData, approvedData] = (await chain.nodes.readAt(blockNumber, [
    { method: 'eth_getBlockByNumber', params: [at, false] },
    call(permit2Address, encodeFunctionData(permit2Allowance)),
    call(state.token, encodeFunctionData(balanceOf)),
    call(state.token, encodeFunctionData(allowance)),
  ])) as [{ timestamp: Hex }, Hex, Hex, Hex]
  const timestamp = BigInt(block.timestamp)
  const [allowed, expiration, nonce] = decodeFunctionResult({ ...permit2Allowance, data: permit2 })
  const balance = decodeFunctionResult({ ...balanceOf, data: balanceData }) as bigint
  const approved = decodeFunctionResult({ ...allowance, data: approvedData }) as bigint
  if (BigInt(nonce) <= BigInt(state.nonce)) return timestamp > BigInt(state.sigDeadline) ? 'revoked' : 'grant'
  if (allowed < amount || timestamp > BigInt(expiration)) return 'revoked'
  if (balance < amount || approved < amount) return 'insufficient'
  return 'ready'
}

/** Permit2 `permit(owner, PermitSingle, signature)`, once per subscription, under its first payment. */
async function submitGrant(settings: JobSettings, charge: Charge): Promise<void> {
  const permit = permitOf(charge.state)
  const call = {
    to: permit2Address,
    data: encodeFunctionData({
      abi: permit2AllowanceAbi,
      functionName: 'permit',
      args: [
        permit.owner,
        {
          details: {
            token: permit.token,
            amount: permit.amount,
            expiration: Number(permit.expiration),
            nonce: Number(permit.nonce),
          },
          spender: permit.spender,
          sigDeadline: permit.sigDeadline,
        },
        charge.state.signature,
      ],
    }),
  }
  const paymentId = charge.subscription.first_payment_id
  const sent = await send(settings, charge, 'permit', paymentId, call).catch((error: unknown) => {
    // Refused in simulation: the nonce moved on meanwhile; the verdict that follows says how.
    if (error instanceof Permit2Refused) return undefined
    throw error
  })
  if (sent)
    await setTxStatus(charge.ctx.db, sent.hash, sent.receipt.status === 'success' ? 'succeeded' : 'reverted')
}

function transferFromCall({ chain, state, amount }: Charge): { to: Address; data: Hex } {
  return {
    to: permit2Address,
    data: encodeFunctionData({
      abi: permit2AllowanceAbi,
      functionName: 'transferFrom',
      args: [state.owner, chain.executor.address, amount, state.token],
    }),
  }
}

/**
 * Sends (or finds) the step's transaction under the claim's fence and waits for its receipt
 * (sendStepAndWait: recorded before it is broadcast, RetryLater while one is in flight or without a
 * receipt). Permit2's refusal and a charge no longer wanted come before anything is signed: nothing of
 * the step is in flight then, so they reach the caller as themselves.
 */
async function send(
  settings: JobSettings,
  { ctx, chain }: Charge,
  purpose: EvmTxPurpose,
  paymentId: string,
  call: { to: Address; data: Hex },
  stillWanted?: () => Promise<void>,
): Promise<{ hash: Hash; receipt: TransactionReceipt }> {
  const relayer = relayerOf(settings, chain)
  const refused = (reason: string) => new Permit2Refused(`Permit2 refused the ${purpose}: ${reason}`)
  const simulate = (sent?: { gas: bigint } & EvmFees) =>
    refuseOnRevert(
      chain.publicClient.call({
        account: chain.executor,
        to: call.to,
        data: call.data,
        ...(sent
          ? {
              gas: sent.gas,
              maxFeePerGas: sent.maxFeePerGas,
              maxPriorityFeePerGas: sent.maxPriorityFeePerGas,
              blockTag: 'pending' as const,
            }
          : {}),
      }),
      refused,
    )
  const step = { paymentId, purpose }
  const sendStep = async () =>
    (
      await sendOnce({
        db: ctx.db,
        chain,
        sender: relayer.sender,
        ...step,
        fence: ctx.fence,
        ...call,
        estimateGas: async () => {
          await simulate()
          return refuseOnRevert(
            chain.publicClient.estimateGas({ account: chain.executor, ...call, prepare: false } as never),
            refused,
          )
        },
        beforeSign: async (sent) => {
          await stillWanted?.()
          await simulate(sent)
        },
      })
    ).hash
  return sendStepAndWait(ctx.db, relayer.sender, relayer.watcher, step, sendStep, {
    timeoutMs: settings.receiptTimeoutMs,
    signal: ctx.signal,
    idle: ctx.idle,
  })
}

const stopped = (status: string | null | undefined) => status === 'cancelled' || status === 'ended'

/**
 * The subscription stopped before this period's charge was signed: nothing was sent, and the job (which
 * the cancel left at work) fails the period's payment under the claim's fence.
 */
async function unwanted(charge: Charge, reason: string) {
  const { ctx, job } = charge
  await inTransaction(ctx.db, async (trx) => {
    if (!(await holdFences(trx, [ctx.fence])).has(ctx.fence.jobId)) throw new FenceLost(ctx.fence)
    const { status } = await trx
      .selectFrom('payments')
      .select('status')
      .where('id', '=', job.payment_id)
      .forUpdate()
      .executeTakeFirstOrThrow()
    if (status === 'processing')
      await failPayment(trx, {
        paymentId: job.payment_id,
        failureCode: 'subscription_cancelled',
        now: ctx.now(),
      })
  })
  return { skipped: reason }
}

/** A charge that could not move money: the period's outcome, under the claim's fence. */
async function report(charge: Charge, outcome: Exclude<ChargeOutcome['status'], 'succeeded'>, hash?: Hash) {
  const { ctx, job, payload } = charge
  await inTransaction(ctx.db, async (trx) => {
    if (!(await holdFences(trx, [ctx.fence])).has(ctx.fence.jobId)) throw new FenceLost(ctx.fence)
    await reportLiveCharge(trx, {
      paymentId: job.payment_id,
      payload,
      outcome: { status: outcome },
      at: ctx.now(),
    })
  })
  charge.ctx.log.warn({ paymentId: job.payment_id, outcome, hash }, 'Mandate period not charged')
  return { outcome, ...(hash ? { hash } : {}) }
}

/**
 * The charge landed: its transaction, the payment's success (ledger entries, settlement item) and the
 * subscription's next period (or activation) in one database transaction, under the claim's fence.
 */
async function succeed(settings: JobSettings, charge: Charge, hash: Hash): Promise<void> {
  const { ctx, job, chain, payload, amount, state } = charge
  const asset = chain.assets.find((a) => a.token.toLowerCase() === state.token.toLowerCase())
  const { settlementDestination } = await loadPaymentAndSettlement(ctx.db, job.payment_id, asset?.id)
  const destination = asset && settlementAddress(chain, settlementDestination)
  const fee = asset ? (amount * BigInt(asset.settlementFeeBps)) / 10_000n : 0n
  const holder = holderOf(chain.caip2, chain.executor.address)
  const batched: BatchedSettlement | undefined =
    asset && destination !== undefined && amount - fee > 0n
      ? {
          chain: chain.caip2,
          asset: asset.id,
          destination,
          amount: amount - fee,
          intervalMs: settings.settlementIntervalMs,
          jobKind: evmJobKinds.settle,
          holder,
          fee,
        }
      : undefined
  const unsettled = asset && !batched ? { asset: asset.id, holder, value: amount } : undefined
  await inTransaction(ctx.db, async (trx) => {
    if (!(await holdFences(trx, [ctx.fence])).has(ctx.fence.jobId)) throw new FenceLost(ctx.fence)
    await setTxStatus(trx, hash, 'succeeded')
    await succeedPayments(
      trx,
      [{ paymentId: job.payment_id, txId: hash, settlement: batched, unsettled }],
      ctx.now(),
    )
    const outcome = { status: 'succeeded', txId: hash } as const
    await reportLiveCharge(trx, { paymentId: job.payment_id, payload, outcome, at: ctx.now() })
  })
}
