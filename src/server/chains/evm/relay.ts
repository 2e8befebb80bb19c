import {
  type Address,
  BaseError,
  ExecutionRevertedError,
  encodeFunctionData,
  type Hash,
  type Hex,
  type TransactionReceipt,
} from 'viem'
import type { Fence } from '../../jobs/fence.js'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import type { PaymentFinisher } from '../../payments/finisher.js'
import {
  coolDownPayer,
  GasBudgetExhausted,
  PayerCoolingDown,
  type RelayGuardSettings,
  recordLandedSend,
  reserveExecutorFee,
  SendReverted,
  settleGasCharge,
} from '../../payments/relayGuards.js'
import type { BatchedSettlement } from '../../payments/settlementItems.js'
import { loadPaymentAndSettlement } from '../../payments/settlements.js'
import type { Db } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import { type Authorization, authorizationFromJson } from './authorization.js'
import type { EvmChain } from './chain.js'
import { type Collection, type CollectionCall, collectionOf, relayCall } from './collection.js'
import { type EvmFailureCode, evmJobKinds, failPayment, type RelayPayload } from './outcome.js'
import { payerSubjects } from './payerCooldown.js'
import { classifyPayerSignature, factoryRefusal, type PayerSignature } from './payerSignature.js'
import { settlementAddress } from './quote.js'
import type { EvmFees, EvmSender } from './sender.js'
import {
  type BumpGuard,
  recordedSteps,
  retryWhileInFlight,
  type SendOnceParameters,
  StepCancelled,
  sendAndWait,
  sendOnce,
  setTxStatus,
  withGasHeadroom,
} from './transactions.js'
import { hasTransfer, refuseOnRevert } from './transfers.js'
import type { EvmWatcher } from './watcher.js'

/** The token refused the authorization (used nonce, expired, bad signature, balance short): final. */
class AuthorizationRefused extends Error {}

/** An undeployed account cannot be deployed as its ERC-6492 wrapper says (factory refused or reverting): final. */
class DeploymentRefused extends Error {}

/**
 * A chain's sending pipeline in this process: the executor key's sender, the chain's watcher, and the
 * finisher that succeeds the payments a block paid together.
 */
export interface EvmRelayer {
  sender: EvmSender
  watcher: EvmWatcher
  finisher: PaymentFinisher
}

export interface JobSettings {
  chains: ReadonlyMap<string, EvmChain>
  relayers: ReadonlyMap<string, EvmRelayer>
  /** How long one run waits for a receipt before handing the job back (RetryLater). */
  receiptTimeoutMs: number
  /** How long a settlement batch collects payments before its transfer. */
  settlementIntervalMs: number
  /** Payer cool-downs and per-credential gas budgets (payments/relayGuards.ts). */
  guards: RelayGuardSettings
  /**
   * config.fastPaths (fastPath.ts): a relay job's first send skips the lookup of earlier records; its fee
   * reservation is taken by the sender with its group's record.
   */
  fastPaths: boolean
}

export function chainOf(settings: JobSettings, caip2: string): EvmChain {
  const chain = settings.chains.get(caip2)
  // Configuration changed under a queued job: retry (an operator may put the chain back), then give up.
  if (!chain) throw new Error(`Chain ${caip2} is not configured on this server.`)
  return chain
}

export function relayerOf(settings: JobSettings, chain: EvmChain): EvmRelayer {
  return settings.relayers.get(chain.caip2)!
}

/**
 * Gasless payments: submits the buyer's authorization from the executor, waits for the receipt, checks the
 * Transfer log, and finishes the payment (then queues the settlement). Exactly once: see sendOnce.
 */
