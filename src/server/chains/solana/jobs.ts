import { PublicKey } from '@solana/web3.js'
import { parseAccountId, sameCaip } from '../../../caip/caip.js'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import { assertSendsAllowed } from '../../ledger/reconcile.js'
import { reserveRefund } from '../../ledger/refunds.js'
import { depositsRefunding, finishDepositRefund } from '../../payments/deposits.js'
import type { FinalStatuses } from '../../payments/finalStatuses.js'
import { createPaymentFinisher, type PaymentFinisher } from '../../payments/finisher.js'
import { failPayment, loadPayment, settlePayment } from '../../payments/lifecycle.js'
import {
  coolDownPayer,
  type RelayGuardSettings,
  releaseReservations,
  settleGasCharge,
} from '../../payments/relayGuards.js'
import { closeSettlementBatch, finishSettlementBatch } from '../../payments/settlementBatches.js'
import type { SettlementBatchPayload } from '../../payments/settlementItems.js'
import { failRefund, loadRefund, noteRefundShortfall, succeedRefund } from '../../refunds/finish.js'
import { refundJobKinds } from '../../refunds/jobs.js'
import { fixSettlementAmount } from '../../refunds/settlement.js'
import type { Db } from '../../store/db.js'
import { inTransaction } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import type { AssetConfig } from '../types.js'
import type { SolanaChain } from './chain.js'
import { solanaJobKinds } from './jobKinds.js'
import { landTransaction } from './land.js'
import { scanSolanaTopUps } from './ledger.js'
import { mandateChargeHandler } from './mandates.js'
import type { SolanaTransactionRow } from './schema.js'
import {
  countTransactions,
  findTransaction,
  latestTransaction,
  loadBroadcast,
  markState,
  recordTransaction,
} from './store.js'
import { buildTransfer, serializeSigned } from './transaction.js'
import { createSolanaWatcher, type LandOutcome, type SolanaWatcher } from './watcher.js'

/** `failure_code` of a payment whose transaction failed on chain or could never land (renders null). */
export const solanaFailureCode = 'transaction_failed'

export interface BroadcastPayload {
  signature: string
  asset: string
  amount: string
  /** The transfer pays the merchant's destination itself (x402's `payTo`): no settlement step. */
  direct?: boolean
  /** The caller's credential: charged the fee of a transaction that fails on chain (payments/relayGuards.ts). */
  credentialId?: string
}

interface SettlePayload {
  asset: string
  amount: string
  destination: string
}

type ChainOf = (caip2: string) => { chain: SolanaChain; watcher: SolanaWatcher; finisher: PaymentFinisher }

/**
 * The broadcast and settlement handlers for every configured Solana cluster, for the job runner, with
 * one watcher per cluster that every job waiting on that chain shares.
 */
