import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { transitionPayment } from '../../src/server/payments/lifecycle.js'
import { armChargeJob, reportLiveCharge } from '../../src/server/subscriptions/liveCharges.js'
import { createGatewayEnv, type GatewayEnv } from '../gateway/support.js'
import { headers } from './helpers.js'

// The subscriptions domain's live path, shared by the EVM and Solana drivers (docs/subscriptions.md):
// one arming of a period's charge job, and one report of what the chain decided, period 0 included.

let env: GatewayEnv
beforeAll(async () => {
  env = await createGatewayEnv()
})
afterAll(() => env.t.close())

let reference = 0
/** A subscription whose first payment is processing, as a live confirm leaves it. */
async function incomplete(): Promise<{ subscriptionId: string; paymentId: string }> {
  reference += 1
  const res = await env.t.request({
    method: 'POST',
    url: '/v1/subscriptions',
    headers: headers(env.apiKey, env.merchantId),
    payload: {
      referenceId: `live-${reference}`,
      amount: { unit: 'iso4217/USD', value: '999' },
      periods: 3,
      interval: 'month',
    },
  })
  expect(res.statusCode, res.body).toBe(201)
  const paymentId = res.json.firstPaymentId as string
  await transitionPayment(env.t.db, { paymentId, from: 'requires_action', to: 'processing' })
  return { subscriptionId: res.json.subscriptionId as string, paymentId }
}

const job = (paymentId: string) =>
  env.t.db
    .selectFrom('jobs')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('kind', '=', 'test.charge')
    .executeTakeFirstOrThrow()
const subscription = (id: string) =>
  env.t.db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
const payment = (id: string) =>
  env.t.db
    .selectFrom('payments')
    .select(['status', 'failure_code'])
    .where('id', '=', id)
    .executeTakeFirstOrThrow()

describe('armChargeJob: one charge job per period, armed again for each retry', () => {
  it('queues the job due at once, re-arms a finished one with the retry’s payload, and leaves a running one alone', async () => {
    const { subscriptionId, paymentId } = await incomplete()
    // The app's clock may run ahead of the wall (tests move it): the job is due on either.
    const ahead = new Date(Date.now() + 30 * 86_400_000)
    await armChargeJob(env.t.db, 'test.charge', { subscriptionId, paymentId, period: 1, at: ahead })
    const armed = await job(paymentId)
    expect(armed.state).toBe('pending')
    expect(armed.run_at.getTime()).toBeLessThanOrEqual(Date.now())
    expect(armed.payload).toEqual({ subscriptionId, period: 1, at: ahead.toISOString() })

    // The attempt ended (dunning will retry): a claim was counted and a result written.
    await env.t.db
      .updateTable('jobs')
      .set({ state: 'failed', attempts: 3, result: JSON.stringify({ outcome: 'insufficient' }) })
      .where('id', '=', armed.id)
      .execute()
    const retry = new Date(Date.now() - 1000)
    await armChargeJob(env.t.db, 'test.charge', { subscriptionId, paymentId, period: 1, at: retry })
    const rearmed = await job(paymentId)
    expect([rearmed.id, rearmed.state, rearmed.attempts, rearmed.result]).toEqual([
      armed.id,
      'pending',
      3,
      null,
    ])
    expect(rearmed.payload).toEqual({ subscriptionId, period: 1, at: retry.toISOString() })
    expect(rearmed.run_at.getTime()).toBe(retry.getTime())

    // A claim in progress keeps its job: arming again changes nothing.
    await env.t.db.updateTable('jobs').set({ state: 'running' }).where('id', '=', armed.id).execute()
    await armChargeJob(env.t.db, 'test.charge', { subscriptionId, paymentId, period: 1, at: new Date() })
    expect(await job(paymentId)).toMatchObject({ state: 'running', payload: rearmed.payload })
  })
})

describe('reportLiveCharge: the first period, for every chain', () => {
  const mandate = (subscriptionId: string) => ({
    buyer: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:BuyerBuyerBuyerBuyerBuyerBuyerBuyerBuyer1',
    asset: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v',
    amountPerPeriod: '9990000',
    spender: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:ServiceServiceServiceServiceServiceServ1',
    state: { kind: 'splDelegation', approval: `sig-${subscriptionId}`, delegatedAmount: '29970000' },
  })

  it('a charge that moved the money activates the subscription with the mandate, after the payment’s own success', async () => {
    const { subscriptionId, paymentId } = await incomplete()
    const order: string[] = []
    const active = await reportLiveCharge(env.t.db, {
      paymentId,
      payload: { subscriptionId, period: 0, mandate: mandate(subscriptionId) },
      outcome: { status: 'succeeded', txId: 'tx-0' },
      at: new Date(),
      succeed: async () => {
        order.push('payment succeeded')
      },
    })
    expect(order).toEqual(['payment succeeded'])
    expect(active).toMatchObject({
      status: 'active',
      periods_charged: 1,
      buyer: mandate(subscriptionId).buyer,
      amount_per_period: '9990000',
    })
    expect((await subscription(subscriptionId)).mandate).toEqual(mandate(subscriptionId).state)
  })

  it('a first period the chain refused fails its payment (mandate_revoked, insufficient_funds); the subscription waits for the sweep', async () => {
    for (const [status, failureCode] of [
      ['revoked', 'mandate_revoked'],
      ['insufficient', 'insufficient_funds'],
    ] as const) {
      const { subscriptionId, paymentId } = await incomplete()
      const reported = await reportLiveCharge(env.t.db, {
        paymentId,
        payload: { subscriptionId, period: 0, mandate: mandate(subscriptionId) },
        outcome: { status },
        at: new Date(),
      })
      expect(reported).toBeUndefined()
      expect(await payment(paymentId)).toEqual({ status: 'failed', failure_code: failureCode })
      expect((await subscription(subscriptionId)).status).toBe('incomplete')
    }
  })
})
