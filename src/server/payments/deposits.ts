import { sql } from 'kysely'
import type { Deposit } from '../../contract/deposits.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { rearmJob } from '../jobs/queue.js'
import type { Db } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import { toAmount } from './assets.js'
import type { DepositRow, DepositStatus } from './pushSchema.js'
import './pushSchema.js'

/**
 * Deposits (docs/push-payments.md, "Deposits"): pushed money no open payment explains, held in the ledger
 * as the partner's `deposits` until an operator resolves it: **refund** (sent back to the sender's
 * token account: `deposits -> refunds(merchant)` when asked, `refunds -> world` when the transfer
 * lands) or **assign** (kept as the partner's float: `deposits -> float(partner)`). Each step is one
 * statement with its ledger entry.
 */

export async function listDeposits(
  db: Db,
  filter: { partnerId?: string; mode?: Mode; status?: DepositStatus; limit?: number },
): Promise<DepositRow[]> {
  let query = db.selectFrom('deposits').selectAll()
  if (filter.partnerId) query = query.where('partner_id', '=', filter.partnerId)
  if (filter.mode) query = query.where('mode', '=', filter.mode)
  if (filter.status) query = query.where('status', '=', filter.status)
  return query
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(filter.limit ?? 100)
    .execute()
}

export function depositJson(row: DepositRow, config: ServerConfig): Deposit {
  return {
    depositId: row.id,
    merchantId: row.merchant_id,
    paymentId: row.payment_id,
    chainId: row.chain_id,
    amount: toAmount(`caip19/${row.asset}`, String(row.amount), config),
    sender: row.sender,
    reason: row.reason,
    status: row.status,
    txIds: row.tx_ids,
    refundTxId: row.refund_tx_id,
    createdAt: row.created_at.toISOString(),
  }
}

async function heldDeposit(db: Db, id: string): Promise<DepositRow> {
  const row = await db.selectFrom('deposits').selectAll().where('id', '=', id).executeTakeFirst()
  if (!row) fail('params_validation', `No deposit ${id}.`, { depositId: id })
  if (row.status !== 'held')
    fail('invalid_state', `Deposit ${id} is ${row.status}; only a held deposit can be resolved.`, {
      depositId: id,
      status: row.status,
    })
  return row
}

/** Keeps a held deposit as its partner's float (`deposits -> float(partner)`). */
export async function assignDeposit(db: Db, params: { id: string; now: Date }): Promise<DepositRow> {
  await heldDeposit(db, params.id)
  const { rows } = await sql<DepositRow>`
    WITH changed AS (
      UPDATE deposits SET status = 'assigned', updated_at = ${params.now}
      WHERE id = ${params.id} AND status = 'held' RETURNING *
    ), booked AS (
      INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
        amount, flow, payment_id, tx_id, created_at)
      SELECT mode, asset, holder, 'deposits', partner_id, 'float', partner_id, amount, 'deposit.assigned',
        payment_id, id, ${params.now}::timestamptz
      FROM changed WHERE mode = 'live'
    )
    SELECT * FROM changed`.execute(db)
  if (!rows[0]) return heldDeposit(db, params.id)
  return rows[0]
}

/**
 * Asks for a held deposit to be sent back to its sender: `deposits -> refunds(merchant)` now, and the
 * chain's deposit-refund job (`jobKind`) queued under its payment, which sends every deposit of that
 * payment being refunded.
 */
export async function refundDeposit(
  db: Db,
  params: { id: string; jobKind: string; now: Date },
): Promise<DepositRow> {
  const held = await heldDeposit(db, params.id)
  if (!held.sender || !held.payment_id)
    fail('invalid_state', `Deposit ${params.id} has no known sender to refund; assign it instead.`)
  const { rows } = await sql<DepositRow>`
    WITH changed AS (
      UPDATE deposits SET status = 'refunding', updated_at = ${params.now}
      WHERE id = ${params.id} AND status = 'held' RETURNING *
    ), booked AS (
      INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
        amount, flow, payment_id, tx_id, created_at)
      SELECT mode, asset, holder, 'deposits', partner_id, 'refunds', merchant_id, amount, 'deposit.refunding',
        payment_id, id, ${params.now}::timestamptz
      FROM changed WHERE mode = 'live'
    )
    SELECT * FROM changed`.execute(db)
  const row = rows[0] ?? (await heldDeposit(db, params.id))
  // A run of the job going on now may have listed the payment's deposits before this one: rearmJob takes
  // it over, so it cannot end the job with this deposit left `refunding`.
  await rearmJob(db, { kind: params.jobKind, paymentId: held.payment_id!, now: params.now })
  return row
}

/**
 * An operator's refund of a held deposit (`caipay deposits refund`): a live one through its chain's
 * deposit-refund job (refundDeposit), a test-mode one at once, as test mode refunds them (nothing moves).
 */
export async function refundHeldDeposit(db: Db, params: { id: string; now: Date }): Promise<DepositRow> {
  const held = await heldDeposit(db, params.id)
  if (held.mode === 'live')
    return refundDeposit(db, { ...params, jobKind: depositRefundJobKind(held.chain_id) })
  await refundTestDeposit(db, params)
  return db.selectFrom('deposits').selectAll().where('id', '=', params.id).executeTakeFirstOrThrow()
}

/** The job that sends a deposit back on its chain. */
export function depositRefundJobKind(chainId: string): string {
  // The chains' job kinds (chains/solana/jobKinds.ts, chains/evm/outcome.ts), named here so the domain
  // imports no chain code.
  if (chainId.startsWith('solana:')) return 'solana.deposit_refund'
  if (chainId.startsWith('eip155:')) return 'evm.deposit_refund'
  fail('invalid_state', `Deposits on ${chainId || 'this chain'} cannot be refunded by the service yet.`)
}

/** The deposits of a payment waiting for their refund transfer. */
export function depositsRefunding(db: Db, paymentId: string): Promise<DepositRow[]> {
  return db
    .selectFrom('deposits')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('status', '=', 'refunding')
    .orderBy('created_at')
    .execute()
}

/** A deposit's refund transfer landed: `refunds(merchant) -> world`. */
export async function finishDepositRefund(
  db: Db,
  params: { id: string; txId: string; now: Date },
): Promise<void> {
  await sql`
    WITH changed AS (
      UPDATE deposits SET status = 'refunded', refund_tx_id = ${params.txId}, updated_at = ${params.now}
      WHERE id = ${params.id} AND status = 'refunding' RETURNING *
    )
    INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
      amount, flow, payment_id, tx_id, created_at)
    SELECT mode, asset, holder, 'refunds', merchant_id, 'world', '', amount, 'deposit.refunded', payment_id,
      ${params.txId}, ${params.now}::timestamptz
    FROM changed WHERE mode = 'live'`.execute(db)
}

/** Test mode's deposit refund: nothing moves, so it is refunded at once with `test:<depositId>`. */
export async function refundTestDeposit(db: Db, params: { id: string; now: Date }): Promise<void> {
  await db
    .updateTable('deposits')
    .set({ status: 'refunded', refund_tx_id: `test:${params.id}`, updated_at: params.now })
    .where('id', '=', params.id)
    .where('mode', '=', 'test')
    .where('status', '=', 'held')
    .execute()
}