export function solanaJobHandlers(
  chains: readonly SolanaChain[],
  db: Db,
  /** How long a destination's settlement batch collects payments (config `settlement.intervalMs`). */
  settlementIntervalMs: number,
  /** Each chain's watcher by CAIP-2 (shared with its driver); one is made for a chain without. */
  watchers: ReadonlyMap<string, SolanaWatcher> = new Map(),
  /** Payer cool-downs and per-credential fee budgets (payments/relayGuards.ts); none when omitted. */
  guards?: RelayGuardSettings,
  /** The app's final status answers (FastPath): the finisher keeps what it wrote. */
  finals?: FinalStatuses,
  /** config.fastPaths (fastPath.ts): a landed payment's fee reservation is given back by its finisher. */
  fastPaths = false,
): Record<string, JobHandler> {
  const watched = new Map(
    chains.map((chain) => [
      chain.caip2,
      {
        chain,
        watcher: watchers.get(chain.caip2) ?? createSolanaWatcher(db, chain),
        // The watcher marked their transactions landed already, in one statement for the poll; their fee
        // reservations are given back with them.
        finisher: createPaymentFinisher(
          db,
          (trx, payments) =>
            releaseReservations(
              trx,
              chain.caip2,
              payments.filter((p) => p.releaseReservation === chain.caip2).map((p) => p.paymentId),
            ),
          finals,
        ),
      },
    ]),
  )
  const chainOf: ChainOf = (caip2) => {
    const found = watched.get(caip2)
    if (!found) throw new Error(`No Solana chain ${caip2} is configured.`)
    return found
  }
  return {
    [solanaJobKinds.broadcast]: {
      // Only the chain decides a payment's failure (landTransaction); "still in flight" (RetryLater)
      // never counts toward giving up. What counts are database or configuration errors, and after
      // those the payment stays processing for an operator: failing it could contradict the chain.
      maxAttempts: 20,
      run: (job, ctx) => broadcast(job, ctx, chainOf, settlementIntervalMs, guards, fastPaths),
      async onGiveUp(job, error, ctx) {
        ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'Solana broadcast abandoned')
      },
    },
    [refundJobKinds.solana]: {
      maxAttempts: 10,
      retryDelayMs: (attempts) => Math.min(10_000, 250 * 2 ** attempts),
      run: (job, ctx) => refund(job, ctx, chainOf),
      async onGiveUp(job, error, ctx) {
        // Only transfers that failed or could never land count toward giving up: nothing was sent.
        ctx.log.error({ refundId: job.refund_id, error: String(error) }, 'Solana refund abandoned')
        if (job.refund_id)
          await failRefund(ctx.db, {
            refundId: job.refund_id,
            failureCode: 'transfer_failed',
            now: new Date(),
          })
      },
    },
    [solanaJobKinds.depositRefund]: {
      maxAttempts: 10,
      retryDelayMs: (attempts) => Math.min(10_000, 250 * 2 ** attempts),
      run: (job, ctx) => refundDeposits(job, ctx, chainOf),
      async onGiveUp(job, error, ctx) {
        // The deposits stay `refunding` (their money in refunds owed) for an operator to look at.
        ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'Solana deposit refund abandoned')
      },
    },
    [solanaJobKinds.mandateCharge]: mandateChargeHandler(chainOf, settlementIntervalMs),
    [solanaJobKinds.settle]: {
      maxAttempts: 10,
      run: (job, ctx) => settle(job, ctx, chainOf),
      async onGiveUp(job, error, ctx) {
        ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'Solana settlement abandoned')
      },
    },
  }
}

/**
 * Sends the buyer's payment (recorded at confirm) and finishes the payment from what the chain says.
 * After success, a merchant with a crypto settlement for the asset gets its settlement as an item of the
 * open batch of that destination and asset, in the same database transaction as the status change: the
 * chain's finisher (payments/finisher.ts), which succeeds the payments one status poll found landed together.
 */
async function broadcast(
  job: JobRow,
  ctx: JobRunContext,
  chainOf: ChainOf,
  settlementIntervalMs: number,
  guards: RelayGuardSettings | undefined,
  fastPaths: boolean,
) {
  const { db } = ctx
  const payload = job.payload as BroadcastPayload
  // The merchant's settlement with the payment, in one statement, before the chain decides, so the
  // payments a status poll finds landed together reach the finisher together (one database transaction
  // for all of them).
  // Its recorded transaction in the same statement.
  const { payment, settlementDestination, tx } = await loadBroadcast(
    db,
    job.payment_id,
    payload.direct ? undefined : payload.asset,
    payload.signature,
  )
  if (payment.status !== 'processing') return { skipped: payment.status }
  if (!tx) throw new Error(`No recorded Solana transaction ${payload.signature}.`)
  const { chain, watcher, finisher } = chainOf(tx.chain_id)
  const outcome = await landTransaction({ chain, watcher, tx, ctx })
  if (outcome.kind !== 'landed') {
    ctx.log.warn({ paymentId: payment.id, signature: tx.signature, ...outcome }, 'Solana payment failed')
    // Failed after its preflight: the fee payer paid for nothing. Its bytes are signed once and never
    // again (one signature, one attempt), so no loop sends it twice; the fee goes to the caller's
    // budget and the payer is cooled down, as for an EVM relay that reverted.
    const payer = payment.buyer?.slice(payment.buyer.lastIndexOf(':') + 1)
    // Its reservation is settled: charged the fee when it failed on chain, released when it never landed.
    const charged = await settleGasCharge(db, {
      chainId: tx.chain_id,
      credentialId: payload.credentialId,
      paymentId: payment.id,
      payer,
      spent: outcome.kind === 'failed' ? await feePaid(chain, tx) : 0n,
    })
    if (charged > 0n && guards && payer)
      await coolDownPayer(db, {
        chainId: tx.chain_id,
        subjects: [{ subject: payer, kind: 'address' }],
        settings: guards,
        reason: `its transaction ${tx.signature} failed on chain after preflight (${outcome.error})`,
        paymentId: payment.id,
      })
    await failPayment(db, {
      paymentId: payment.id,
      failureCode: solanaFailureCode,
      now: new Date(),
      fence: ctx.fence,
    })
    return { signature: tx.signature, outcome: outcome.kind, error: outcome.error }
  }
  // The payer's money moved: the fee is the partner's business, priced by its fees. With fast paths on,
  // its reservation is given back in the finisher's transaction that succeeds the payment.
  if (!fastPaths)
    await settleGasCharge(db, {
      chainId: tx.chain_id,
      credentialId: payload.credentialId,
      paymentId: payment.id,
    })
  // The service's token account received it (not a direct x402 transfer): the ledger accounts for it.
  const holder = payload.direct ? undefined : holderOf(tx.chain_id, chain.service.publicKey.toBase58())
  await finisher.succeed({
    paymentId: payment.id,
    txId: tx.signature,
    ...(fastPaths ? { releaseReservation: tx.chain_id } : {}),
    settlement:
      settlementDestination === undefined
        ? undefined
        : {
            chain: tx.chain_id,
            asset: payload.asset,
            destination: settlementDestination,
            amount: BigInt(payload.amount),
            intervalMs: settlementIntervalMs,
            jobKind: solanaJobKinds.settle,
            holder,
          },
    unsettled:
      holder !== undefined && !settlementDestination
        ? { asset: payload.asset, holder, value: BigInt(payload.amount) }
        : undefined,
  })
  return { signature: tx.signature, outcome: 'landed' }
}

