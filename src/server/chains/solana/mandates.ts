import {
  createApproveCheckedInstruction,
  getAssociatedTokenAddressSync,
  unpackAccount,
} from '@solana/spl-token'
import { PublicKey, Transaction } from '@solana/web3.js'
import { formatAccountId, sameCaip } from '../../../caip/caip.js'
import { type Fence, FenceLost, holdFences } from '../../jobs/fence.js'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import { failPayment, loadPayment, succeedPayments } from '../../payments/lifecycle.js'
import { loadPaymentAndSettlement } from '../../payments/settlements.js'
import { type Db, inTransaction } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import type { ChargeOutcome } from '../../subscriptions/lifecycle.js'
import { type MandateChargePayload, reportLiveCharge } from '../../subscriptions/liveCharges.js'
import type { MandateDraft, MandateQuoteContext } from '../types.js'
import { buildAction } from './build.js'
import type { MintInfo, SolanaChain } from './chain.js'
import { solanaJobKinds } from './jobKinds.js'
import { solanaFailureCode } from './jobs.js'
import { landTransaction } from './land.js'
import { findTransaction, latestTransaction, markState, recordTransaction } from './store.js'
import { buildTransfer, serializeSigned } from './transaction.js'
import type { SolanaWatcher } from './watcher.js'

/**
 * Live Solana subscriptions (docs/subscriptions.md). The mandate is an SPL `ApproveChecked` of at most
 * price x periods of the buyer's token account to the service key (the charging key the terms name);
 * each period is a `transferChecked` the service signs as that delegate, recorded before it is sent
 * under the period's job fence and booked in the ledger like any payment's transfer. What the chain
 * says at each charge decides the outcome: the delegation gone or below the price is a revoke, a
 * balance below it is an unpaid period (dunning).
 */

export const mandateOptionKind = 'splDelegation'

/** The option state of a mandate: what the delegation grants in all (price x periods). */
export interface MandateOptionState {
  total?: string
}

/** What a Solana mandate holds (the subscription keeps it once active). */
export interface SolanaMandateState {
  kind: typeof mandateOptionKind
  /** The buyer's signed `ApproveChecked`, recorded at confirm: the first period's job lands it first. */
  approval: string | null
  /** What that approval delegates in all (checked on chain before the first charge). */
  delegatedAmount: string | null
}

/** The first period's option: one `build` action, the approval fetch builds (buildApproval). */
export function mandateDraft(chain: SolanaChain, ctx: MandateQuoteContext, etaS: number): MandateDraft {
  const total = ctx.tokenAmount * BigInt(ctx.mandate.totalPeriods)
  return {
    kind: mandateOptionKind,
    actions: [buildAction()],
    etaS,
    state: { total: total.toString() } satisfies MandateOptionState,
    spender: formatAccountId(chain.caip2, chain.service.publicKey.toBase58()),
  }
}

/**
 * The buyer's `ApproveChecked` of `total` to the service key, alone in its transaction (the wallet's
 * guard signs nothing else beside a delegation), the service paying the fee and signing first. No memo:
 * the same grant twice under one blockhash is the same delegation.
 */
export async function buildApproval(input: {
  chain: SolanaChain
  mint: MintInfo
  owner: PublicKey
  total: bigint
}): Promise<{ transaction: Transaction; blockhash: string; lastValidBlockHeight: number }> {
  const { chain, mint, owner } = input
  const latest = await chain.latestBlockhash()
  const transaction = new Transaction({
    feePayer: chain.service.publicKey,
    blockhash: latest.blockhash,
    lastValidBlockHeight: latest.lastValidBlockHeight,
  })
  transaction.add(
    createApproveCheckedInstruction(
      getAssociatedTokenAddressSync(mint.mint, owner, true, mint.programId),
      mint.mint,
      chain.service.publicKey,
      owner,
      input.total,
      mint.decimals,
      [],
      mint.programId,
    ),
  )
  transaction.partialSign(chain.service)
  return { transaction, blockhash: latest.blockhash, lastValidBlockHeight: latest.lastValidBlockHeight }
}

/** What the owner's token account allows the service, read at the newest slot this service has seen. */
export interface Delegation {
  exists: boolean
  mint: string | null
  delegate: string | null
  delegatedAmount: bigint
  balance: bigint
  /** A frozen account pays nothing until its mint's freeze authority thaws it. */
  frozen: boolean
}

/**
 * The node has not reached the slot the read was pinned at (-32016): nobody's verdict on the charge. A
 * RetryLater, so the charge job waits for a current node however long, and never counts it as a failed try.
 */
export class NodeBehind extends RetryLater {
  override name = 'NodeBehind'
}

const behindMinContextSlot = (error: unknown) =>
  (error as { code?: unknown })?.code === -32016 ||
  /minimum context slot/i.test(error instanceof Error ? error.message : String(error))

