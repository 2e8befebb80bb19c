import type { SubscriptionTerms } from '../../contract/gateway.js'
import type { JsonValue, MandateQuoteContext } from '../chains/types.js'
import { unixSeconds } from '../payments/views.js'
import type { Db } from '../store/db.js'
import { totalPeriods } from './lifecycle.js'

/** A subscription waiting for its mandate: what its first period's options are quoted under. */
export interface PendingMandate {
  terms: MandateQuoteContext['mandate']
}

/** The mandate terms of the subscription whose first payment is `paymentId`, while it is `incomplete`. */
export async function mandateOfPayment(db: Db, paymentId: string): Promise<PendingMandate | undefined> {
  const row = await db
    .selectFrom('subscriptions')
    .selectAll()
    .where('first_payment_id', '=', paymentId)
    .where('status', '=', 'incomplete')
    .executeTakeFirst()
  if (!row) return undefined
  return {
    terms: {
      subscriptionId: row.id,
      interval: row.interval,
      intervalCount: row.interval_count,
      periods: row.periods,
      totalPeriods: totalPeriods(row),
      endAt: unixSeconds(row.end_at),
    },
  }
}

/** The subscription terms an option was quoted with (gateway/options.ts keeps them in its state). */
export function optionTerms(state: JsonValue | null): SubscriptionTerms | undefined {
  if (!state || typeof state !== 'object' || Array.isArray(state)) return undefined
  const terms = state.subscription
  return terms && typeof terms === 'object' && !Array.isArray(terms)
    ? (terms as unknown as SubscriptionTerms)
    : undefined
}

/** A mandate option's state (an object, or none) with the subscription's terms beside the driver's keys. */
export function withTerms(state: JsonValue | undefined, terms: SubscriptionTerms): JsonValue {
  const own = state && typeof state === 'object' && !Array.isArray(state) ? state : {}
  return { ...own, subscription: terms as unknown as JsonValue }
}
