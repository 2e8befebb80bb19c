import { sql } from 'kysely'
import type { JsonValue, MandateCharge } from '../chains/types.js'
import { jobsChannel } from '../jobs/notify.js'
import { currentTraceparent } from '../metrics/tracing.js'
import { failPayment } from '../payments/lifecycle.js'
import type { Db } from '../store/db.js'
import { activateSubscription, type ChargeOutcome, finishLiveCharge } from './lifecycle.js'
import type { SubscriptionRow } from './schema.js'

/**
 * Live subscriptions whose chain job takes the period from attemptCharge (ChainDriver.startMandateCharge)
 * and reports back here (docs/subscriptions.md). The domain decides when a period is due and what an
 * attempt's outcome means (lifecycle.ts); the chain's job decides, from the chain, what the outcome is,
 * and moves the money under its fence.
 */

/** What a chain's driver stores as a live mandate: its own keys (the subscription keeps it as JSON). */
export interface LiveMandateState {
  [key: string]: JsonValue
}

/** The payload of a period's charge job. */
export interface MandateChargePayload {
  subscriptionId: string
  period: number
  /** ISO time of the attempt (its schedule, on the app's clock): the time the chain's verdict is booked at. */
  at?: string
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

/**
 * attemptCharge's live hook for every chain (ChainDriver.startMandateCharge): the charge job (`kind`) of a
 * period's payment, armed in the transaction that created the payment. Queued the first time, made
 * pending again with this attempt's payload for a retry of the same period (dunning): one job per kind
 * and payment, its claims counting on so fences stay unique. A job still pending or running keeps its
 * claim. Its wake-up is delivered at commit (jobs/notify.ts).
 */
export async function armChargeJob(trx: Db, kind: string, charge: MandateCharge): Promise<void> {
  const { paymentId, at } = charge
  const payload: MandateChargePayload = {
    subscriptionId: charge.subscriptionId,
    period: charge.period,
    at: at.toISOString(),
  }
  const now = new Date()
  // Due at once whichever clock the runner keeps: the app's (`at`, moved on by tests) or the wall's.
  const runAt = at.getTime() < now.getTime() ? at : now
  const json = JSON.stringify(payload)
  await trx
    .insertInto('jobs')
    .values({
      kind,
      payment_id: paymentId,
      run_at: runAt,
      payload: json,
      trace_parent: currentTraceparent(),
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) =>
      oc
        .columns(['kind', 'payment_id'])
        .where('delivery_id', 'is', null)
        .where('refund_id', 'is', null)
        .doUpdateSet({
          state: 'pending',
          run_at: runAt,
          payload: json,
          locked_until: null,
          last_error: null,
          result: null,
          // The retry's tries count from here; `attempts` (its fence) never goes back (jobs/queue.ts rearmJob).
          armed_attempts: sql`jobs.attempts`,
          updated_at: now,
        })
        .where('jobs.state', 'in', ['succeeded', 'failed']),
    )
    .execute()
  await sql`SELECT pg_notify(${jobsChannel}, ${kind})`.execute(trx)
}

/**
 * What a period's charge job found, applied in the job's transaction (`trx`), for every chain: the one
 * place a live period's outcome becomes the subscription's. `succeed` writes the payment's success (its
 * ledger entries) in that transaction when the job has not written it already. Period 0 activates the
 * subscription with the mandate its confirm carried, or fails its payment (`mandate_revoked`,
 * `insufficient_funds`: the sweep then cancels the subscription, `not_activated`); later periods go
 * through finishLiveCharge, which applies each report once.
 */
export async function reportLiveCharge(
  trx: Db,
  params: {
    paymentId: string
    payload: MandateChargePayload
    outcome: ChargeOutcome
    at: Date
    succeed?: (trx: Db) => Promise<unknown>
  },
): Promise<SubscriptionRow | undefined> {
  const { paymentId, payload, outcome, at } = params
  const succeed = params.succeed ?? (async () => undefined)
  if (payload.period > 0)
    return finishLiveCharge(trx, {
      subscriptionId: payload.subscriptionId,
      period: payload.period,
      paymentId,
      outcome,
      at,
      succeed,
    })
  if (outcome.status !== 'succeeded') {
    const failureCode = outcome.status === 'revoked' ? 'mandate_revoked' : 'insufficient_funds'
    await failPayment(trx, { paymentId, failureCode, now: at })
    return undefined
  }
  if (!payload.mandate) throw new Error(`The first period of ${payload.subscriptionId} carries no mandate.`)
  await succeed(trx)
  const mandate = { ...payload.mandate, amountPerPeriod: BigInt(payload.mandate.amountPerPeriod) }
  return activateSubscription(trx, { paymentId, mandate, now: at })
}
