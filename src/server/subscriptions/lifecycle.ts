import { sql } from 'kysely'
import type { Subscription, subscriptionSimulations } from '../../contract/subscription.js'
import type { ChainDriver, JsonValue } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { toAmount } from '../payments/assets.js'
import { markCancelled } from '../payments/cancel.js'
import { insertPaymentRow } from '../payments/create.js'
import { failPayment, transitionPayment } from '../payments/lifecycle.js'
import { succeedTestPayment } from '../payments/settlements.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { maxPeriods } from './create.js'
import { recordSubscriptionEvent } from './events.js'
import { dueAt, periodsBefore, type Schedule } from './periods.js'
import type { SubscriptionRow } from './schema.js'

/**
 * The subscriptions domain: the only code that changes a subscription's state. Each change locks the
 * subscription's row, is conditional on the state it comes from, and writes its event in the same
 * transaction. A period's money moves under the (subscription, period) key of `subscription_periods`:
 * its payment is created once, and it succeeds once (a conditional `processing -> succeeded`).
 */

/**
 * Dunning: after a failed charge, retry this many days later, one entry per retry; after the last retry
 * fails the period's payment fails and the subscription is cancelled (`payment_failed`).
 */
export const retryDelaysDays = [1, 3, 5] as const
const dayMs = 24 * 60 * 60 * 1000

function scheduleOf(row: SubscriptionRow): Schedule {
  return { start: row.start_at, interval: row.interval, intervalCount: row.interval_count }
}

/** How many periods the subscription has in all. */
export function totalPeriods(row: SubscriptionRow): number {
  return row.periods ?? periodsBefore(scheduleOf(row), row.end_at, maxPeriods)
}

async function lockSubscription(db: Db, id: string): Promise<SubscriptionRow | undefined> {
  return db.selectFrom('subscriptions').selectAll().where('id', '=', id).forUpdate().executeTakeFirst()
}

async function updateSubscription(
  db: Db,
  id: string,
  set: Partial<Omit<SubscriptionRow, 'id' | 'mandate'>> & { mandate?: string | null },
  now: Date,
): Promise<SubscriptionRow> {
  return db
    .updateTable('subscriptions')
    .set({ ...set, updated_at: now })
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirstOrThrow()
}

/** What the buyer granted, as the first period's confirm established it. */
export interface GrantedMandate {
  buyer: string
  asset: string
  amountPerPeriod: bigint
  spender: string
  /** What the chain holds (signed permit, delegation): what later charges present. */
  state: JsonValue
}

/**
 * The first period is paid and the mandate is in place: `incomplete -> active` (`subscription.activated`),
 * the next period scheduled; a subscription of one period ends at once (`subscription.ended`). Runs in
 * the transaction that made the first payment succeed. Returns undefined when `paymentId` is no
 * subscription's first payment.
 */
export async function activateSubscription(
  db: Db,
  params: { paymentId: string; mandate: GrantedMandate; now: Date },
): Promise<SubscriptionRow | undefined> {
  const { paymentId, mandate, now } = params
  const found = await db
    .selectFrom('subscriptions')
    .select('id')
    .where('first_payment_id', '=', paymentId)
    .executeTakeFirst()
  if (!found) return undefined
  const row = await lockSubscription(db, found.id)
  if (row?.status !== 'incomplete') return row
  const clockNow = await clockTime(db, row, now)
  const total = totalPeriods(row)
  const next = total > 1 ? dueAt(scheduleOf(row), 1) : null
  const active = await updateSubscription(
    db,
    row.id,
    {
      status: 'active',
      buyer: mandate.buyer,
      asset: mandate.asset,
      amount_per_period: mandate.amountPerPeriod.toString(),
      spender: mandate.spender,
      mandate: JSON.stringify(mandate.state),
      periods_charged: 1,
      next_charge_at: next,
      next_attempt_at: next,
      activated_at: clockNow,
    },
    now,
  )
  await recordSubscriptionEvent(db, active, 'subscription.activated', paymentId, clockNow)
  if (next !== null) return active
  return endSubscription(db, active, paymentId, clockNow)
}

async function endSubscription(db: Db, row: SubscriptionRow, paymentId: string, now: Date) {
  const ended = await updateSubscription(
    db,
    row.id,
    { status: 'ended', ended_at: now, next_charge_at: null, next_attempt_at: null },
    now,
  )
  await recordSubscriptionEvent(db, ended, 'subscription.ended', paymentId, now)
  return ended
}

/** The time a subscription lives in: its test clock's, else `now`. */
async function clockTime(db: Db, row: Pick<SubscriptionRow, 'test_clock_id'>, now: Date): Promise<Date> {
  if (row.test_clock_id === null) return now
  const clock = await db
    .selectFrom('test_clocks')
    .select('frozen_time')
    .where('id', '=', row.test_clock_id)
    .executeTakeFirstOrThrow()
  return clock.frozen_time
}

