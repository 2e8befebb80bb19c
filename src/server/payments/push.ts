import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import { canonicalCaip } from '../../caip/caip.js'
import type { ServerConfig } from '../config.js'
import { newId } from '../ids.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { toAmount } from './assets.js'
import { depositRefundJobKind, refundDeposit, refundTestDeposit } from './deposits.js'
import { succeedPayments, transitionPayment } from './lifecycle.js'
import type { DepositReason, DepositRow } from './pushSchema.js'
import { settlementFor, succeedTestPayment } from './settlements.js'
import './pushSchema.js'

/**
 * Push payments, the chain-independent half (docs/push-payments.md): a payment's one reference key, and
 * what each transfer found by it does to the payment: counts toward it while it is open, completes it
 * (then it succeeds and settles like a pulled payment, with its ledger entry), or becomes a **deposit**
 * the operator sees when no open payment explains it (late, paid twice, underpaid at expiry, the excess
 * of an overpayment when `push.overpaid` is `refund`). Every deposit is booked `world -> deposits(partner)`
 * in the statement that records it; what is still counting toward an open payment is money in flight
 * for reconciliation (ledger/reconcile.ts). A deposit sent back at once (`sendBackAtOnce`) is asked for
 * in the same database transaction that makes it, so no crash leaves it held instead.
 */

/** The payment's reference key, made at its first options call and the same at every later one. */
export async function pushReference(
  db: Db,
  paymentId: string,
  newReference: () => string,
  now: Date,
): Promise<string> {
  const inserted = await db
    .insertInto('push_references')
    .values({ payment_id: paymentId, reference: newReference(), created_at: now })
    .onConflict((oc) => oc.column('payment_id').doNothing())
    .returning('reference')
    .executeTakeFirst()
  if (inserted) return inserted.reference
  const row = await db
    .selectFrom('push_references')
    .select('reference')
    .where('payment_id', '=', paymentId)
    .executeTakeFirstOrThrow()
  return row.reference
}

/** 32 random bytes: a Solana reference is any public key nobody needs the private half of. */
export function randomReferenceBytes(): Uint8Array {
  return randomBytes(32)
}

/** A transfer a chain's scan found by a payment's reference, already checked against what it must pay. */
export interface FoundPushTransfer {
  paymentId: string
  signature: string
  chainId: string
  /** The configured asset id (CAIP-19). */
  asset: string
  /** CAIP-10 of the collection address the transfer reached. */
  holder: string
  /** CAIP-10 of the owner that sent it (where a refund goes). */
  sender: string | null
  amount: bigint
  slot: number
}

/** What the chain settles a push payment with (its settlement batch job). */
export interface PushSettlement {
  intervalMs: number
  jobKind: string
  /** The chain's job that sends deposits back (an overpayment's excess when `push.overpaid` is `refund`). */
  depositRefundJobKind: string
  /**
   * Late and duplicate transfers go back to their sender at once (EVM: the Transfer log names every
   * sender); otherwise they are held for the operator.
   */
  refundsLate?: boolean
  /**
   * The merchant's settlement destination (CAIP-10) as the chain's settlement job reads it (EVM: the bare
   * address); undefined: not one this chain can pay, so the partner's float holds the payment. Default: as is.
   */
  settlementDestination?: (destination: string) => string | undefined
}

export type PushOutcome =
  | { kind: 'known' }
  | { kind: 'pending'; received: bigint; due: bigint }
  | { kind: 'succeeded'; received: bigint; excess: bigint; depositId?: string }
  | { kind: 'deposit'; depositId: string; reason: DepositReason }

/**
 * Applies one found transfer, once (its signature and asset are its identity), in one database
 * transaction with the payment locked: see the module comment. `due` is what the payment costs in the
 * transfer's asset.
 */
