import type {
  Subscription,
  SubscriptionListQuery,
  SubscriptionListResponse,
} from '../../contract/subscription.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { afterCursor, keysetPage, page } from '../pagination.js'
import { toAmount } from '../payments/assets.js'
import { gatewayUrl, unixSeconds } from '../payments/views.js'
import type { Db } from '../store/db.js'
import type { SubscriptionRow } from './schema.js'

export function subscriptionJson(row: SubscriptionRow, config: ServerConfig): Subscription {
  const mandate =
    row.buyer && row.asset && row.amount_per_period !== null && row.spender
      ? { buyer: row.buyer, asset: row.asset, amountPerPeriod: row.amount_per_period, spender: row.spender }
      : null
  const nextCharge = row.status === 'active' || row.status === 'past_due' ? row.next_charge_at : null
  return {
    subscriptionId: row.id,
    merchantId: row.merchant_id,
    referenceId: row.reference_id,
    status: row.status,
    amount: toAmount(row.amount_unit, row.amount_value, config),
    interval: row.interval,
    intervalCount: row.interval_count,
    periods: row.periods,
    endAt: unixSeconds(row.end_at),
    startAt: unixSeconds(row.start_at),
    gatewayUrl: gatewayUrl(config, row.first_payment_id),
    firstPaymentId: row.first_payment_id,
    periodsCharged: row.periods_charged,
    nextChargeAt: nextCharge ? unixSeconds(nextCharge) : null,
    mandate,
    cancelReason: row.cancel_reason as Subscription['cancelReason'],
    testClock: row.test_clock_id,
    createdAt: row.created_at.toISOString(),
    cancelledAt: row.cancelled_at?.toISOString() ?? null,
    endedAt: row.ended_at?.toISOString() ?? null,
  }
}

export async function findMerchantSubscription(
  db: Db,
  merchantId: string,
  subscriptionId: string,
): Promise<SubscriptionRow> {
  const row = await db
    .selectFrom('subscriptions')
    .selectAll()
    .where('id', '=', subscriptionId)
    .where('merchant_id', '=', merchantId)
    .executeTakeFirst()
  if (!row) fail('subscription_not_found', 'Subscription not found.', { subscriptionId })
  return row
}

/** A page of the merchant's subscriptions, newest first. */
export async function listSubscriptions(
  db: Db,
  config: ServerConfig,
  merchantId: string,
  query: SubscriptionListQuery,
): Promise<SubscriptionListResponse> {
  const limit = query.limit ?? 50
  let q = db.selectFrom('subscriptions').selectAll().where('merchant_id', '=', merchantId)
  if (query.status !== undefined) q = q.where('status', '=', query.status)
  const rows = await keysetPage(afterCursor(q, query.cursor), limit).execute()
  const { items, nextCursor } = page(rows, limit)
  return { data: items.map((row) => subscriptionJson(row, config)), nextCursor }
}