/** The payment of the period the subscription is at (the last one created). */
async function currentPeriodPayment(db: Db, subscriptionId: string): Promise<string> {
  const last = await db
    .selectFrom('subscription_periods')
    .select('payment_id')
    .where('subscription_id', '=', subscriptionId)
    .orderBy('period', 'desc')
    .limit(1)
    .executeTakeFirstOrThrow()
  return last.payment_id
}

export type CancelReason = NonNullable<Subscription['cancelReason']>

/**
 * A live period whose charge job is armed (the first period's confirm, or attemptCharge) and has not
 * reported yet: a transfer may be on its way, so that job decides the period (it sees the subscription
 * cancelled and fails the payment unless the money already moved).
 */
function liveChargeInFlight(row: SubscriptionRow): boolean {
  return row.mode === 'live' && (row.status === 'incomplete' || row.next_attempt_at === null)
}

/**
 * Stops a subscription (`subscription.cancelled`): nothing more is charged. A first payment still waiting
 * is cancelled with it; a period being retried fails (`subscription_cancelled`, or `failureCode`).
 * `409 invalid_state` once it is cancelled or ended.
 */
export async function cancelSubscription(
  db: Db,
  params: { subscriptionId: string; reason: CancelReason; now: Date; failureCode?: string },
): Promise<SubscriptionRow> {
  return inTransaction(db, async (trx) => {
    const row = await lockSubscription(trx, params.subscriptionId)
    if (!row)
      fail('subscription_not_found', 'Subscription not found.', { subscriptionId: params.subscriptionId })
    if (row.status === 'cancelled' || row.status === 'ended') {
      fail('invalid_state', `The subscription is ${row.status}.`, {
        subscriptionId: row.id,
        status: row.status,
      })
    }
    const now = await clockTime(trx, row, params.now)
    const paymentId = await currentPeriodPayment(trx, row.id)
    const payment = await trx
      .selectFrom('payments')
      .select('status')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    if (payment.status === 'requires_action') {
      await markCancelled(trx, { paymentId, reason: 'cancelled_by_merchant', now })
    } else if (payment.status === 'processing' && !liveChargeInFlight(row)) {
      await failPayment(trx, {
        paymentId,
        failureCode: params.failureCode ?? 'subscription_cancelled',
        now,
      })
    }
    const cancelled = await updateSubscription(
      trx,
      row.id,
      {
        status: 'cancelled',
        cancel_reason: params.reason,
        cancelled_at: now,
        next_charge_at: null,
        next_attempt_at: null,
      },
      now,
    )
    await recordSubscriptionEvent(trx, cancelled, 'subscription.cancelled', paymentId, now)
    return cancelled
  })
}

/** What a charge attempt found: the money moved, the buyer could not pay, or the mandate is gone. */
export type ChargeOutcome =
  | { status: 'succeeded'; txId: string }
  | { status: 'insufficient' }
  | { status: 'revoked' }

/**
 * One attempt at the period a subscription is due for, at `at` (its scheduled time): the period's payment
 * (created once: `subscription_periods`' key), then, by what `charge` found, `succeeded` and the next
 * period scheduled (`subscription.renewed`, or `.ended` after the last), a retry scheduled (`past_due`),
 * or the subscription cancelled (the last retry failed, or the mandate was revoked). Test mode charges
 * with `sandboxCharge`. Live mode hands the period to the driver of the mandate's chain
 * (`startMandateCharge`: a job that records its transaction before sending it) and marks the attempt in
 * flight (`next_attempt_at` null) until the job reports with `finishLiveCharge`; without such a driver
 * it throws (a period must never count as charged without its money moving). Returns false when the
 * subscription was not due (another worker took it).
 */
export async function attemptCharge(
  db: Db,
  config: ServerConfig,
  subscriptionId: string,
  at: Date,
  charge: (row: SubscriptionRow) => Promise<ChargeOutcome> | ChargeOutcome,
  drivers: readonly ChainDriver[] = [],
): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const row = await lockSubscription(trx, subscriptionId)
    if (!row || (row.status !== 'active' && row.status !== 'past_due')) return false
    const driver = row.mode === 'test' ? undefined : drivers.find((d) => row.asset?.startsWith(`${d.caip2}/`))
    if (row.mode !== 'test' && !driver?.startMandateCharge)
      throw new Error(`Subscription ${row.id}: no live driver charges ${row.asset}.`)
    if (row.next_attempt_at === null || row.next_attempt_at.getTime() > at.getTime()) return false
    const period = row.periods_charged
    const payment = await periodPayment(trx, config, row, period, at)
    const paymentId = payment.id
    if (driver?.startMandateCharge) {
      await driver.startMandateCharge(trx, { subscriptionId: row.id, paymentId, period, at })
      await updateSubscription(trx, row.id, { next_attempt_at: null }, at)
      return true
    }
    await applyChargeOutcome(trx, row, paymentId, await charge(row), at, (txId) =>
      succeedTestPayment(trx, {
        payment,
        asset: row.asset ?? undefined,
        value: row.amount_per_period ?? '0',
        txId,
        now: at,
      }),
    )
    return true
  })
}