export function relayJob(settings: JobSettings): JobHandler {
  return {
    async run(job, ctx) {
      const payload = job.payload as RelayPayload
      const chain = chainOf(settings, payload.chain)
      // The merchant's settlement destination comes with the payment: one statement, not a second after the receipt.
      const { payment, settlementDestination } = await loadPaymentAndSettlement(
        ctx.db,
        job.payment_id,
        payload.direct ? undefined : payload.asset,
      )
      if (payment.status !== 'processing') return { skipped: payment.status }
      const collection = collectionOf(chain, payload)
      const fail = failing(settings, ctx, chain, job.payment_id, payload, collection.from)
      // By the payer's code now, not at confirm: an account deployed since (by this job's own earlier
      // run, or by its owner) is relayed with its inner signature and no deployment.
      const signed = await classifyPayerSignature(chain, collection.from, payload.signature)
      if (signed.kind === 'undeployed') {
        if (!payload.authorization) return fail('deployment_refused', permit2CannotDeploy)
        const authorization = authorizationFromJson(payload.authorization)
        const deployed = await deployAccount(
          settings,
          ctx,
          chain,
          job.payment_id,
          payload,
          authorization,
          signed,
        )
        if (deployed) return deployed
      }
      // Readiness is a question before the first send only: once a relay is recorded in flight, its own
      // receipt decides (a landed Permit2 pull has used the allowance the check would wait for).
      // (Only collections with a readiness check pay for the lookup: EIP-3009 relays have none.)
      const waiting =
        collection.ready && (await recordedSteps(ctx.db, job.payment_id, 'relay')).length === 0
          ? await collection.ready()
          : undefined
      if (waiting?.final) return fail(waiting.code, waiting.reason)
      if (waiting) throw new RetryLater(waiting.reason)
      const call = collection.call(signed.signature)
      const relayer = relayerOf(settings, chain)
      // What a new relay must pass once its gas limit and fees are fixed, before it is signed: simulated
      // as sent, then (one round trip) no earlier revert of the payment, no cool-down of the payer, room
      // in the payer's and the caller's budgets, the payment's one reservation raised to its worst case.
      // With fast paths on, the reservation is the sender's: taken for its whole group in one call, under
      // the key's lock and in the transaction that records the relay (sender.ts), not one call per relay.
      const reservation = async (sent: { gas: bigint } & EvmFees) => ({
        paymentId: job.payment_id,
        credentialId: payload.credentialId,
        subjects: await payerSubjects(chain, collection.from),
        amount: sent.gas * sent.maxFeePerGas,
        guards: settings.guards,
      })
      const beforeSign = async (sent: { gas: bigint } & EvmFees) => {
        await simulateCollection(chain, call, sent)
        if (!settings.fastPaths)
          await reserveExecutorFee(ctx.db, settings.guards, {
            chainId: chain.caip2,
            ...(await reservation(sent)),
          })
      }
      // The first claim's first send: no record of this step can exist yet (SendOnceParameters.noPriorRecord).
      let first = settings.fastPaths && job.attempts === 1
      const send = () => {
        const noPriorRecord = first
        first = false
        return submitCollection(ctx.db, chain, relayer.sender, job.payment_id, call, {
          fence: ctx.fence,
          beforeSign,
          ...(settings.fastPaths ? { reservation } : {}),
          beforeBump: guardFeeBump(ctx.db, settings.guards),
          noPriorRecord,
          asSentOnly: settings.fastPaths,
        })
      }
      let sent: Awaited<ReturnType<typeof sendAndWait>>
      const release = await relayer.sender.slot()
      try {
        sent = await sendAndWait(relayer.watcher, { paymentId: job.payment_id, purpose: 'relay' }, send, {
          timeoutMs: settings.receiptTimeoutMs,
          signal: ctx.signal,
          idle: ctx.idle,
        })
      } catch (error) {
        const refused = refusalBeforeSigning(error)
        if (refused) return fail(refused, (error as Error).message)
        throw await retryWhileInFlight(ctx.db, job.payment_id, 'relay', error)
      } finally {
        release()
      }
      const { hash, receipt } = sent
      ctx.log.info(
        { paymentId: job.payment_id, hash, method: collection.method },
        'Relayed the payer signature',
      )
      if (!receipt) throw new RetryLater(`Relay transaction ${hash} has no receipt yet.`)
      return finishRelay(settings, ctx, chain, job, payload, collection, receipt, settlementDestination)
    },
    async onGiveUp(job, error, ctx) {
      const payload = job.payload as RelayPayload
      const chain = settings.chains.get(payload.chain)
      if (!chain) {
        await failPayment(ctx, job.payment_id, 'chain_unavailable', `Relay did not land: ${String(error)}`)
        return
      }
      const from = collectionOf(chain, payload).from
      await failing(
        settings,
        ctx,
        chain,
        job.payment_id,
        payload,
        from,
      )('chain_unavailable', `Relay did not land: ${String(error)}`)
    },
  }
}