/** Lamports the fee payer paid for a landed transaction: the chain's record, else the base fee per signature. */
async function feePaid(chain: SolanaChain, tx: SolanaTransactionRow): Promise<bigint> {
  try {
    const landed = await chain.connection.getTransaction(tx.signature, {
      maxSupportedTransactionVersion: 0,
      commitment: 'confirmed',
    })
    if (landed?.meta) return BigInt(landed.meta.fee)
  } catch {
    // The fee is a bound's input, not money owed: the base fee stands in.
  }
  const signatures = Buffer.from(tx.raw, 'base64')[0] ?? 1
  return BigInt(signatures) * baseFeeLamportsPerSignature
}

const baseFeeLamportsPerSignature = 5_000n

/**
 * A settlement batch, once its interval is over: closes it (what it pays is fixed, less refunds), then
 * moves the sum from the service's token account to the destination owner's (created if missing) in ONE
 * transfer recorded under the batch's first payment (landServiceTransfer: recorded and committed before
 * it is sent, the same transfer after a crash), and records that transaction as every item's settlement
 * in one statement. A job queued before batches settles its one payment as before.
 */
async function settle(job: JobRow, ctx: JobRunContext, chainOf: ChainOf) {
  const payload = job.payload as SettlementBatchPayload | SettlePayload
  if (!('batchId' in payload)) return settleOne(job, payload, ctx, chainOf)
  const { db } = ctx
  const configured = (caip2: string, asset: string) =>
    chainOf(caip2).chain.assets.find((a) => sameCaip(a.id, asset))
  const batch = await closeSettlementBatch(db, payload.batchId, {
    assetId: (caip2, asset) => configured(caip2, asset)?.id ?? asset,
    now: new Date(),
  })
  if (batch.status === 'succeeded')
    return { batchId: batch.id, settled: batch.txId ?? 'nothing left to send' }
  const asset = configured(batch.chain, batch.asset)
  if (!asset) throw new Error(`${batch.asset} is not configured on ${batch.chain}.`)
  const { chain, watcher } = chainOf(batch.chain)
  const { tx, outcome } = await landServiceTransfer({
    db,
    chain,
    asset,
    step: { paymentId: batch.paymentId, purpose: 'settlement' },
    recipient: new PublicKey(parseAccountId(batch.destination).address),
    amount: batch.amount,
    watcher,
    ctx,
    beforeBuild: () => assertServiceSendsAllowed(db, chain),
  })
  if (outcome.kind !== 'landed') {
    // The next run builds a new transfer: this one moved nothing.
    throw new Error(`Settlement transaction ${tx.signature} ${outcome.kind}: ${outcome.error}`)
  }
  await inTransaction(db, async (trx) => {
    await markState(trx, tx.signature, 'landed', null, new Date())
    await finishSettlementBatch(trx, batch, { txId: tx.signature, assetId: asset.id, now: new Date() })
  })
  return { batchId: batch.id, signature: tx.signature, payments: batch.paymentIds.length }
}