export async function readDelegation(
  chain: SolanaChain,
  mint: MintInfo,
  owner: PublicKey,
): Promise<Delegation> {
  const address = getAssociatedTokenAddressSync(mint.mint, owner, true, mint.programId)
  // Pinned: a node behind the newest slot seen cannot answer with an older state (a revoke, a top-up).
  const minContextSlot = chain.highestSlot()
  const { context, value } = await chain.connection
    .getAccountInfoAndContext(address, {
      commitment: chain.commitment,
      ...(minContextSlot > 0 ? { minContextSlot } : {}),
    })
    .catch((error: unknown) => {
      throw behindMinContextSlot(error) ? new NodeBehind(`${address.toBase58()}: ${String(error)}`) : error
    })
  chain.observeSlot(context.slot)
  if (!value)
    return { exists: false, mint: null, delegate: null, delegatedAmount: 0n, balance: 0n, frozen: false }
  const account = unpackAccount(address, value, mint.programId)
  return {
    exists: true,
    mint: account.mint.toBase58(),
    delegate: account.delegate?.toBase58() ?? null,
    delegatedAmount: account.delegatedAmount,
    balance: account.amount,
    frozen: account.isFrozen,
  }
}

/** What a charge of `amount` would meet: the mandate gone (or too small to pay it), no money, or go. */
export function chargeVerdict(
  delegation: Delegation,
  expected: { mint: PublicKey; delegate: PublicKey; amount: bigint },
): 'revoked' | 'insufficient' | 'ready' {
  if (
    !delegation.exists ||
    delegation.mint !== expected.mint.toBase58() ||
    delegation.delegate !== expected.delegate.toBase58() ||
    delegation.delegatedAmount < expected.amount
  )
    return 'revoked'
  return delegation.balance < expected.amount || delegation.frozen ? 'insufficient' : 'ready'
}

type ChainOf = (caip2: string) => { chain: SolanaChain; watcher: SolanaWatcher }

/** The job of `solanaJobKinds.mandateCharge`: one period's charge, exactly once whatever crashes. */
export function mandateChargeHandler(chainOf: ChainOf, settlementIntervalMs: number): JobHandler {
  return {
    maxAttempts: 50,
    run: (job, ctx) => chargePeriod(job, ctx, chainOf, settlementIntervalMs),
    async onGiveUp(job, error, ctx) {
      // The payment stays processing and the subscription's attempt in flight, for an operator.
      ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'Solana mandate charge abandoned')
    },
  }
}

/** What a period's job charges: the buyer's token account, the asset, the price, and the first period's grant. */
interface PeriodCharge {
  /** Base58 owner of the charged token account. */
  owner: string
  /** CAIP-19 of the mandate's asset. */
  asset: string
  /** The period's price, token minor units. */
  amount: bigint
  /** The first period: the grant its confirm recorded, landed and checked before the first charge. */
  grant?: SolanaMandateState
}

/**
 * The first period's charge is the mandate its confirm put in the payload (the subscription is not
 * active yet); a later period's is the mandate the subscription keeps.
 */
async function periodCharge(db: Db, payload: MandateChargePayload): Promise<PeriodCharge> {
  const ownerOf = (buyer: string) => buyer.slice(buyer.lastIndexOf(':') + 1)
  if (payload.mandate) {
    const { buyer, asset, amountPerPeriod, state } = payload.mandate
    const grant = state as unknown as SolanaMandateState
    return { owner: ownerOf(buyer), asset, amount: BigInt(amountPerPeriod), grant }
  }
  const row = await db
    .selectFrom('subscriptions')
    .select(['buyer', 'asset', 'amount_per_period'])
    .where('id', '=', payload.subscriptionId)
    .executeTakeFirstOrThrow()
  if (!row.buyer || !row.asset || !row.amount_per_period)
    throw new Error(`Subscription ${payload.subscriptionId} has no mandate to charge.`)
  return { owner: ownerOf(row.buyer), asset: row.asset, amount: BigInt(row.amount_per_period) }
}