/** The payment's failure for a refusal thrown before anything was signed (or a send cancelled), if `error` is one. */
function refusalBeforeSigning(error: unknown): EvmFailureCode | undefined {
  if (error instanceof AuthorizationRefused) return 'authorization_rejected'
  if (error instanceof DeploymentRefused) return 'deployment_refused'
  if (error instanceof SendReverted) return 'relay_reverted'
  const refused = budgetRefusal(error)
  if (refused) return refused
  // Replaced by a cancellation after its fee bump was refused: the refusal's code, kept with the
  // cancellation (a cancellation recorded before migration 036 has none: as a relay that never lands).
  if (error instanceof StepCancelled)
    return budgetRefusalCodes.find((code) => code === error.code) ?? 'chain_unavailable'
  return undefined
}

/** The refusals of a fee bump that replace the send with a cancellation (guardFeeBump). */
const budgetRefusalCodes = [
  'payer_gas_budget_exhausted',
  'gas_budget_exhausted',
  'payer_cooling_down',
] as const satisfies readonly EvmFailureCode[]

/** A budget's refusal of a fee bump as the payment's failure code; undefined for any other error. */
function budgetRefusal(error: unknown): (typeof budgetRefusalCodes)[number] | undefined {
  if (error instanceof PayerCoolingDown) return 'payer_cooling_down'
  if (error instanceof GasBudgetExhausted)
    return error.scope === 'payer' ? 'payer_gas_budget_exhausted' : 'gas_budget_exhausted'
  return undefined
}

/**
 * How the relay job fails a payment: its one reservation settled first (released when its sends cost
 * nothing; else charged what they cost: `spent`, the last send's, plus any that landed ahead of it), and
 * a payer whose payment cost the executor anything without paying is cooled down.
 */
function failing(
  settings: JobSettings,
  ctx: JobRunContext,
  chain: EvmChain,
  paymentId: string,
  payload: RelayPayload,
  payer: Address,
) {
  return async (
    code: EvmFailureCode,
    reason: string,
    sent: { spent?: bigint; cooldownReason?: string; reverted?: Hash } = {},
  ) => {
    const charged = await settleGasCharge(ctx.db, {
      chainId: chain.caip2,
      credentialId: payload.credentialId,
      paymentId,
      payer: payer.toLowerCase(),
      spent: sent.spent ?? 0n,
    })
    if (charged > 0n)
      await coolDownPayer(ctx.db, {
        chainId: chain.caip2,
        subjects: await payerSubjects(chain, payer),
        settings: settings.guards,
        reason:
          sent.cooldownReason ??
          `its payment ${paymentId} cost the executor ${charged} wei and paid nothing (${code})`,
        paymentId,
      })
    // Marked reverted only once charged: a run that stops in between finds the revert, not a free retry.
    if (sent.reverted) await setTxStatus(ctx.db, sent.reverted, 'reverted')
    return failPayment(ctx, paymentId, code, reason)
  }
}

/**
 * Fee bumps of a payer's sends (the relay, an ERC-6492 deployment): the payment's one reservation is
 * raised to the replacement's worst case (its gas limit x its bumped max fee) under the payer's and the
 * caller's budgets before it is signed. Past either (or with the payer cooled down meanwhile), the send is
 * cancelled instead: a 0-value transfer of the executor to itself at the bumped fees takes its nonce, at
 * the service's cost, so one payer's send left below the market fee cannot hold up the key's later nonces
 * (every other payment on that key); the payment then fails (StepCancelled) with the refusal's code
 * (`payer_gas_budget_exhausted`, `gas_budget_exhausted`, `payer_cooling_down`) and its authorization stays
 * unused (docs/security-model.md, "Fee bumps"). A replacement cannot be simulated again on the node: every state the node answers
 * from holds the transaction it replaces (on Anvil even a block by number), so the replacement reads as
 * its own duplicate (an authorization already used). Only one of the nonce's transactions can land, so
 * a bump adds no revert, only fees, and those are what the reservation bounds.
 */
