import { type RawBuilder, sql } from 'kysely'
import { canonicalCaip } from '../../../caip/caip.js'
import { type Fence, FenceLost, fenceHolds } from '../../jobs/fence.js'
import type { Db } from '../../store/db.js'
import { columnsText, namedStatement } from '../../store/prepared.js'
import { type PaymentRow, paymentColumns } from '../../store/schema.js'
import type { SolanaTransactionRow, SolanaTxPurpose, SolanaTxState } from './schema.js'
import './schema.js'

export interface NewSolanaTransaction {
  signature: string
  paymentId: string
  purpose: SolanaTxPurpose
  /** The refund a `refund` transaction pays. */
  refundId?: string
  /** The deposit a `deposit` transaction sends back (docs/push-payments.md). */
  depositId?: string
  chainId: string
  raw: string
  blockhash: string
  lastValidBlockHeight: number
}

/**
 * recordTransaction inside a payment's state change (payments/lifecycle.ts AlongWrites): inserted only
 * when the CTE `changed` holds a row, in the statement that makes the change.
 */
export function recordAlong(tx: NewSolanaTransaction, now: Date): (changed: string) => RawBuilder<unknown> {
  return (changed) => sql`
    INSERT INTO solana_transactions (signature, payment_id, purpose, refund_id, deposit_id, chain_id, raw,
      blockhash, last_valid_block_height, state, error, first_sent_at, created_at, updated_at)
    SELECT ${tx.signature}, ${tx.paymentId}, ${tx.purpose}, ${tx.refundId ?? null}, ${tx.depositId ?? null},
      ${tx.chainId}, ${tx.raw}, ${tx.blockhash}, ${tx.lastValidBlockHeight}, 'pending', NULL, NULL, ${now}, ${now}
    FROM ${sql.table(changed)}`
}

/**
 * Records a signed transaction; done (and committed) before it is ever sent. Under a job step's `fence`
 * the insert is conditional on the claim in the same statement: a step that lost its claim records
 * nothing (FenceLost), so it has nothing to send.
 */
export async function recordTransaction(
  db: Db,
  tx: NewSolanaTransaction,
  now: Date,
  fence?: Fence,
): Promise<void> {
  if (fence) {
    const inserted = await sql`
      INSERT INTO solana_transactions (signature, payment_id, purpose, refund_id, deposit_id, chain_id, raw,
        blockhash, last_valid_block_height, state, error, first_sent_at, created_at, updated_at)
      SELECT ${tx.signature}, ${tx.paymentId}, ${tx.purpose}, ${tx.refundId ?? null}, ${tx.depositId ?? null},
        ${tx.chainId}, ${tx.raw},
        ${tx.blockhash}, ${tx.lastValidBlockHeight}, 'pending', NULL, NULL, ${now}, ${now}
      WHERE ${fenceHolds(fence)}`.execute(db)
    if (inserted.numAffectedRows !== 1n) throw new FenceLost(fence)
    return
  }
  await db
    .insertInto('solana_transactions')
    .values({
      signature: tx.signature,
      payment_id: tx.paymentId,
      purpose: tx.purpose,
      refund_id: tx.refundId ?? null,
      deposit_id: tx.depositId ?? null,
      chain_id: tx.chainId,
      raw: tx.raw,
      blockhash: tx.blockhash,
      last_valid_block_height: tx.lastValidBlockHeight,
      state: 'pending',
      error: null,
      first_sent_at: null,
      created_at: now,
      updated_at: now,
    })
    .execute()
}

/**
 * The newest transaction of a payment for a purpose (a settlement may need a second after a drop); of
 * one refund (or, for `deposit`, one deposit) when `refundId` is given (a payment has one step per refund).
 */
export async function latestTransaction(
  db: Db,
  paymentId: string,
  purpose: SolanaTxPurpose,
  refundId?: string,
): Promise<SolanaTransactionRow | undefined> {
  let query = db
    .selectFrom('solana_transactions')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', purpose)
  if (refundId !== undefined)
    query = query.where(purpose === 'deposit' ? 'deposit_id' : 'refund_id', '=', refundId)
  return query.orderBy('created_at', 'desc').limit(1).executeTakeFirst()
}

export async function countTransactions(
  db: Db,
  paymentId: string,
  purpose: SolanaTxPurpose,
  refundId?: string,
): Promise<number> {
  let query = db
    .selectFrom('solana_transactions')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', purpose)
  if (refundId !== undefined)
    query = query.where(purpose === 'deposit' ? 'deposit_id' : 'refund_id', '=', refundId)
  const row = await query.executeTakeFirstOrThrow()
  return Number(row.count)
}

