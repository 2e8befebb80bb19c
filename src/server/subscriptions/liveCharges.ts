import type { JsonValue } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { enqueueJob } from '../jobs/queue.js'
import { type Db, inTransaction } from '../store/db.js'
import {
  activateSubscription,
  applyChargeOutcome,
  type ChargeOutcome,
  type GrantedMandate,
  lockSubscription,
  periodPayment,
  updateSubscription,
} from './lifecycle.js'
import type { SubscriptionRow } from './schema.js'

/**
 * Live subscriptions: each period's money moves through its chain's job (docs/subscriptions.md). The
 * domain decides when a period is due and what an attempt's outcome means (lifecycle.ts); the chain's job
 * decides, from the chain, what the outcome is, and moves the money under its fence. A subscription
 * whose charge is in flight has no `next_attempt_at`: the sweep leaves it alone until the job reports.
 */

/** What a chain's driver stores as a live mandate: the job kind that charges its periods, and its own keys. */
export interface LiveMandateState {
  chargeJob: string
  [key: string]: JsonValue
}

/** The payload of a period's charge job (the same for every chain). */
export interface MandateChargePayload {
  subscriptionId: string
  period: number
  /** The first period's job only: the mandate as confirmed (the subscription stores it once active). */
  mandate?: GrantedMandateJson
}

/** GrantedMandate as JSON (the job's payload). */
export interface GrantedMandateJson {
  buyer: string
  asset: string
  amountPerPeriod: string
  spender: string
  state: LiveMandateState
}

export function chargeJobOf(row: Pick<SubscriptionRow, 'id' | 'mandate'>): string {
  const job = (row.mandate as { chargeJob?: unknown } | null)?.chargeJob
  if (typeof job !== 'string') throw new Error(`Subscription ${row.id} holds no live mandate.`)
  return job
}

/**
 * The charge job of `paymentId`, pending at `at`: queued the first time, made pending again for a retry
 * of the same period (jobs are one per kind and payment; its claims keep counting, so fences stay unique).
 */
async function armChargeJob(
  trx: Db,
  kind: string,
  paymentId: string,
  payload: MandateChargePayload,
  at: Date,
) {
  await enqueueJob(trx, { kind, paymentId, payload, runAt: at, now: at })
  await trx
    .updateTable('jobs')
    .set({ state: 'pending', run_at: at, locked_until: null, last_error: null, updated_at: at })
    .where('kind', '=', kind)
    .where('payment_id', '=', paymentId)
    .where('state', 'in', ['succeeded', 'failed'])
    .execute()
}

/**
 * Starts the attempt at the period a live subscription is due for: the period's payment (created once,
 * `processing`), its charge job armed, and the subscription marked in flight. False when it was not due.
 */
export async function startLiveCharge(
  db: Db,
  config: ServerConfig,
  subscriptionId: string,
  at: Date,
): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const row = await lockSubscription(trx, subscriptionId)
    if (row?.mode !== 'live' || (row.status !== 'active' && row.status !== 'past_due')) return false
    if (row.next_attempt_at === null || row.next_attempt_at.getTime() > at.getTime()) return false
    const period = row.periods_charged
    const paymentId = await periodPayment(trx, config, row, period, at)
    await updateSubscription(trx, row.id, { next_attempt_at: null }, at)
    await armChargeJob(trx, chargeJobOf(row), paymentId, { subscriptionId: row.id, period }, at)
    return true
  })
}

/** Starts the attempts of every live subscription due by `until`; returns how many started. */
export async function chargeDueLiveSubscriptions(
  db: Db,
  config: ServerConfig,
  params: { until: Date; limit?: number },
): Promise<number> {
  const due = await db
    .selectFrom('subscriptions')
    .select('id')
    .where('status', 'in', ['active', 'past_due'])
    .where('mode', '=', 'live')
    .where('test_clock_id', 'is', null)
    .where('next_attempt_at', '<=', params.until)
    .orderBy('next_attempt_at')
    .limit(params.limit ?? 500)
    .execute()
  let started = 0
  for (const { id } of due) if (await startLiveCharge(db, config, id, params.until)) started++
  return started
}

/**
 * What a period's charge job found, applied in the job's transaction (`trx`), where the payment's own
 * outcome (succeeded, with its ledger entries) is written too. Period 0 activates the subscription with
 * the mandate; a failed first period leaves it `incomplete` (its payment failed: the sweep cancels it).
 * Applied once: a report for a period the subscription is no longer at (applied already, or cancelled
 * meanwhile) changes nothing.
 */
export async function finishLiveCharge(
  trx: Db,
  params: {
    paymentId: string
    payload: MandateChargePayload
    outcome: ChargeOutcome['status']
    at: Date
  },
): Promise<SubscriptionRow | undefined> {
  const { paymentId, payload, outcome, at } = params
  if (payload.period === 0) {
    if (outcome !== 'succeeded' || !payload.mandate) return undefined
    return activateSubscription(trx, { paymentId, mandate: grantedMandate(payload.mandate), now: at })
  }
  const row = await lockSubscription(trx, payload.subscriptionId)
  if (!row || (row.status !== 'active' && row.status !== 'past_due')) return row
  if (row.periods_charged !== payload.period || row.next_attempt_at !== null) return row
  return applyChargeOutcome(trx, row, paymentId, outcome, at)
}

function grantedMandate(json: GrantedMandateJson): GrantedMandate {
  return { ...json, amountPerPeriod: BigInt(json.amountPerPeriod) }
}