export function guardFeeBump(db: Db, guards: RelayGuardSettings): BumpGuard {
  return async (row, sent) => {
    if (row.purpose !== 'relay' && row.purpose !== 'deploy') return
    try {
      await reserveExecutorFee(db, guards, {
        chainId: row.chain_id,
        paymentId: row.payment_id,
        subjects: [],
        amount: sent.gas * sent.maxFeePerGas,
      })
    } catch (error) {
      const refused = budgetRefusal(error)
      if (refused) return { cancel: refused }
      throw error
    }
  }
}

/**
 * A call from the executor exactly as it will be signed (gas limit, fees, the pending block); throws
 * `refused` when it reverts (any other failure, the node unreachable, passes as is).
 */
async function simulateAsSent(
  chain: EvmChain,
  sent: { to: Address; data: Hex; gas: bigint } & EvmFees,
  refused: (reason: string) => Error,
): Promise<void> {
  try {
    await chain.publicClient.call({
      account: chain.executor.address,
      to: sent.to,
      data: sent.data,
      gas: sent.gas,
      maxFeePerGas: sent.maxFeePerGas,
      maxPriorityFeePerGas: sent.maxPriorityFeePerGas,
      blockTag: 'pending',
    })
  } catch (error) {
    const reverted = error instanceof BaseError && error.walk((e) => e instanceof ExecutionRevertedError)
    if (reverted instanceof ExecutionRevertedError) throw refused(reverted.details || reverted.shortMessage)
    throw error
  }
}

/**
 * The ERC-6492 step: the executor deploys the payer's account through its (allow-listed) factory, as a
 * recorded transaction of its own (purpose `deploy`, exactly once like the relay). Before it is signed, the
 * deployment and the relay are simulated together (so an account that would not pay is never deployed),
 * then the deployment alone exactly as it will be sent, and it passes the relay's guard (reservation,
 * budgets, cool-down). A deployment that reverts on chain anyway fails the payment, is charged and cools
 * the payer down; one that lands stays in the payment's reservation until the relay decides.
 * Returns the payment's failure when the deployment is refused; undefined once the account is there.
 */
async function deployAccount(
  settings: JobSettings,
  ctx: JobRunContext,
  chain: EvmChain,
  paymentId: string,
  payload: RelayPayload,
  authorization: Authorization,
  signed: Extract<PayerSignature, { kind: 'undeployed' }>,
) {
  const fail = failing(settings, ctx, chain, paymentId, payload, authorization.from)
  const refused = factoryRefusal(chain, signed.factory)
  if (refused && !refused.valid) return fail('deployment_refused', `The account ${refused.reason}.`)
  const relayer = relayerOf(settings, chain)
  const deployment = { to: signed.factory, data: signed.factoryData }
  const send = async () => {
    const { hash } = await sendOnce({
      db: ctx.db,
      chain,
      sender: relayer.sender,
      paymentId,
      purpose: 'deploy',
      fence: ctx.fence,
      ...deployment,
      estimateGas: async () => {
        await simulateDeployAndRelay(chain, authorization, signed)
        return chain.publicClient.estimateGas({ account: chain.executor, ...deployment, prepare: false })
      },
      beforeSign: async (sent) => {
        await simulateAsSent(
          chain,
          { ...deployment, ...sent },
          (reason) => new DeploymentRefused(`The factory ${signed.factory} would revert as sent: ${reason}`),
        )
        await reserveExecutorFee(ctx.db, settings.guards, {
          chainId: chain.caip2,
          paymentId,
          credentialId: payload.credentialId,
          subjects: await payerSubjects(chain, authorization.from),
          amount: sent.gas * sent.maxFeePerGas,
        })
      },
      beforeBump: guardFeeBump(ctx.db, settings.guards),
    })
    return hash
  }
  let sent: Awaited<ReturnType<typeof sendAndWait>>
  try {
    sent = await sendAndWait(relayer.watcher, { paymentId, purpose: 'deploy' }, send, {
      timeoutMs: settings.receiptTimeoutMs,
      signal: ctx.signal,
      idle: ctx.idle,
    })
  } catch (error) {
    const refusal = refusalBeforeSigning(error)
    if (refusal)
      return fail(refusal === 'relay_reverted' ? 'deployment_refused' : refusal, (error as Error).message)
    throw await retryWhileInFlight(ctx.db, paymentId, 'deploy', error)
  }
  if (!sent.receipt) throw new RetryLater(`Deployment ${sent.hash} has no receipt yet.`)
  const cost = sent.receipt.gasUsed * sent.receipt.effectiveGasPrice
  if (sent.receipt.status !== 'success') {
    // It passed a simulation of exactly what was sent: what made it revert is nothing a simulation here
    // reproduces. Deploying again would let the payer repeat that at the executor's cost.
    return fail(
      'deployment_refused',
      `Deployment ${sent.hash} reverted on chain after passing its simulation; ${cost} wei of gas spent; the payer is cooled down.`,
      {
        spent: cost,
        cooldownReason: `its deployment ${sent.hash} reverted on chain after passing its simulation`,
        reverted: sent.hash,
      },
    )
  }
  await setTxStatus(ctx.db, sent.hash, 'succeeded')
  await recordLandedSend(ctx.db, { chainId: chain.caip2, paymentId, cost })
  ctx.log.info({ paymentId, hash: sent.hash, account: authorization.from }, 'Deployed an ERC-6492 account')
  const code = await chain.publicClient.getCode({ address: authorization.from })
  if (code === undefined || code === '0x') {
    return fail('deployment_refused', `Deployment ${sent.hash} left no code at ${authorization.from}.`)
  }
  return undefined
}