/** solana_transactions' columns, as `selectAll()` reads them. */
const transactionColumns = [
  'signature',
  'payment_id',
  'purpose',
  'refund_id',
  'deposit_id',
  'chain_id',
  'raw',
  'blockhash',
  'last_valid_block_height',
  'state',
  'error',
  'send_count',
  'first_sent_at',
  'created_at',
  'updated_at',
] as const satisfies readonly (keyof SolanaTransactionRow)[]

/**
 * A broadcast job's first read: its payment, the merchant's settlement destination for `asset` (none for
 * undefined) and the recorded transaction `signature`, in one named statement where they were two
 * round trips (payments/settlements.ts loadPaymentAndSettlement, then findTransaction): the same key
 * lookups, the same rows. docs/performance.md, "Solana, fifth round".
 */
export async function loadBroadcast(
  db: Db,
  paymentId: string,
  asset: string | undefined,
  signature: string,
): Promise<{
  payment: PaymentRow
  settlementDestination: string | undefined
  tx: SolanaTransactionRow | undefined
}> {
  const [row] = (
    await selectBroadcast(db, paymentId, asset === undefined ? null : canonicalCaip(asset), signature)
  ).rows
  if (!row) throw new Error(`Payment ${paymentId} not found.`)
  const payment: Record<string, unknown> = {}
  for (const column of paymentColumns) payment[column] = row[column]
  const tx: Record<string, unknown> = {}
  for (const column of transactionColumns) tx[column] = row[`tx_${column}`]
  return {
    payment: payment as unknown as PaymentRow,
    settlementDestination: (row.settlement_destination as string | null) ?? undefined,
    tx: row.tx_signature === null ? undefined : (tx as unknown as SolanaTransactionRow),
  }
}

const selectBroadcast = namedStatement<Record<string, unknown>>(
  `SELECT ${columnsText(paymentColumns, 'payments')},
    (SELECT s.destination FROM crypto_settlements s
      WHERE s.merchant_id = payments.merchant_id AND s.asset_key = $2::text) AS settlement_destination,
    ${transactionColumns.map((column) => `t.${column} AS tx_${column}`).join(', ')}
  FROM payments LEFT JOIN solana_transactions t ON t.signature = $3::text
  WHERE payments.id = $1`,
)

export async function findTransaction(db: Db, signature: string): Promise<SolanaTransactionRow | undefined> {
  return db
    .selectFrom('solana_transactions')
    .selectAll()
    .where('signature', '=', signature)
    .executeTakeFirst()
}

/**
 * Counts a send of each recorded transaction of `signatures` (one statement for the sends that start
 * together); answers those it counted (the recorded ones).
 */
export async function markSent(db: Db, signatures: readonly string[], now: Date): Promise<Set<string>> {
  if (signatures.length === 0) return new Set()
  const counted = await db
    .updateTable('solana_transactions')
    .set((eb) => ({
      send_count: eb('send_count', '+', 1),
      first_sent_at: eb.fn.coalesce('first_sent_at', eb.val(now)),
      updated_at: now,
    }))
    .where('signature', 'in', signatures)
    .returning('signature')
    .execute()
  return new Set(counted.map((row) => row.signature))
}

export async function markState(
  db: Db,
  signature: string,
  state: SolanaTxState,
  error: string | null,
  now: Date,
): Promise<void> {
  await db
    .updateTable('solana_transactions')
    .set({ state, error, updated_at: now })
    .where('signature', '=', signature)
    .execute()
}

/** A refused send's reason, on a transaction still pending (never over the chain's decision). */
export async function noteSendRefused(db: Db, signature: string, error: string, now: Date): Promise<void> {
  await db
    .updateTable('solana_transactions')
    .set({ error, updated_at: now })
    .where('signature', '=', signature)
    .where('state', '=', 'pending')
    .execute()
}

/** One state for many transactions at once (those a status poll found landed together). */
export async function markStates(
  db: Db,
  signatures: readonly string[],
  state: SolanaTxState,
  now: Date,
): Promise<void> {
  if (signatures.length === 0) return
  await db
    .updateTable('solana_transactions')
    .set({ state, error: null, updated_at: now })
    .where('signature', 'in', signatures)
    .execute()
}
