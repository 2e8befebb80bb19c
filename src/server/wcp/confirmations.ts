import { createHash } from 'node:crypto'
import type { Db } from '../store/db.js'
import type { Timestamp } from '../store/schema.js'

/** Row type of migration 006_wcp. */
export interface WcpConfirmationsTable {
  payment_id: string
  option_id: string
  results_digest: string
  created_at: Timestamp
}

declare module '../store/schema.js' {
  interface Database {
    wcp_confirmations: WcpConfirmationsTable
  }
}

export interface Confirmation {
  optionId: string
  results: readonly string[]
}

function digest(confirmation: Confirmation): string {
  return createHash('sha256')
    .update(JSON.stringify([confirmation.optionId, confirmation.results]))
    .digest('hex')
}

/** Called in the transaction that moves the payment to processing, so the record exists exactly when that move does. */
export async function recordConfirmation(
  db: Db,
  paymentId: string,
  confirmation: Confirmation,
  now: Date,
): Promise<void> {
  await db
    .insertInto('wcp_confirmations')
    .values({
      payment_id: paymentId,
      option_id: confirmation.optionId,
      results_digest: digest(confirmation),
      created_at: now,
    })
    .execute()
}

/** Whether this confirm is the one that already moved the payment on (same option, same results). */
export async function isRepeatedConfirmation(
  db: Db,
  paymentId: string,
  confirmation: Confirmation,
): Promise<boolean> {
  const row = await db
    .selectFrom('wcp_confirmations')
    .select(['option_id', 'results_digest'])
    .where('payment_id', '=', paymentId)
    .executeTakeFirst()
  return row?.option_id === confirmation.optionId && row.results_digest === digest(confirmation)
}