/** Both steps of an undeployed account's payment in one `eth_simulateV1`, as the executor would send them. */
async function simulateDeployAndRelay(
  chain: EvmChain,
  authorization: Authorization,
  signed: Extract<PayerSignature, { kind: 'undeployed' }>,
) {
  const { results } = await chain.publicClient.simulateCalls({
    account: chain.executor.address,
    calls: [
      { to: signed.factory, data: signed.factoryData },
      { to: authorization.token, ...relayCall(authorization, signed.signature) },
    ],
  })
  const [deployment, relay] = results
  if (deployment?.status !== 'success')
    throw new DeploymentRefused(`The factory ${signed.factory} would revert: ${String(deployment?.error)}`)
  if (relay?.status !== 'success')
    throw new DeploymentRefused(
      `The token would refuse the authorization once the account is deployed: ${String(relay?.error)}`,
    )
}

const permit2CannotDeploy =
  'An undeployed (ERC-6492) account cannot pay through Permit2: Permit2 does not deploy the account.'

/** The relay step alone: records and broadcasts (or finds) the relay transaction; returns its hash. */
export function submitRelay(
  db: Db,
  chain: EvmChain,
  sender: EvmSender,
  paymentId: string,
  authorization: Authorization,
  signature: `0x${string}`,
): Promise<Hash> {
  return submitCollection(db, chain, sender, paymentId, {
    to: authorization.token,
    ...relayCall(authorization, signature),
  })
}

async function submitCollection(
  db: Db,
  chain: EvmChain,
  sender: EvmSender,
  paymentId: string,
  call: CollectionCall,
  options: {
    fence?: Fence | undefined
    beforeSign?: SendOnceParameters['beforeSign']
    reservation?: SendOnceParameters['reservation']
    beforeBump?: BumpGuard
    noPriorRecord?: boolean
    /**
     * Simulated only as sent (beforeSign, which every send here runs), not also plainly before its gas
     * estimate (a FastPath, fastPath.ts): -1 eth_call per relay. Either simulation refuses a used or
     * expired signature by name before anything is signed; an estimate a block's relays share is never
     * one relay's verdict on the others (EvmSender.gas).
     */
    asSentOnly?: boolean
  } = {},
): Promise<Hash> {
  const { fence, beforeSign } = options
  const { hash } = await sendOnce({
    db,
    chain,
    sender,
    paymentId,
    purpose: 'relay',
    ...(fence ? { fence } : {}),
    ...(options.noPriorRecord ? { noPriorRecord: true } : {}),
    to: call.to,
    data: encodeFunctionData(call as Parameters<typeof encodeFunctionData>[0]),
    // The estimate is the contract's verdict before gas is spent: a used or expired signature is refused
    // by name.
    estimateGas: () => estimateCollection(chain, sender, call, !options.asSentOnly),
    // Exactly what is signed, where it will run: a payer whose signature is valid only at gas price 0
    // (a plain eth_call) or only in the latest block is refused here, before any gas is spent.
    beforeSign: beforeSign ?? ((sent) => simulateCollection(chain, call, sent)),
    ...(options.reservation ? { reservation: options.reservation } : {}),
    ...(options.beforeBump ? { beforeBump: options.beforeBump } : {}),
  })
  return hash
}