/** A settlement job queued before batches: its one payment's amount, less refunds, in its own transfer. */
async function settleOne(job: JobRow, payload: SettlePayload, ctx: JobRunContext, chainOf: ChainOf) {
  const { db } = ctx
  const payment = await loadPayment(db, job.payment_id)
  if (payment.settlement_status !== 'pending') return { skipped: payment.settlement_status }
  const destination = parseAccountId(payload.destination)
  const { chain, watcher } = chainOf(destination.chainId)
  const asset = chain.assets.find((a) => sameCaip(a.id, payload.asset))
  if (!asset) throw new Error(`${payload.asset} is not configured on ${chain.caip2}.`)

  // Less the refunds already paid from the collected funds; fixed before the first signature.
  const amount = await fixSettlementAmount(db, payment.id, BigInt(payload.amount), new Date())
  if (amount === 0n) {
    await settlePayment(db, { paymentId: payment.id, txId: null, assetId: asset.id, value: 0n })
    return { refunded: true }
  }
  const { tx, outcome } = await landServiceTransfer({
    db,
    chain,
    asset,
    step: { paymentId: payment.id, purpose: 'settlement' },
    recipient: new PublicKey(destination.address),
    amount,
    watcher,
    ctx,
    beforeBuild: () => assertServiceSendsAllowed(db, chain),
  })
  if (outcome.kind !== 'landed') {
    // The next run builds a new transfer: this one moved nothing.
    throw new Error(`Settlement transaction ${tx.signature} ${outcome.kind}: ${outcome.error}`)
  }
  const signature = tx.signature
  await inTransaction(db, async (trx) => {
    await markState(trx, signature, 'landed', null, new Date())
    await settlePayment(trx, {
      paymentId: payment.id,
      txId: signature,
      assetId: asset.id,
      value: amount,
    })
  })
  return { signature }
}

/** No new transfer is signed from the service's token accounts while reconciliation holds them. */
function assertServiceSendsAllowed(db: Db, chain: SolanaChain): Promise<void> {
  return assertSendsAllowed(db, holderOf(chain.caip2, chain.service.publicKey.toBase58()))
}

/**
 * Lands the service's SPL transfer for one step (a settlement, a refund) exactly once: the signed
 * transfer is recorded and committed before it is sent, and a run after a crash lands that same
 * transfer; only one that failed on chain or can never land (blockhash expired without it) is replaced
 * by a new one. The destination's token account is created in the same transaction when missing (the
 * service pays).
 */
async function landServiceTransfer(input: {
  db: Db
  chain: SolanaChain
  asset: AssetConfig
  step: {
    paymentId: string
    purpose: 'settlement' | 'refund' | 'deposit'
    refundId?: string
    depositId?: string
  }
  recipient: PublicKey
  amount: bigint
  watcher: SolanaWatcher
  ctx: JobRunContext
  /** Before a NEW transfer is built (none in flight): throw to build none. */
  beforeBuild?: () => Promise<void>
}): Promise<{ tx: SolanaTransactionRow; outcome: LandOutcome }> {
  const { db, chain, step } = input
  const stepId = step.refundId ?? step.depositId
  let tx = await latestTransaction(db, step.paymentId, step.purpose, stepId)
  if (!tx || tx.state === 'failed' || tx.state === 'dropped') {
    await input.beforeBuild?.()
    const attempt = await countTransactions(db, step.paymentId, step.purpose, stepId)
    const transfer = await buildTransfer({
      chain,
      mint: await chain.mintInfo(input.asset),
      owner: chain.service.publicKey,
      recipient: input.recipient,
      amount: input.amount,
      memo: `caipay:${step.purpose}:${stepId ?? step.paymentId}:${attempt + 1}`,
    })
    await recordTransaction(
      db,
      {
        signature: transfer.signature,
        paymentId: step.paymentId,
        purpose: step.purpose,
        ...(step.refundId !== undefined ? { refundId: step.refundId } : {}),
        ...(step.depositId !== undefined ? { depositId: step.depositId } : {}),
        chainId: chain.caip2,
        raw: serializeSigned(transfer.transaction).toString('base64'),
        blockhash: transfer.blockhash,
        lastValidBlockHeight: transfer.lastValidBlockHeight,
      },
      new Date(),
      input.ctx.fence,
    )
    tx = (await findTransaction(db, transfer.signature))!
  }
  const outcome =
    tx.state === 'landed'
      ? ({ kind: 'landed' } as const)
      : await landTransaction({ chain, tx, watcher: input.watcher, ctx: input.ctx })
  return { tx, outcome }
}