export async function applyPushTransfer(
  db: Db,
  params: {
    config: ServerConfig
    transfer: FoundPushTransfer
    due: bigint
    settlement: PushSettlement
    now: Date
  },
): Promise<PushOutcome> {
  const { transfer, due, now, config } = params
  const asset = canonicalCaip(transfer.asset)
  return inTransaction(db, async (trx) => {
    const payment = await trx
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', transfer.paymentId)
      .forUpdate()
      .executeTakeFirstOrThrow()
    const inserted = await trx
      .insertInto('push_transfers')
      .values({
        signature: transfer.signature,
        asset,
        payment_id: payment.id,
        chain_id: transfer.chainId,
        holder: transfer.holder,
        sender: transfer.sender,
        amount: transfer.amount.toString(),
        slot: transfer.slot,
        state: 'pending',
        deposit_id: null,
        found_at: now,
      })
      .onConflict((oc) => oc.columns(['signature', 'asset']).doNothing())
      .returning('signature')
      .executeTakeFirst()
    if (!inserted) return { kind: 'known' }
    const open = payment.status === 'requires_action' && payment.expires_at.getTime() > now.getTime()
    if (!open) {
      const reason: DepositReason =
        payment.status === 'succeeded' || payment.status === 'processing' ? 'duplicate' : 'late'
      const depositId = await holdDeposit(trx, {
        payment,
        transfer: { ...transfer, asset },
        amount: transfer.amount,
        reason,
        signatures: [transfer.signature],
        now,
      })
      if (params.settlement.refundsLate)
        await sendBackAtOnce(trx, {
          id: depositId,
          mode: payment.mode,
          sender: transfer.sender,
          jobKind: params.settlement.depositRefundJobKind,
          now,
        })
      return { kind: 'deposit', depositId, reason }
    }
    const { rows } = await sql<{ received: string; sender: string | null }>`
      SELECT coalesce(sum(amount), 0)::text AS received,
        (array_agg(sender ORDER BY slot DESC))[1] AS sender
      FROM push_transfers WHERE payment_id = ${payment.id} AND asset = ${asset} AND state = 'pending'`.execute(
      trx,
    )
    const received = BigInt(rows[0]!.received)
    if (received < due) return { kind: 'pending', received, due }
    const excess = received - due
    const refundExcess = config.push.overpaid === 'refund' && excess > 0n
    const collected = refundExcess ? due : received
    await transitionPayment(trx, {
      paymentId: payment.id,
      from: 'requires_action',
      to: 'processing',
      set: {
        source: 'push',
        buyer: transfer.sender,
        option_amount: JSON.stringify(
          toAmount(`caip19/${transfer.asset}`, collected.toString(), config),
        ) as never,
      },
      now,
    })
    if (payment.mode === 'test')
      // Nothing moved on a chain: test mode's one success path (settled at once, `test:<id>`).
      await succeedTestPayment(trx, { payment, asset: transfer.asset, value: collected.toString(), now })
    else await succeedPushed(trx, { payment, transfer, collected, settlement: params.settlement, now })
    await markPaid(trx, payment.id, asset)
    if (!refundExcess) return { kind: 'succeeded', received, excess }
    const depositId = await holdDeposit(trx, {
      payment,
      transfer: { ...transfer, asset },
      amount: excess,
      reason: 'overpaid',
      signatures: [transfer.signature],
      now,
    })
    await sendBackAtOnce(trx, {
      id: depositId,
      mode: payment.mode,
      sender: transfer.sender,
      jobKind: params.settlement.depositRefundJobKind,
      now,
    })
    return { kind: 'succeeded', received, excess, depositId }
  })
}

/** A live push payment's success: as a pulled one's (settlement item or float, with its ledger entry). */
async function succeedPushed(
  trx: Db,
  params: {
    payment: PaymentRow
    transfer: FoundPushTransfer
    collected: bigint
    settlement: PushSettlement
    now: Date
  },
): Promise<void> {
  const { payment, transfer, collected, now } = params
  const registered = await settlementFor(trx, payment.merchant_id, transfer.asset)
  const to = registered && (params.settlement.settlementDestination ?? ((d) => d))(registered.destination)
  const destination = to === undefined ? undefined : { destination: to }
  await succeedPayments(
    trx,
    [
      {
        paymentId: payment.id,
        txId: transfer.signature,
        settlement: destination && {
          chain: transfer.chainId,
          asset: transfer.asset,
          destination: destination.destination,
          amount: collected,
          intervalMs: params.settlement.intervalMs,
          jobKind: params.settlement.jobKind,
          holder: transfer.holder,
        },
        unsettled: destination
          ? undefined
          : { asset: transfer.asset, holder: transfer.holder, value: collected },
      },
    ],
    now,
  )
}

async function markPaid(db: Db, paymentId: string, asset: string): Promise<void> {
  await db
    .updateTable('push_transfers')
    .set({ state: 'paid' })
    .where('payment_id', '=', paymentId)
    .where('asset', '=', asset)
    .where('state', '=', 'pending')
    .execute()
}

/**
 * Records a deposit and books it (live mode) `world -> deposits(partner)` in the same statement. The
 * transfers it is made of (when given in `signatures` and still pending) are marked as in it.
 */
async function holdDeposit(
  db: Db,
  params: {
    payment: Pick<PaymentRow, 'id' | 'mode' | 'partner_id' | 'merchant_id'>
    transfer: Pick<FoundPushTransfer, 'chainId' | 'asset' | 'holder' | 'sender'>
    amount: bigint
    reason: DepositReason
    signatures: readonly string[]
    now: Date
  },
): Promise<string> {
  const { payment, transfer, now } = params
  const id = newId('deposit')
  await sql`
    WITH deposit AS (
      INSERT INTO deposits (id, mode, partner_id, merchant_id, payment_id, chain_id, asset, holder, sender,
        amount, reason, status, tx_ids, created_at, updated_at)
      VALUES (${id}, ${payment.mode}, ${payment.partner_id}, ${payment.merchant_id}, ${payment.id},
        ${transfer.chainId}, ${transfer.asset}, ${transfer.holder}, ${transfer.sender}, ${params.amount},
        ${params.reason}, 'held', ${sql.val([...params.signatures])}::text[], ${now}, ${now})
      RETURNING *
    ), marked AS (
      UPDATE push_transfers SET state = 'deposit', deposit_id = ${id}
      WHERE payment_id = ${payment.id} AND asset = ${transfer.asset} AND state = 'pending'
        AND signature = ANY(${sql.val([...params.signatures])}::text[])
    )
    INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
      amount, flow, payment_id, tx_id, created_at)
    SELECT d.mode, d.asset, d.holder, 'world', '', 'deposits', d.partner_id, d.amount, 'deposit.held', d.payment_id,
      d.id, ${now}::timestamptz
    FROM deposit AS d WHERE d.mode = 'live'`.execute(db)
  return id
}