const refusedBy = (reason: string) =>
  new AuthorizationRefused(`The contract refused the payer's signature: ${reason}`)

/**
 * Why the token would refuse the EIP-3009 relay now (its refusal, as a message), or, when it would take
 * it, what the relay may cost at worst (gas limit x max fee per gas, wei): simulated as the executor
 * would send it (estimated gas limit with its headroom, today's fees, the pending block). Other failures
 * (the node unreachable) throw.
 */
export async function relayRefusal(
  chain: EvmChain,
  authorization: Authorization,
  signature: `0x${string}`,
): Promise<{ refusal: string } | { worstCaseFee: bigint }> {
  try {
    await simulateRelay(chain, authorization, signature)
    const call = { to: authorization.token, ...relayCall(authorization, signature) }
    const [gas, fees] = await Promise.all([
      refuseOnRevert(
        chain.publicClient.estimateContractGas({
          account: chain.executor,
          prepare: false,
          address: call.to,
          abi: call.abi,
          functionName: call.functionName,
          args: call.args,
        } as Parameters<typeof chain.publicClient.estimateContractGas>[0]),
        refusedBy,
      ),
      chain.publicClient.estimateFeesPerGas(),
    ])
    const limit = withGasHeadroom(gas)
    await simulateCollection(chain, call, {
      gas: limit,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    })
    return { worstCaseFee: limit * fees.maxFeePerGas }
  } catch (error) {
    if (error instanceof AuthorizationRefused) return { refusal: error.message }
    throw error
  }
}

/** Throws AuthorizationRefused when the token would refuse the EIP-3009 relay now. */
function simulateRelay(chain: EvmChain, authorization: Authorization, signature: `0x${string}`) {
  return simulateCollection(chain, { to: authorization.token, ...relayCall(authorization, signature) })
}

/**
 * Throws AuthorizationRefused when the contract would refuse the collection now. With `sent` (the gas
 * limit and fees a transaction is about to be signed with), it is simulated as that transaction: from
 * the executor, with those fields, at the pending block. A plain eth_call runs at gas price 0 in the
 * latest block, and a payer account can answer differently there than on chain.
 */
async function simulateCollection(chain: EvmChain, call: CollectionCall, sent?: { gas: bigint } & EvmFees) {
  const simulation = refuseOnRevert(
    chain.publicClient.simulateContract({
      account: chain.executor,
      address: call.to,
      abi: call.abi,
      functionName: call.functionName,
      args: call.args,
      ...(sent
        ? {
            gas: sent.gas,
            maxFeePerGas: sent.maxFeePerGas,
            maxPriorityFeePerGas: sent.maxPriorityFeePerGas,
            blockTag: 'pending',
          }
        : {}),
    } as Parameters<typeof chain.publicClient.simulateContract>[0]),
    refusedBy,
  )
  try {
    await simulation
  } catch (error) {
    // Out of gas at the limit about to be signed: the estimate was short (a node's bad answer), not the
    // payer's refusal. Nothing is sent; the job estimates again on its next attempt.
    if (sent && /out of gas|outofgas/i.test(String(error instanceof Error ? error.message : error)))
      throw new Error(`The relay would run out of gas at the limit ${sent.gas}; estimating again.`)
    throw error
  }
}

/**
 * The collection's gas after its simulation: the contract's verdict by one eth_call (a used or expired
 * signature is refused by name, nothing paid), the gas shared by the key's collections of this contract
 * and function within a block.
 */
