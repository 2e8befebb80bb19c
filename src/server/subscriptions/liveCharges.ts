import type { JsonValue, MandateCharge } from '../chains/types.js'
import { enqueueJob } from '../jobs/queue.js'
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
 * The charge job (`kind`) of a period's payment, pending at `charge.at`, in the transaction that created
 * the payment: queued the first time, made pending again for a retry of the same period (jobs are one per
 * kind and payment; its claims keep counting, so fences stay unique).
 */
export async function armChargeJob(trx: Db, kind: string, charge: MandateCharge): Promise<void> {
  const { paymentId, at } = charge
  const payload: MandateChargePayload = { subscriptionId: charge.subscriptionId, period: charge.period }
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
 * What a period's charge job found, applied in the job's transaction (`trx`), where the payment's own
 * success (with its ledger entries) was written already when the money moved. Period 0 activates the
 * subscription with the mandate (a failed first period is the job's to fail: the sweep then cancels the
 * subscription); later periods go through finishLiveCharge, which applies each report once.
 */
export async function reportLiveCharge(
  trx: Db,
  params: { paymentId: string; payload: MandateChargePayload; outcome: ChargeOutcome; at: Date },
): Promise<SubscriptionRow | undefined> {
  const { paymentId, payload, outcome, at } = params
  if (payload.period === 0) {
    if (outcome.status !== 'succeeded' || !payload.mandate) return undefined
    const mandate = { ...payload.mandate, amountPerPeriod: BigInt(payload.mandate.amountPerPeriod) }
    return activateSubscription(trx, { paymentId, mandate, now: at })
  }
  return finishLiveCharge(trx, {
    subscriptionId: payload.subscriptionId,
    period: payload.period,
    paymentId,
    outcome,
    at,
    succeed: async () => undefined,
  })
}