/**
 * Asks, in the caller's transaction (the one that made the deposit), for a held deposit to go back to
 * its sender: live, through the chain's deposit-refund job (payments/deposits.ts refundDeposit, booked
 * `deposits -> refunds(merchant)` now); test mode moves nothing and marks it refunded at once
 * (`test:<depositId>`). A deposit whose sender is unknown stays held for the operator.
 */
async function sendBackAtOnce(
  trx: Db,
  params: { id: string; mode: PaymentRow['mode']; sender: string | null; jobKind: string; now: Date },
): Promise<void> {
  if (!params.sender) return
  if (params.mode === 'test') await refundTestDeposit(trx, { id: params.id, now: params.now })
  else await refundDeposit(trx, { id: params.id, jobKind: params.jobKind, now: params.now })
}

/**
 * What arrived for payments that are no longer open and never completed (expired or cancelled while
 * underpaid): one `underpaid` deposit per payment, asset and sender (a refund goes back to whoever sent
 * that part), held or, with `push.underpaid` `refund`, sent back at once in the same transaction.
 * `paymentId` limits it to one payment. Returns the deposits made.
 */
export async function holdUnpaidPushes(
  db: Db,
  config: Pick<ServerConfig, 'push'>,
  now: Date,
  paymentId?: string,
): Promise<string[]> {
  let query = db
    .selectFrom('push_transfers as t')
    .innerJoin('payments as p', 'p.id', 't.payment_id')
    .select(['t.payment_id', 't.asset'])
    .where('t.state', '=', 'pending')
    .where((eb) =>
      eb.or([eb('p.status', 'in', ['expired', 'cancelled', 'failed']), eb('p.expires_at', '<=', now)]),
    )
  if (paymentId) query = query.where('t.payment_id', '=', paymentId)
  const groups = await query.groupBy(['t.payment_id', 't.asset']).execute()
  const made: string[] = []
  for (const group of groups) {
    const ids = await inTransaction(db, async (trx) => {
      const payment = await trx
        .selectFrom('payments')
        .selectAll()
        .where('id', '=', group.payment_id)
        .forUpdate()
        .executeTakeFirstOrThrow()
      // Still payable (a read raced its completion): leave it.
      if (payment.status === 'requires_action' && payment.expires_at.getTime() > now.getTime()) return []
      const transfers = await trx
        .selectFrom('push_transfers')
        .selectAll()
        .where('payment_id', '=', group.payment_id)
        .where('asset', '=', group.asset)
        .where('state', '=', 'pending')
        .orderBy('slot', 'desc')
        .execute()
      const bySender = new Map<string | null, typeof transfers>()
      for (const t of transfers) bySender.set(t.sender, [...(bySender.get(t.sender) ?? []), t])
      const ids: string[] = []
      for (const [sender, sent] of bySender) {
        const first = sent[0]!
        const id = await holdDeposit(trx, {
          payment,
          transfer: { chainId: first.chain_id, asset: first.asset, holder: first.holder, sender },
          amount: sent.reduce((sum, t) => sum + BigInt(t.amount), 0n),
          reason: 'underpaid',
          signatures: sent.map((t) => t.signature),
          now,
        })
        if (config.push.underpaid === 'refund')
          await sendBackAtOnce(trx, {
            id,
            mode: payment.mode,
            sender,
            jobKind: depositRefundJobKind(first.chain_id),
            now,
          })
        ids.push(id)
      }
      return ids
    })
    made.push(...ids)
  }
  return made
}

/**
 * What transfers by a payment's reference brought, per asset (the merchant API's `received`): read only
 * for a payment that is open or was pushed, the only ones that can have any worth showing.
 */
export async function pushReceived(
  db: Db,
  payment: Pick<PaymentRow, 'id' | 'status' | 'source' | 'mode'>,
): Promise<{ asset: string; value: string }[]> {
  if (payment.source !== 'push' && payment.status !== 'requires_action') return []
  const { rows } = await sql<{ asset: string; value: string }>`
    SELECT asset, sum(amount)::text AS value FROM push_transfers WHERE payment_id = ${payment.id}
    GROUP BY asset ORDER BY asset`.execute(db)
  return rows
}

export type { DepositRow }