/**
 * A live charge's job reports what the chain decided for `period` (attemptCharge started it): applied as
 * a test-mode outcome is, the payment's success written by `succeed` (its ledger entries) in the same
 * transaction. A subscription cancelled meanwhile keeps its status: money that moved still succeeds the
 * payment, else the payment fails (`subscription_cancelled`). Returns the subscription as it now is.
 */
export async function finishLiveCharge(
  db: Db,
  params: {
    subscriptionId: string
    period: number
    paymentId: string
    outcome: ChargeOutcome
    at: Date
    succeed: (trx: Db) => Promise<unknown>
  },
): Promise<SubscriptionRow | undefined> {
  const { paymentId, outcome, at } = params
  return inTransaction(db, async (trx) => {
    const row = await lockSubscription(trx, params.subscriptionId)
    if (!row) return undefined
    const inFlight =
      (row.status === 'active' || row.status === 'past_due') &&
      row.periods_charged === params.period &&
      row.next_attempt_at === null
    if (inFlight) {
      await applyChargeOutcome(trx, row, paymentId, outcome, at, () => params.succeed(trx))
    } else if (outcome.status === 'succeeded') {
      await params.succeed(trx)
    } else {
      await failPayment(trx, { paymentId, failureCode: 'subscription_cancelled', now: at })
    }
    return lockSubscription(trx, row.id)
  })
}

async function applyChargeOutcome(
  trx: Db,
  row: SubscriptionRow,
  paymentId: string,
  outcome: ChargeOutcome,
  at: Date,
  succeed: (txId: string) => Promise<unknown>,
): Promise<void> {
  const period = row.periods_charged
  if (outcome.status === 'revoked') {
    await failPayment(trx, { paymentId, failureCode: 'mandate_revoked', now: at })
    const cancelled = await updateSubscription(
      trx,
      row.id,
      {
        status: 'cancelled',
        cancel_reason: 'mandate_revoked',
        cancelled_at: at,
        next_charge_at: null,
        next_attempt_at: null,
      },
      at,
    )
    await recordSubscriptionEvent(trx, cancelled, 'subscription.cancelled', paymentId, at)
    return
  }
  if (outcome.status === 'insufficient') {
    const failed = row.failed_attempts + 1
    const delay = retryDelaysDays[failed - 1]
    if (delay === undefined) {
      await failPayment(trx, { paymentId, failureCode: 'insufficient_funds', now: at })
      const cancelled = await updateSubscription(
        trx,
        row.id,
        {
          status: 'cancelled',
          cancel_reason: 'payment_failed',
          cancelled_at: at,
          failed_attempts: failed,
          next_charge_at: null,
          next_attempt_at: null,
        },
        at,
      )
      await recordSubscriptionEvent(trx, cancelled, 'subscription.cancelled', paymentId, at)
      return
    }
    const pastDue = await updateSubscription(
      trx,
      row.id,
      {
        status: 'past_due',
        failed_attempts: failed,
        next_attempt_at: new Date(at.getTime() + delay * dayMs),
      },
      at,
    )
    if (row.status === 'active')
      await recordSubscriptionEvent(trx, pastDue, 'subscription.past_due', paymentId, at)
    return
  }
  await succeed(outcome.txId)
  const charged = period + 1
  const next = charged < totalPeriods(row) ? dueAt(scheduleOf(row), charged) : null
  const renewed = await updateSubscription(
    trx,
    row.id,
    {
      status: 'active',
      periods_charged: charged,
      failed_attempts: 0,
      next_charge_at: next,
      next_attempt_at: next,
    },
    at,
  )
  await recordSubscriptionEvent(trx, renewed, 'subscription.renewed', paymentId, at)
  if (next === null) await endSubscription(trx, renewed, paymentId, at)
}

/**
 * The payment of `period`, created with its `subscription_periods` row the first time (a retry finds
 * it): `source: mandate`, moved to `processing` at once with the mandate's buyer and amount (the service
 * charges; no wallet is asked).
 */