/**
 * A live Solana refund: the refund's amount of the paid token from the service's token account to the
 * destination owner's (created when missing), exactly once (landServiceTransfer). Short of the token,
 * no transfer is built: the refund stays pending with `insufficient_funds` and is tried again until
 * funded. It succeeds only once the transfer reached the chain's commitment.
 */
async function refund(job: JobRow, ctx: JobRunContext, chainOf: ChainOf) {
  const { db } = ctx
  if (!job.refund_id) throw new Error(`Job ${job.id} has no refund.`)
  const row = await loadRefund(db, job.refund_id)
  if (row.status !== 'pending') return { skipped: row.status }
  if (!row.asset || !row.asset_value || !row.destination)
    throw new Error(`Refund ${row.id} has no asset, amount or destination to send.`)
  const destination = parseAccountId(row.destination)
  const { chain, watcher } = chainOf(destination.chainId)
  const asset = chain.assets.find((a) => sameCaip(a.id, row.asset!))
  if (!asset) throw new Error(`${row.asset} is not configured on ${chain.caip2}.`)
  const amount = BigInt(row.asset_value)
  const { tx, outcome } = await landServiceTransfer({
    db,
    chain,
    asset,
    step: { paymentId: row.payment_id, purpose: 'refund', refundId: row.id },
    recipient: new PublicKey(destination.address),
    amount,
    watcher,
    ctx,
    async beforeBuild() {
      // The ledger decides whether the service holds the amount for this refund (its payment's
      // collected funds, or the float), never the token account's whole balance.
      await assertServiceSendsAllowed(db, chain)
      const holder = holderOf(chain.caip2, chain.service.publicKey.toBase58())
      const reserve = () =>
        reserveRefund(db, { ...row, asset: asset.id, asset_value: row.asset_value! }, holder, new Date())
      let reserved = await reserve()
      if (reserved === 'short') {
        // A top-up may have arrived since the last scan: read it before waiting.
        await scanSolanaTopUps(db, chain, asset)
        reserved = await reserve()
      }
      if (reserved === 'short') {
        await noteRefundShortfall(db, row.id, true, new Date())
        throw new RetryLater(
          `The ledger holds less than ${amount} of ${asset.id} for refund ${row.id} in its partner's float or ` +
            'the unallocated top-ups; it waits until the float is funded.',
        )
      }
    },
  })
  if (outcome.kind !== 'landed')
    throw new Error(`Refund transaction ${tx.signature} ${outcome.kind}: ${outcome.error}`)
  await inTransaction(db, async (trx) => {
    await markState(trx, tx.signature, 'landed', null, new Date())
    await succeedRefund(trx, { refundId: row.id, txId: tx.signature, now: new Date() })
  })
  return { signature: tx.signature }
}

/**
 * Sends back every deposit of the job's payment an operator asked to refund (payments/deposits.ts): the
 * deposit's amount from the service's token account to its sender's, exactly once each
 * (landServiceTransfer). What it sends was already taken from the partner's deposits into refunds owed.
 */
async function refundDeposits(job: JobRow, ctx: JobRunContext, chainOf: ChainOf) {
  const { db } = ctx
  const sent: string[] = []
  for (const deposit of await depositsRefunding(db, job.payment_id)) {
    const { chain, watcher } = chainOf(deposit.chain_id)
    const asset = chain.assets.find((a) => sameCaip(a.id, deposit.asset))
    if (!asset) throw new Error(`${deposit.asset} is not configured on ${chain.caip2}.`)
    const { tx, outcome } = await landServiceTransfer({
      db,
      chain,
      asset,
      step: { paymentId: job.payment_id, purpose: 'deposit', depositId: deposit.id },
      recipient: new PublicKey(parseAccountId(deposit.sender!).address),
      amount: BigInt(deposit.amount),
      watcher,
      ctx,
      beforeBuild: () => assertServiceSendsAllowed(db, chain),
    })
    if (outcome.kind !== 'landed')
      throw new Error(`Deposit refund ${tx.signature} ${outcome.kind}: ${outcome.error}`)
    await inTransaction(db, async (trx) => {
      await markState(trx, tx.signature, 'landed', null, new Date())
      await finishDepositRefund(trx, { id: deposit.id, txId: tx.signature, now: new Date() })
    })
    sent.push(tx.signature)
  }
  return { sent }
}