async function chargePeriod(job: JobRow, ctx: JobRunContext, chainOf: ChainOf, settlementIntervalMs: number) {
  const { db } = ctx
  const payload = job.payload as MandateChargePayload
  const payment = await loadPayment(db, job.payment_id)
  if (payment.status !== 'processing') return { skipped: payment.status }
  const charge = await periodCharge(db, payload)
  const caip2 = charge.asset.slice(0, charge.asset.indexOf('/'))
  const { chain, watcher } = chainOf(caip2)
  const asset = chain.assets.find((a) => sameCaip(a.id, charge.asset))
  if (!asset) throw new Error(`${charge.asset} is not configured on ${caip2}.`)
  const mint = await chain.mintInfo(asset)
  const owner = new PublicKey(charge.owner)
  const { amount, grant } = charge
  const at = payload.at ? new Date(payload.at) : ctx.now()
  const delegate = chain.service.publicKey
  const finish = (outcome: ChargeOutcome) =>
    finishPeriod({
      db,
      chain,
      payload,
      charge,
      paymentId: payment.id,
      outcome,
      at,
      settlementIntervalMs,
      fence: ctx.fence,
    })

  if (grant?.approval) {
    const approval = await findTransaction(db, grant.approval)
    if (!approval) throw new Error(`No recorded Solana transaction ${grant.approval}.`)
    const landed = await landTransaction({ chain, watcher, tx: approval, ctx })
    if (landed.kind !== 'landed') {
      await failPayment(db, {
        paymentId: payment.id,
        failureCode: solanaFailureCode,
        now: at,
        fence: ctx.fence,
      })
      return { approval: approval.signature, outcome: landed.kind, error: landed.error }
    }
  }

  let tx = await latestTransaction(db, payment.id, 'charge')
  if (!tx || tx.state === 'failed' || tx.state === 'dropped') {
    // Nothing in flight for this period: the chain decides whether a charge can go.
    const delegation = await readDelegation(chain, mint, owner)
    let verdict = chargeVerdict(delegation, { mint: mint.mint, delegate, amount })
    // The first charge also proves the approval landed as granted (no other amount, delegate or mint).
    if (verdict !== 'revoked' && !tx && grant?.delegatedAmount != null) {
      if (delegation.delegatedAmount !== BigInt(grant.delegatedAmount)) verdict = 'revoked'
    }
    if (verdict !== 'ready') {
      await finish({ status: verdict })
      return { outcome: verdict }
    }
    const attempt = await db
      .selectFrom('solana_transactions')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('payment_id', '=', payment.id)
      .where('purpose', '=', 'charge')
      .executeTakeFirstOrThrow()
    const transfer = await buildTransfer({
      chain,
      mint,
      owner,
      recipient: delegate,
      authority: delegate,
      amount,
      memo: `caipay:charge:${payment.id}:${Number(attempt.count) + 1}`,
    })
    const recorded = await inTransaction(db, async (trx) => {
      // A subscription cancelled since the read is charged no more (cancel leaves a live period to us).
      const subscription = await trx
        .selectFrom('subscriptions')
        .select('status')
        .where('id', '=', payload.subscriptionId)
        .forUpdate()
        .executeTakeFirstOrThrow()
      if (subscription.status === 'cancelled' || subscription.status === 'ended') return false
      await recordTransaction(
        trx,
        {
          signature: transfer.signature,
          paymentId: payment.id,
          purpose: 'charge',
          chainId: chain.caip2,
          raw: serializeSigned(transfer.transaction).toString('base64'),
          blockhash: transfer.blockhash,
          lastValidBlockHeight: transfer.lastValidBlockHeight,
        },
        new Date(),
        ctx.fence,
      )
      return true
    })
    if (!recorded) {
      await failPayment(db, {
        paymentId: payment.id,
        failureCode: 'subscription_cancelled',
        now: at,
        fence: ctx.fence,
      })
      return { outcome: 'cancelled' }
    }
    tx = (await findTransaction(db, transfer.signature))!
  }
  const outcome = await landTransaction({ chain, watcher, tx, ctx })
  // It moved nothing: the next run reads the chain again and builds a new one if it still can go. One
  // that never landed costs nothing; one that failed on chain cost its fee, so those count to giving up.
  if (outcome.kind === 'dropped') throw new RetryLater(`Charge ${tx.signature} dropped: ${outcome.error}`)
  if (outcome.kind === 'failed') throw new Error(`Charge ${tx.signature} failed on chain: ${outcome.error}`)
  await finish({ status: 'succeeded', txId: tx.signature })
  return { signature: tx.signature, outcome: 'landed' }
}

/**
 * Books the period's verdict through the subscriptions' one lifecycle (reportLiveCharge): the charge's
 * payment succeeded with its ledger entries (and settlement item) and the subscription activated or moved
 * on, in one transaction; or the failure applied. Under the claim's fence (as EVM's charge job books):
 * a run whose claim was taken over read the chain before the holder did, and records nothing (FenceLost).
 */
async function finishPeriod(input: {
  db: Db
  chain: SolanaChain
  payload: MandateChargePayload
  charge: PeriodCharge
  paymentId: string
  outcome: ChargeOutcome
  at: Date
  settlementIntervalMs: number
  fence: Fence
}): Promise<void> {
  const { db, chain, payload, charge, paymentId, outcome, at, fence } = input
  const succeed = async (trx: Db) => {
    if (outcome.status !== 'succeeded') return
    const { settlementDestination } = await loadPaymentAndSettlement(trx, paymentId, charge.asset)
    const holder = holderOf(chain.caip2, chain.service.publicKey.toBase58())
    const { amount } = charge
    await markState(trx, outcome.txId, 'landed', null, new Date())
    await succeedPayments(
      trx,
      [
        {
          paymentId,
          txId: outcome.txId,
          settlement:
            settlementDestination === undefined
              ? undefined
              : {
                  chain: chain.caip2,
                  asset: charge.asset,
                  destination: settlementDestination,
                  amount,
                  intervalMs: input.settlementIntervalMs,
                  jobKind: solanaJobKinds.settle,
                  holder,
                },
          unsettled: settlementDestination ? undefined : { asset: charge.asset, holder, value: amount },
        },
      ],
      new Date(),
    )
  }
  await inTransaction(db, async (trx) => {
    if (!(await holdFences(trx, [fence])).has(fence.jobId)) throw new FenceLost(fence)
    await reportLiveCharge(trx, { paymentId, payload, outcome, at, succeed })
  })
}
