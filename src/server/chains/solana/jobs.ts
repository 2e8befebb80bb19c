import { PublicKey } from '@solana/web3.js'
import { parseAccountId, sameCaip } from '../../../caip/caip.js'
import type { JobHandler, JobRunContext } from '../../jobs/runner.js'
import { failPayment, loadPayment, settlePayment, succeedPayment } from '../../payments/lifecycle.js'
import { settlementFor } from '../../payments/settlements.js'
import { inTransaction } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import type { SolanaChain } from './chain.js'
import { solanaJobKinds } from './jobKinds.js'
import { landTransaction } from './land.js'
import {
  countTransactions,
  findTransaction,
  latestTransaction,
  markState,
  recordTransaction,
} from './store.js'
import { buildTransfer, serializeSigned } from './transaction.js'

/** `failure_code` of a payment whose transaction failed on chain or could never land (renders null). */
export const solanaFailureCode = 'transaction_failed'

export interface BroadcastPayload {
  signature: string
  asset: string
  amount: string
  /** The transfer pays the merchant's destination itself (x402's `payTo`): no settlement step. */
  direct?: boolean
}

interface SettlePayload {
  asset: string
  amount: string
  destination: string
}

/** The broadcast and settlement handlers for every configured Solana cluster, for the job runner. */
export function solanaJobHandlers(chains: readonly SolanaChain[]): Record<string, JobHandler> {
  const chainOf = (caip2: string): SolanaChain => {
    const chain = chains.find((c) => c.caip2 === caip2)
    if (!chain) throw new Error(`No Solana chain ${caip2} is configured.`)
    return chain
  }
  return {
    [solanaJobKinds.broadcast]: {
      // Only the chain decides a payment's failure (landTransaction); "still in flight" (RetryLater)
      // never counts toward giving up. What counts are database or configuration errors, and after
      // those the payment stays processing for an operator: failing it could contradict the chain.
      maxAttempts: 20,
      run: (job, ctx) => broadcast(job, ctx, chainOf),
      async onGiveUp(job, error, ctx) {
        ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'Solana broadcast abandoned')
      },
    },
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
 * After success, a merchant with a crypto settlement for the asset gets a settlement job in the same
 * database transaction as the status change.
 */
async function broadcast(job: JobRow, ctx: JobRunContext, chainOf: (caip2: string) => SolanaChain) {
  const { db, signal } = ctx
  const payload = job.payload as BroadcastPayload
  const payment = await loadPayment(db, job.payment_id)
  if (payment.status !== 'processing') return { skipped: payment.status }
  const tx = await findTransaction(db, payload.signature)
  if (!tx) throw new Error(`No recorded Solana transaction ${payload.signature}.`)
  const outcome = await landTransaction({ chain: chainOf(tx.chain_id), db, tx, signal })
  const now = new Date()
  if (outcome.kind !== 'landed') {
    ctx.log.warn({ paymentId: payment.id, signature: tx.signature, ...outcome }, 'Solana payment failed')
    await failPayment(db, { paymentId: payment.id, failureCode: solanaFailureCode, now })
    return { signature: tx.signature, outcome: outcome.kind, error: outcome.error }
  }
  const settlement = payload.direct ? undefined : await settlementFor(db, payment.merchant_id, payload.asset)
  const settle: SettlePayload | undefined = settlement && {
    asset: payload.asset,
    amount: payload.amount,
    destination: settlement.destination,
  }
  await succeedPayment(db, {
    paymentId: payment.id,
    txId: tx.signature,
    now,
    settlement: settle && { job: { kind: solanaJobKinds.settle, payload: settle } },
  })
  return { signature: tx.signature, outcome: 'landed' }
}

/**
 * Moves the collected amount from the service's token account to the destination owner's (created if
 * missing). Exactly once: the signed transfer is recorded and committed before it is sent, and a run
 * after a crash lands that same transfer; only one that failed on chain or can never land (blockhash
 * expired without it) is replaced by a new one.
 */
async function settle(job: JobRow, ctx: JobRunContext, chainOf: (caip2: string) => SolanaChain) {
  const { db, signal } = ctx
  const payload = job.payload as SettlePayload
  const payment = await loadPayment(db, job.payment_id)
  if (payment.settlement_status !== 'pending') return { skipped: payment.settlement_status }
  const destination = parseAccountId(payload.destination)
  const chain = chainOf(destination.chainId)
  const asset = chain.assets.find((a) => sameCaip(a.id, payload.asset))
  if (!asset) throw new Error(`${payload.asset} is not configured on ${chain.caip2}.`)

  let tx = await latestTransaction(db, payment.id, 'settlement')
  if (!tx || tx.state === 'failed' || tx.state === 'dropped') {
    const attempt = await countTransactions(db, payment.id, 'settlement')
    const transfer = await buildTransfer({
      chain,
      mint: await chain.mintInfo(asset),
      owner: chain.service.publicKey,
      recipient: new PublicKey(destination.address),
      amount: BigInt(payload.amount),
      memo: `caipay:settlement:${payment.id}:${attempt + 1}`,
    })
    await recordTransaction(
      db,
      {
        signature: transfer.signature,
        paymentId: payment.id,
        purpose: 'settlement',
        chainId: chain.caip2,
        raw: serializeSigned(transfer.transaction).toString('base64'),
        blockhash: transfer.blockhash,
        lastValidBlockHeight: transfer.lastValidBlockHeight,
      },
      new Date(),
    )
    tx = (await findTransaction(db, transfer.signature))!
  }
  const outcome =
    tx.state === 'landed' ? ({ kind: 'landed' } as const) : await landTransaction({ chain, db, tx, signal })
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
      value: payload.amount,
    })
  })
  return { signature }
}