async function estimateCollection(
  chain: EvmChain,
  sender: EvmSender,
  call: CollectionCall,
  simulateFirst = true,
): Promise<bigint> {
  if (simulateFirst) await simulateCollection(chain, call)
  return sender.gas(`${call.to}:${call.functionName}`, () =>
    refuseOnRevert(
      chain.publicClient.estimateContractGas({
        account: chain.executor,
        // Only eth_estimateGas: preparing a local account's request would fill nonce and fees too.
        prepare: false,
        address: call.to,
        abi: call.abi,
        functionName: call.functionName,
        args: call.args,
      } as Parameters<typeof chain.publicClient.estimateContractGas>[0]),
      refusedBy,
    ),
  )
}

async function finishRelay(
  settings: JobSettings,
  ctx: JobRunContext,
  chain: EvmChain,
  job: JobRow,
  payload: RelayPayload,
  collection: Collection,
  receipt: TransactionReceipt,
  settlementDestination: string | undefined,
) {
  const hash = receipt.transactionHash
  const spent = receipt.gasUsed * receipt.effectiveGasPrice
  const fail = failing(settings, ctx, chain, job.payment_id, payload, collection.from)
  if (receipt.status !== 'success') {
    // It passed a simulation of exactly what was sent, so what made it revert is something no
    // simulation here reproduces (state changed in its block ahead of it: an allowance withdrawn, an
    // account's answer flipped; out of gas by the same means). Relaying again would let the payer
    // repeat that at the executor's cost: one revert fails the payment, charges its gas (and a
    // deployment's ahead of it) to the payer and the caller's credential and cools the payer down.
    return fail(
      'relay_reverted',
      `Relay transaction ${hash} reverted on chain after passing its simulation; ${spent} wei of gas spent; the payer is cooled down.`,
      {
        spent,
        cooldownReason: `its relay ${hash} reverted on chain after passing its simulation`,
        reverted: hash,
      },
    )
  }
  const expected = {
    token: collection.token,
    from: collection.from,
    to: collection.to,
    value: collection.value,
  }
  if (!hasTransfer(receipt, expected)) {
    await setTxStatus(ctx.db, hash, 'succeeded')
    return fail('transfer_missing', `Relay ${hash} moved no matching Transfer.`, { spent })
  }
  // The payer's money moved: the reservation is given back, with fast paths on in the finisher's
  // transaction that succeeds the payment (one statement for the block), else here on its own.
  if (!settings.fastPaths)
    await settleGasCharge(ctx.db, {
      chainId: chain.caip2,
      credentialId: payload.credentialId,
      paymentId: job.payment_id,
    })
  const asset = payload.direct ? undefined : chain.asset(payload.asset)
  const destination = asset && settlementAddress(chain, settlementDestination)
  const fee = asset ? (collection.value * BigInt(asset.settlementFeeBps)) / 10_000n : 0n
  // The ledger's holding address: the money is the service's to account for only when it reached it.
  const holder =
    collection.to.toLowerCase() === chain.executor.address.toLowerCase()
      ? holderOf(chain.caip2, collection.to)
      : undefined
  const amount = collection.value - fee
  const batched: BatchedSettlement | undefined =
    destination !== undefined && amount > 0n
      ? {
          chain: chain.caip2,
          asset: payload.asset,
          destination,
          amount,
          intervalMs: settings.settlementIntervalMs,
          jobKind: evmJobKinds.settle,
          holder,
          fee,
        }
      : undefined
  // Gasless money with nowhere to settle stays at the collection address: the ledger's float.
  const unsettled =
    holder !== undefined && !batched ? { asset: payload.asset, holder, value: collection.value } : undefined
  // With the other payments of its block: the transaction's record and the payment in one database
  // transaction for all of them.
  await relayerOf(settings, chain).finisher.succeed({
    paymentId: job.payment_id,
    txId: hash,
    settlement: batched,
    unsettled,
    ...(settings.fastPaths ? { releaseReservation: chain.caip2 } : {}),
  })
  ctx.log.info({ paymentId: job.payment_id, hash }, 'Live EVM payment succeeded')
  return { hash }
}
