import type { Db } from '../store/db.js'
import { processMemo } from '../store/processMemo.js'
import type { PaymentRow } from '../store/schema.js'

/**
 * What never changes about a payment once created: who and what it is for, and until when. Quotes are
 * made from these alone, so a process that knows them (it created the payment, or read it) can quote
 * before it reads the payment, and check them in the statement that stores the quotes
 * (gateway/options.ts). Nothing is decided on them alone.
 */
export type PaymentFacts = Pick<
  PaymentRow,
  'id' | 'mode' | 'merchant_id' | 'amount_unit' | 'amount_value' | 'expires_at'
>

export const paymentFactsLimit = 20_000
const facts = processMemo<PaymentFacts>(paymentFactsLimit)

export function rememberPaymentFacts(db: Db, row: PaymentFacts): void {
  const { id, mode, merchant_id, amount_unit, amount_value, expires_at } = row
  facts.set(db, id, Object.freeze({ id, mode, merchant_id, amount_unit, amount_value, expires_at }))
}

export function knownPaymentFacts(db: Db, paymentId: string): PaymentFacts | undefined {
  return facts.get(db, paymentId)
}
