import { expect } from 'vitest'
import { chargeDueSubscriptions } from '../../src/server/subscriptions/lifecycle.js'
import type { TestServer } from '../server/harness.js'
import { until } from '../until.js'

/**
 * What the live subscription suites share (test/evm/subscriptions.test.ts on Anvil,
 * test/solana-live/subscriptions.test.ts on the local Solana RPC): the app's sweep run on demand, each
 * period's payment, a subscription's second period brought due with no worker to charge it, and its
 * charge job moved to its last try.
 */

/** What the app's sweep does when periods fall due on real time: each one started, with the live drivers. */
export const chargeDue = (t: TestServer) =>
  chargeDueSubscriptions(t.db, t.app.config, {
    clockId: null,
    until: t.app.now(),
    drivers: t.app.chainDrivers,
  })

/** The payment of each period, in order. */
export function periodPayments(t: TestServer, subscriptionId: string) {
  return t.db
    .selectFrom('subscription_periods')
    .innerJoin('payments', 'payments.id', 'subscription_periods.payment_id')
    .select([
      'subscription_periods.period',
      'payments.id',
      'payments.status',
      'payments.source',
      'payments.tx_id',
      'payments.failure_code',
    ])
    .where('subscription_id', '=', subscriptionId)
    .orderBy('period')
    .execute()
}

/**
 * The active subscription's second period, due with its charge queued and no worker running (the caller
 * stops its runner first): `moveClocks` takes the app's clock and the chain's to its next attempt and the
 * sweep starts the charge. Returns the period's payment, for the test to run the charge its way, and how
 * many charges the sweep started (other subscriptions a suite left running may be due too).
 */
export async function secondPeriodDue(
  t: TestServer,
  subscriptionId: string,
  moveClocks: (to: Date) => unknown,
) {
  const { next_attempt_at: due } = await t.db
    .selectFrom('subscriptions')
    .select('next_attempt_at')
    .where('id', '=', subscriptionId)
    .executeTakeFirstOrThrow()
  expect(due).not.toBeNull()
  await moveClocks(due!)
  const started = await chargeDue(t)
  const [, period] = await periodPayments(t, subscriptionId)
  expect(period).toBeDefined()
  return { period: period!, started }
}

/**
 * The period's charge job (of `kind`) moved to its last try: mandate charges give up after 50 tries, and
 * a verdict counted now would fail the period and dun the subscription.
 */
export async function chargeAtLastTry(t: TestServer, paymentId: string, kind: string) {
  const job = await t.db
    .selectFrom('jobs')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('kind', '=', kind)
    .executeTakeFirstOrThrow()
  const lastTry = job.armed_attempts + 49
  await t.db.updateTable('jobs').set({ attempts: lastTry }).where('id', '=', job.id).execute()
  return {
    id: job.id,
    /** The job's row once a worker has made that try (`what` names it), for the test to read its verdict. */
    tried: (what: string) =>
      until(
        async () => {
          const row = await t.db
            .selectFrom('jobs')
            .selectAll()
            .where('id', '=', job.id)
            .executeTakeFirstOrThrow()
          return row.attempts > lastTry && row.state !== 'running' ? row : undefined
        },
        what,
        20_000,
      ),
  }
}