async function periodPayment(
  db: Db,
  config: ServerConfig,
  row: SubscriptionRow,
  period: number,
  at: Date,
): Promise<Pick<PaymentRow, 'id' | 'merchant_id' | 'capture_method'>> {
  const existing = await db
    .selectFrom('subscription_periods')
    .innerJoin('payments', 'payments.id', 'subscription_periods.payment_id')
    .select(['payments.id', 'payments.merchant_id', 'payments.capture_method'])
    .where('subscription_periods.subscription_id', '=', row.id)
    .where('subscription_periods.period', '=', period)
    .executeTakeFirst()
  if (existing) return existing
  const due = dueAt(scheduleOf(row), period)
  const paymentId = await insertPaymentRow(db, {
    auth: { partnerId: row.partner_id, mode: row.mode },
    merchantId: row.merchant_id,
    referenceId: row.reference_id,
    amount: { unit: row.amount_unit, value: row.amount_value },
    // A period's payment is never waiting on a buyer: it is processing until charged or given up.
    expiresAt: new Date(at.getTime() + (retryDelaysDays.reduce((a, b) => a + b, 0) + 1) * dayMs),
    source: 'mandate',
    now: at,
    afterCommit: () => {},
  })
  await db
    .insertInto('subscription_periods')
    .values({ subscription_id: row.id, period, payment_id: paymentId, due_at: due, created_at: at })
    .execute()
  // The payment as made (its capture method the payment's own, not assumed), for the charge's success.
  return transitionPayment(db, {
    paymentId,
    from: 'requires_action',
    to: 'processing',
    set: {
      buyer: row.buyer,
      option_amount: JSON.stringify(toAmount(`caip19/${row.asset}`, row.amount_per_period ?? '0', config)),
    },
    now: at,
  })
}

/** Test mode's charge: what the sandbox buyer's chain would decide (`POST /v1/test/subscriptions/:id/simulate`). */
export function sandboxCharge(row: SubscriptionRow): ChargeOutcome {
  if (row.sandbox_buyer === 'revoked') return { status: 'revoked' }
  if (row.sandbox_buyer === 'empty') return { status: 'insufficient' }
  return { status: 'succeeded', txId: `test:${row.id}:${row.periods_charged}` }
}

/**
 * Charges every test-mode subscription due by `until` on one clock (`clockId`), or on real time (null),
 * earliest first, each attempt at its own scheduled time, so a clock advanced by a year charges its twelve
 * months in order, with the retries between. With the live `drivers`, live subscriptions (on real time)
 * too: each due one's charge is started (attemptCharge). Returns the number of attempts made.
 */
export async function chargeDueSubscriptions(
  db: Db,
  config: ServerConfig,
  params: { clockId: string | null; until: Date; limit?: number; drivers?: readonly ChainDriver[] },
): Promise<number> {
  let attempts = 0
  const limit = params.limit ?? 100_000
  while (attempts < limit) {
    let q = db
      .selectFrom('subscriptions')
      .select(['id', 'next_attempt_at'])
      .where('status', 'in', ['active', 'past_due'])
      .where('mode', 'in', params.drivers ? ['test', 'live'] : ['test'])
      .where('next_attempt_at', '<=', params.until)
      .orderBy('next_attempt_at')
      .limit(1)
    q =
      params.clockId === null
        ? q.where('test_clock_id', 'is', null)
        : q.where('test_clock_id', '=', params.clockId)
    const due = await q.executeTakeFirst()
    if (!due?.next_attempt_at) return attempts
    // On real time the attempt is now; on a test clock, the moment it fell due.
    const at = params.clockId === null ? params.until : due.next_attempt_at
    if (!(await attemptCharge(db, config, due.id, at, sandboxCharge, params.drivers))) return attempts
    attempts++
  }
  return attempts
}

/** A subscription whose buyer never signed: its first payment ended without paying, so is the subscription. */
export async function cancelUnactivated(db: Db, now: Date): Promise<number> {
  const stale = await db
    .selectFrom('subscriptions')
    .innerJoin('payments', 'payments.id', 'subscriptions.first_payment_id')
    .select('subscriptions.id')
    .where('subscriptions.status', '=', 'incomplete')
    .where(sql<boolean>`payments.status IN ('expired', 'cancelled', 'failed')`)
    .limit(100)
    .execute()
  for (const { id } of stale) {
    await cancelSubscription(db, { subscriptionId: id, reason: 'not_activated', now }).catch(() => {})
  }
  return stale.length
}

/**
 * Test mode: what the sandbox buyer's chain decides from now on (`funded`, `empty`, `revoked`), seen at
 * the next charge attempt as live mode sees the chain.
 */
export async function simulateSandboxBuyer(
  db: Db,
  row: SubscriptionRow,
  buyer: (typeof subscriptionSimulations)[number],
  now: Date,
): Promise<SubscriptionRow> {
  if (row.mode !== 'test') fail('not_sandbox_api_key', 'Subscriptions can only be simulated in test mode.')
  if (row.status === 'cancelled' || row.status === 'ended') {
    fail('invalid_state', `The subscription is ${row.status}.`, {
      subscriptionId: row.id,
      status: row.status,
    })
  }
  return updateSubscription(db, row.id, { sandbox_buyer: buyer }, now)
}
