import type { Subscription, SubscriptionCreateBody } from '../../contract/subscription.js'
import type { ServerConfig } from '../config.js'
import type { AuthContext } from '../context.js'
import { fail, validationError } from '../errors.js'
import { newId } from '../ids.js'
import { unitDisplay } from '../payments/assets.js'
import { insertPaymentRow } from '../payments/create.js'
import { unixSeconds } from '../payments/views.js'
import { type Db, inTransaction } from '../store/db.js'
import type { MerchantRow } from '../store/schema.js'
import { findTestClock } from './clocks.js'
import { recordSubscriptionEvent } from './events.js'
import { dueAt, periodsBefore, type Schedule } from './periods.js'
import { subscriptionJson } from './views.js'

/** The most periods a subscription may have (a century of months). */
export const maxPeriods = 1200
/** How far ahead a subscription may start. */
const maxStartDelaySeconds = 365 * 24 * 60 * 60
/** How far back a `startAt` may be (a clock skew between the merchant and the service). */
const startSkewSeconds = 300

/**
 * `POST /v1/subscriptions`: the subscription (`incomplete`) and its first period's payment (`source`
 * `mandate`, period 0) in one transaction, with `subscription.created` on that payment. The payment's
 * link is the subscription's `gatewayUrl`: the buyer's wallet signs the mandate there.
 */
export async function createSubscription(
  db: Db,
  input: {
    auth: AuthContext
    merchant: Pick<MerchantRow, 'id'>
    body: SubscriptionCreateBody
    config: ServerConfig
    now: Date
    afterCommit: (fn: () => void) => void
  },
): Promise<Subscription> {
  const { auth, merchant, body, config, now } = input
  if (!unitDisplay(body.amount.unit, config)) {
    throw validationError([{ path: 'body.amount.unit', message: `Unsupported unit ${body.amount.unit}.` }])
  }
  if ((body.periods === undefined) === (body.endAt === undefined)) {
    throw validationError([
      { path: 'body.periods', message: 'Give exactly one of periods or endAt: a mandate is bounded.' },
    ])
  }
  const clock = body.testClock === undefined ? undefined : await findTestClock(db, auth, body.testClock)
  // A subscription on a test clock lives in the clock's time.
  const clockNow = clock ? clock.frozen_time : now
  const start = body.startAt === undefined ? clockNow : new Date(body.startAt * 1000)
  const startDelay = unixSeconds(start) - unixSeconds(clockNow)
  if (startDelay < -startSkewSeconds || startDelay > maxStartDelaySeconds) {
    throw validationError([
      { path: 'body.startAt', message: 'startAt must be between now and one year from now.' },
    ])
  }
  const schedule: Schedule = { start, interval: body.interval, intervalCount: body.intervalCount ?? 1 }
  let end: Date
  if (body.periods !== undefined) {
    end = dueAt(schedule, body.periods)
  } else {
    end = new Date(body.endAt! * 1000)
    if (end.getTime() <= start.getTime()) {
      throw validationError([{ path: 'body.endAt', message: 'endAt must be after startAt.' }])
    }
    if (periodsBefore(schedule, end, maxPeriods + 1) > maxPeriods) {
      throw validationError([{ path: 'body.endAt', message: `At most ${maxPeriods} periods.` }])
    }
  }
  if (Number.isNaN(end.getTime()) || end.getUTCFullYear() > 9999) {
    throw validationError([
      { path: 'body.periods', message: 'The subscription would end after the year 9999.' },
    ])
  }
  const row = await inTransaction(db, async (trx) => {
    const paymentId = await insertPaymentRow(trx, {
      auth,
      merchantId: merchant.id,
      referenceId: body.referenceId,
      amount: body.amount,
      expiresAt: new Date((unixSeconds(now) + config.paymentTtlSeconds) * 1000),
      source: 'mandate',
      now,
      afterCommit: input.afterCommit,
    })
    const subscription = await trx
      .insertInto('subscriptions')
      .values({
        id: newId('subscription'),
        partner_id: auth.partnerId,
        merchant_id: merchant.id,
        mode: auth.mode,
        reference_id: body.referenceId,
        amount_unit: body.amount.unit,
        amount_value: body.amount.value,
        interval: body.interval,
        interval_count: schedule.intervalCount,
        periods: body.periods ?? null,
        start_at: start,
        end_at: end,
        test_clock_id: clock?.id ?? null,
        status: 'incomplete',
        first_payment_id: paymentId,
        buyer: null,
        asset: null,
        amount_per_period: null,
        spender: null,
        mandate: null,
        periods_charged: 0,
        next_charge_at: null,
        next_attempt_at: null,
        failed_attempts: 0,
        cancel_reason: null,
        sandbox_buyer: 'funded',
        created_at: now,
        updated_at: now,
        activated_at: null,
        cancelled_at: null,
        ended_at: null,
      })
      .returningAll()
      .executeTakeFirstOrThrow()
    await trx
      .insertInto('subscription_periods')
      .values({
        subscription_id: subscription.id,
        period: 0,
        payment_id: paymentId,
        due_at: start,
        created_at: now,
      })
      .execute()
    await recordSubscriptionEvent(trx, subscription, 'subscription.created', paymentId, now)
    return subscription
  })
  if (!row) fail('merchant_not_found', 'Merchant not found.', { merchantId: merchant.id })
  return subscriptionJson(row, config)
}
