import { Transaction } from '@solana/web3.js'
import type { Hex } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Fetch } from '../../src/client/http.js'
import { createMerchantClient } from '../../src/client/merchant.js'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { WebhookSubscriptionEvent } from '../../src/contract/webhooks.js'
import { testServiceKeys } from '../../src/server/chains/simulated.js'
import { expireDuePayments } from '../../src/server/payments/lifecycle.js'
import { cancelUnactivated, chargeDueSubscriptions } from '../../src/server/subscriptions/lifecycle.js'
import { addIntervals } from '../../src/server/subscriptions/periods.js'
import { renderPaymentEvent } from '../../src/server/webhooks/payload.js'
import { type Buyer, createBuyer, createGatewayEnv, type GatewayEnv, usdc } from '../gateway/support.js'
import { headers } from './helpers.js'

let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv()
  buyer = createBuyer()
})
afterAll(() => env.t.close())

/** 2027-01-31T00:00:00Z: a month-end anchor, so the months that clamp are covered. */
const clockStart = Date.UTC(2027, 0, 31) / 1000
const monthly = { interval: 'month', periods: 12 } as const
let reference = 0

const api = (method: 'GET' | 'POST', url: string, payload?: Record<string, unknown>, key = env.apiKey) =>
  env.t.request({
    method,
    url,
    headers: headers(key, env.merchantId),
    ...(payload ? { payload } : {}),
  })

async function newClock(frozenTime = clockStart): Promise<string> {
  const res = await api('POST', '/v1/test/clocks', { frozenTime })
  expect(res.statusCode, res.body).toBe(201)
  return res.json.id
}

async function advance(clockId: string, frozenTime: number) {
  const res = await api('POST', `/v1/test/clocks/${clockId}/advance`, { frozenTime })
  expect(res.statusCode, res.body).toBe(200)
  return res.json
}

async function subscribe(extra: Record<string, unknown> = monthly, value = '999') {
  reference += 1
  const res = await api('POST', '/v1/subscriptions', {
    referenceId: `plan-${reference}`,
    amount: { unit: 'iso4217/USD', value },
    ...extra,
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json
}

/** The merchant client over the in-process server (no socket). */
const injectFetch: Fetch = async (url, init) => {
  const res = await env.t.app.inject({
    method: init.method as 'GET',
    url: new URL(url).pathname + new URL(url).search,
    headers: init.headers as Record<string, string>,
    ...(init.body ? { payload: String(init.body) } : {}),
  })
  return new Response(res.body, { status: res.statusCode, headers: { 'content-type': 'application/json' } })
}

const getSubscription = async (id: string) => (await api('GET', `/v1/subscriptions/${id}`)).json

/** The buyer opens the subscription's link on Base and signs its mandate (Permit2 PermitSingle). */
async function signOnBase(subscription: { firstPaymentId: string }) {
  const paymentId = subscription.firstPaymentId
  const res = await env.gw('POST', paymentId, '/options', { accounts: Object.values(buyer.accounts) })
  expect(res.statusCode, res.body).toBe(200)
  const options = res.json.options as PaymentOption[]
  const option = options.find(
    (o) => o.account === buyer.accounts.base && o.amount.unit === `caip19/${usdc.base}`,
  )!
  expect(option).toBeDefined()
  const action = option.actions[0]!
  if (action.type !== 'walletRpc') throw new Error('expected a signature')
  const typed = JSON.parse(JSON.parse(action.walletRpc.params)[1])
  const { EIP712Domain: _, ...types } = typed.types
  const signature: Hex = await buyer.evm.signTypedData({
    domain: typed.domain,
    types,
    primaryType: typed.primaryType,
    message: typed.message,
  })
  const confirmed = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [signature] })
  expect(confirmed.statusCode, confirmed.body).toBe(200)
  return { option, options, typed, confirmed: confirmed.json }
}

async function periodPayments(subscriptionId: string) {
  return env.t.db
    .selectFrom('subscription_periods')
    .innerJoin('payments', 'payments.id', 'subscription_periods.payment_id')
    .select([
      'subscription_periods.period',
      'subscription_periods.due_at',
      'payments.id',
      'payments.status',
      'payments.source',
      'payments.failure_code',
      'payments.tx_id',
      'payments.option_amount',
      'payments.buyer',
    ])
    .where('subscription_periods.subscription_id', '=', subscriptionId)
    .orderBy('subscription_periods.period')
    .execute()
}

async function subscriptionEvents(subscriptionId: string): Promise<string[]> {
  const rows = await env.t.db
    .selectFrom('payment_events')
    .select(['type', 'snapshot'])
    .where('type', 'like', 'subscription.%')
    .orderBy('created_at')
    .orderBy('payment_state_version')
    .execute()
  return rows.filter((r) => r.snapshot.id === subscriptionId).map((r) => r.type)
}

describe('POST /v1/subscriptions', () => {
  it('201: incomplete, with the first period as its payment link; read and listed', async () => {
    const sub = await subscribe({ interval: 'week', intervalCount: 2, periods: 3 })
    expect(sub).toMatchObject({
      subscriptionId: expect.stringMatching(/^sub_/),
      merchantId: env.merchantId,
      status: 'incomplete',
      amount: { unit: 'iso4217/USD', value: '999' },
      interval: 'week',
      intervalCount: 2,
      periods: 3,
      periodsCharged: 0,
      nextChargeAt: null,
      mandate: null,
      cancelReason: null,
      testClock: null,
    })
    expect(sub.endAt - sub.startAt).toBe(3 * 14 * 24 * 3600)
    expect(sub.gatewayUrl).toMatch(new RegExp(`/pay/${sub.firstPaymentId}$`))
    const payment = await env.t.db
      .selectFrom('payments')
      .select(['status', 'source', 'amount_value'])
      .where('id', '=', sub.firstPaymentId)
      .executeTakeFirstOrThrow()
    expect(payment).toEqual({ status: 'requires_action', source: 'mandate', amount_value: '999' })
    expect(await getSubscription(sub.subscriptionId)).toEqual(sub)
    const list = await api('GET', '/v1/subscriptions?status=incomplete&limit=100')
    expect(list.json.data.map((s: { subscriptionId: string }) => s.subscriptionId)).toContain(
      sub.subscriptionId,
    )
    expect(await subscriptionEvents(sub.subscriptionId)).toEqual(['subscription.created'])
  })

  it('400 unless exactly one of periods or endAt bounds it; 400 for an unsupported unit; 404 unknown', async () => {
    const base = { referenceId: 'plan-x', amount: { unit: 'iso4217/USD', value: '100' }, interval: 'month' }
    for (const body of [base, { ...base, periods: 2, endAt: clockStart + 86_400 }]) {
      const res = await api('POST', '/v1/subscriptions', body)
      expect([res.statusCode, res.json.code], res.body).toEqual([400, 'params_validation'])
    }
    const unit = await api('POST', '/v1/subscriptions', {
      ...base,
      periods: 2,
      amount: { unit: 'caip19/eip155:1/erc20:0x0000000000000000000000000000000000000001', value: '1' },
    })
    expect([unit.statusCode, unit.json.code]).toEqual([400, 'params_validation'])
    const late = await api('POST', '/v1/subscriptions', {
      ...base,
      interval: 'year',
      intervalCount: 365,
      periods: 1200,
    })
    expect([late.statusCode, late.json.code]).toEqual([400, 'params_validation'])
    const missing = await api('GET', '/v1/subscriptions/sub_missing')
    expect([missing.statusCode, missing.json.code]).toEqual([404, 'subscription_not_found'])
    const clock = await api('POST', '/v1/subscriptions', { ...base, periods: 2, testClock: 'clock_missing' })
    expect([clock.statusCode, clock.json.code]).toEqual([404, 'test_clock_not_found'])
  })

  it('test clocks: test mode only, forward only', async () => {
    const { apiKey: liveKey } = await env.t.createKey('live')
    const live = await env.t.request({
      method: 'POST',
      url: '/v1/test/clocks',
      headers: headers(liveKey),
      payload: {},
    })
    expect([live.statusCode, live.json.code]).toEqual([403, 'not_sandbox_api_key'])
    const clockId = await newClock()
    const back = await api('POST', `/v1/test/clocks/${clockId}/advance`, { frozenTime: clockStart - 1 })
    expect([back.statusCode, back.json.code]).toEqual([400, 'params_validation'])
    expect((await api('GET', `/v1/test/clocks/${clockId}`)).json.frozenTime).toBe(clockStart)
  })
})

describe('the merchant client', () => {
  it('createSubscription, getSubscription, listSubscriptions, cancelSubscription', async () => {
    const client = createMerchantClient({
      baseUrl: 'http://caipay.test',
      apiKey: env.apiKey,
      merchantId: env.merchantId,
      fetch: injectFetch,
    })
    const created = await client.createSubscription({
      body: {
        referenceId: 'client-plan',
        amount: { unit: 'iso4217/USD', value: '500' },
        interval: 'year',
        periods: 2,
      },
    })
    expect(created.status).toBe('incomplete')
    expect(await client.getSubscription({ params: { id: created.subscriptionId } })).toEqual(created)
    const list = await client.listSubscriptions({ query: { limit: 100 } })
    expect(list.data.map((s) => s.subscriptionId)).toContain(created.subscriptionId)
    const cancelled = await client.cancelSubscription({ params: { id: created.subscriptionId } })
    expect(cancelled).toMatchObject({ status: 'cancelled', cancelReason: 'cancelled_by_merchant' })
  })
})

describe('a year of monthly charges on a test clock', () => {
  it('the mandate matches the terms; every period is charged once, on its day, then the subscription ends', async () => {
    const clockId = await newClock()
    const sub = await subscribe({ ...monthly, testClock: clockId })
    expect(sub.startAt).toBe(clockStart)
    const { option, options, typed, confirmed } = await signOnBase(sub)
    // Only mandate options: every one carries the terms the wallet checks.
    for (const o of options) expect(o.subscription?.subscriptionId).toBe(sub.subscriptionId)
    const perPeriod = BigInt(option.amount.value)
    expect(option.subscription).toEqual({
      subscriptionId: sub.subscriptionId,
      asset: usdc.base,
      amountPerPeriod: perPeriod.toString(),
      interval: 'month',
      intervalCount: 1,
      periods: 12,
      endAt: sub.endAt,
      spender: `eip155:8453:${testServiceKeys.evmCollection}`,
    })
    expect(typed.primaryType).toBe('PermitSingle')
    expect(typed.message).toEqual({
      details: {
        token: usdc.base.split(':').at(-1),
        amount: (perPeriod * 12n).toString(),
        expiration: String(sub.endAt),
        nonce: '0',
      },
      spender: testServiceKeys.evmCollection,
      sigDeadline: String(option.expiresAt),
    })
    expect(confirmed.status).toBe('succeeded')

    const active = await getSubscription(sub.subscriptionId)
    expect(active).toMatchObject({
      status: 'active',
      periodsCharged: 1,
      nextChargeAt: Date.UTC(2027, 1, 28) / 1000,
      mandate: {
        buyer: buyer.accounts.base,
        asset: usdc.base,
        amountPerPeriod: perPeriod.toString(),
        spender: `eip155:8453:${testServiceKeys.evmCollection}`,
      },
    })

    // A day before the second period nothing happens; then the whole year at once.
    await advance(clockId, Date.UTC(2027, 1, 27) / 1000)
    expect((await periodPayments(sub.subscriptionId)).length).toBe(1)
    await advance(clockId, Date.UTC(2028, 1, 1) / 1000)

    const periods = await periodPayments(sub.subscriptionId)
    expect(periods.map((p) => p.period)).toEqual([...Array(12).keys()])
    const anchor = new Date(clockStart * 1000)
    for (const p of periods) {
      expect(p.due_at.getTime()).toBe(addIntervals(anchor, 'month', p.period).getTime())
      expect(p).toMatchObject({ status: 'succeeded', source: 'mandate', buyer: buyer.accounts.base })
      expect(p.option_amount).toMatchObject({ unit: `caip19/${usdc.base}`, value: perPeriod.toString() })
    }
    // Month ends clamp from the anchor: Feb 28, Mar 31, Apr 30.
    expect(periods.slice(1, 4).map((p) => p.due_at.toISOString().slice(0, 10))).toEqual([
      '2027-02-28',
      '2027-03-31',
      '2027-04-30',
    ])
    const ended = await getSubscription(sub.subscriptionId)
    expect(ended).toMatchObject({ status: 'ended', periodsCharged: 12, nextChargeAt: null })
    expect(await subscriptionEvents(sub.subscriptionId)).toEqual([
      'subscription.created',
      'subscription.activated',
      ...Array(11).fill('subscription.renewed'),
      'subscription.ended',
    ])
    // Every subscription event renders as the webhook contract's subscription event.
    const event = await env.t.db
      .selectFrom('payment_events')
      .select(['id', 'type', 'created_at', 'snapshot'])
      .where('type', '=', 'subscription.renewed')
      .where('payment_id', '=', periods[5]!.id)
      .executeTakeFirstOrThrow()
    const payload = WebhookSubscriptionEvent.parse(JSON.parse(renderPaymentEvent(event)))
    expect(payload.data).toMatchObject({
      subscription_id: sub.subscriptionId,
      payment_id: periods[5]!.id,
      periods_charged: 6,
      amount_per_period: { unit: `caip19/${usdc.base}`, value: perPeriod.toString() },
      buyer_caip10: buyer.accounts.base,
    })
    // A later advance charges nothing more.
    await advance(clockId, Date.UTC(2029, 0, 1) / 1000)
    expect((await periodPayments(sub.subscriptionId)).length).toBe(12)
  })

  it('each period is a payment like any other: read, listed and refundable', async () => {
    const clockId = await newClock()
    const sub = await subscribe({ interval: 'day', periods: 2, testClock: clockId })
    await signOnBase(sub)
    await advance(clockId, clockStart + 86_400)
    const [, second] = await periodPayments(sub.subscriptionId)
    const read = await api('GET', `/v1/payments/${second!.id}`)
    expect(read.json).toMatchObject({ status: 'succeeded', referenceId: sub.referenceId })
    const refund = await api('POST', '/v1/refunds', { paymentId: second!.id })
    expect(refund.statusCode, refund.body).toBe(201)
  })

  it('the Solana mandate is an ApproveChecked to the service key of at most price x periods', async () => {
    const clockId = await newClock()
    const sub = await subscribe({ interval: 'week', periods: 4, testClock: clockId })
    const res = await env.gw('POST', sub.firstPaymentId, '/options', { accounts: [buyer.accounts.solana] })
    const option = (res.json.options as PaymentOption[])[0]!
    expect(option.subscription?.spender).toBe(
      `${usdc.solana.split('/')[0]}:${testServiceKeys.solana.publicKey.toBase58()}`,
    )
    const build = option.actions[0]!
    if (build.type !== 'build') throw new Error('expected a build action')
    const fetched = await env.gw('POST', sub.firstPaymentId, '/fetch', {
      optionId: option.id,
      data: build.build.data,
    })
    const { transaction } = JSON.parse(fetched.json.actions[0].walletRpc.params)[0]
    const tx = Transaction.from(Buffer.from(transaction, 'base64'))
    expect(tx.instructions).toHaveLength(1)
    const data = tx.instructions[0]!.data
    // SPL Token instruction 13 = ApproveChecked: amount (u64 LE), decimals.
    expect(data[0]).toBe(13)
    expect(data.readBigUInt64LE(1)).toBe(BigInt(option.amount.value) * 4n)
    expect(tx.instructions[0]!.keys[2]!.pubkey.toBase58()).toBe(testServiceKeys.solana.publicKey.toBase58())
    tx.partialSign(buyer.solana)
    const confirmed = await env.gw('POST', sub.firstPaymentId, '/confirm', {
      optionId: option.id,
      results: [tx.serialize().toString('base64')],
    })
    expect(confirmed.json.status).toBe('succeeded')
    expect((await getSubscription(sub.subscriptionId)).status).toBe('active')
  })

  it('a one-time payment carries no subscription terms', async () => {
    const paymentId = await env.pay()
    const res = await env.gw('POST', paymentId, '/options', { accounts: Object.values(buyer.accounts) })
    for (const o of res.json.options as PaymentOption[]) expect(o.subscription).toBeUndefined()
  })
})

describe('dunning, revocation, cancel', () => {
  const day = 86_400

  it('an empty balance: past_due, retried on schedule, recovers when funded', async () => {
    const clockId = await newClock()
    const sub = await subscribe({ ...monthly, testClock: clockId })
    await signOnBase(sub)
    await api('POST', `/v1/test/subscriptions/${sub.subscriptionId}/simulate`, { buyer: 'empty' })
    const due = Date.UTC(2027, 1, 28) / 1000
    await advance(clockId, due)
    expect(await getSubscription(sub.subscriptionId)).toMatchObject({ status: 'past_due', periodsCharged: 1 })
    await advance(clockId, due + day) // first retry fails too
    const [, second] = await periodPayments(sub.subscriptionId)
    expect(second!.status).toBe('processing')
    await api('POST', `/v1/test/subscriptions/${sub.subscriptionId}/simulate`, { buyer: 'funded' })
    await advance(clockId, due + 4 * day) // second retry (3 days later) succeeds
    const recovered = await getSubscription(sub.subscriptionId)
    expect(recovered).toMatchObject({
      status: 'active',
      periodsCharged: 2,
      nextChargeAt: Date.UTC(2027, 2, 31) / 1000,
    })
    const periods = await periodPayments(sub.subscriptionId)
    expect(periods.map((p) => p.status)).toEqual(['succeeded', 'succeeded'])
    expect(await subscriptionEvents(sub.subscriptionId)).toEqual([
      'subscription.created',
      'subscription.activated',
      'subscription.past_due',
      'subscription.renewed',
    ])
  })

  it('cancelled after the last retry fails: the period fails with insufficient_funds', async () => {
    const clockId = await newClock()
    const sub = await subscribe({ ...monthly, testClock: clockId })
    await signOnBase(sub)
    await api('POST', `/v1/test/subscriptions/${sub.subscriptionId}/simulate`, { buyer: 'empty' })
    await advance(clockId, Date.UTC(2027, 3, 1) / 1000)
    expect(await getSubscription(sub.subscriptionId)).toMatchObject({
      status: 'cancelled',
      cancelReason: 'payment_failed',
      nextChargeAt: null,
    })
    const periods = await periodPayments(sub.subscriptionId)
    expect(periods.map((p) => [p.status, p.failure_code])).toEqual([
      ['succeeded', null],
      ['failed', 'insufficient_funds'],
    ])
    const read = await api('GET', `/v1/payments/${periods[1]!.id}`)
    expect(read.json).toMatchObject({ status: 'failed', failureCode: 'insufficient_funds' })
  })

  it("the buyer's revoke cancels it with a reason, and nothing more is charged", async () => {
    const clockId = await newClock()
    const sub = await subscribe({ ...monthly, testClock: clockId })
    await signOnBase(sub)
    await advance(clockId, Date.UTC(2027, 1, 28) / 1000)
    await api('POST', `/v1/test/subscriptions/${sub.subscriptionId}/simulate`, { buyer: 'revoked' })
    await advance(clockId, Date.UTC(2028, 1, 1) / 1000)
    expect(await getSubscription(sub.subscriptionId)).toMatchObject({
      status: 'cancelled',
      cancelReason: 'mandate_revoked',
      periodsCharged: 2,
    })
    const periods = await periodPayments(sub.subscriptionId)
    expect(periods.map((p) => [p.status, p.failure_code])).toEqual([
      ['succeeded', null],
      ['succeeded', null],
      ['failed', 'mandate_revoked'],
    ])
    const again = await api('POST', `/v1/test/subscriptions/${sub.subscriptionId}/simulate`, {
      buyer: 'funded',
    })
    expect([again.statusCode, again.json.code]).toEqual([409, 'invalid_state'])
  })

  it("the merchant's cancel stops it: nothing more is charged; a second cancel is 409", async () => {
    const clockId = await newClock()
    const sub = await subscribe({ ...monthly, testClock: clockId })
    await signOnBase(sub)
    await advance(clockId, Date.UTC(2027, 1, 28) / 1000)
    const cancelled = await api('POST', `/v1/subscriptions/${sub.subscriptionId}/cancel`)
    expect(cancelled.statusCode, cancelled.body).toBe(200)
    expect(cancelled.json).toMatchObject({
      status: 'cancelled',
      cancelReason: 'cancelled_by_merchant',
      nextChargeAt: null,
    })
    await advance(clockId, Date.UTC(2028, 1, 1) / 1000)
    expect((await periodPayments(sub.subscriptionId)).length).toBe(2)
    const again = await api('POST', `/v1/subscriptions/${sub.subscriptionId}/cancel`)
    expect([again.statusCode, again.json.code]).toEqual([409, 'invalid_state'])
    expect((await subscriptionEvents(sub.subscriptionId)).at(-1)).toBe('subscription.cancelled')
  })

  it('cancelling an incomplete subscription cancels its payment link', async () => {
    const sub = await subscribe()
    await api('POST', `/v1/subscriptions/${sub.subscriptionId}/cancel`)
    const payment = await api('GET', `/v1/payments/${sub.firstPaymentId}`)
    expect(payment.json.status).toBe('cancelled')
  })

  it('a subscription whose link expired unpaid is cancelled (not_activated) by the sweep', async () => {
    const sub = await subscribe()
    const later = new Date(Date.now() + 2 * 86_400_000)
    await expireDuePayments(env.t.db, { now: later, paymentId: sub.firstPaymentId })
    expect(await cancelUnactivated(env.t.db, later)).toBeGreaterThanOrEqual(1)
    expect(await getSubscription(sub.subscriptionId)).toMatchObject({
      status: 'cancelled',
      cancelReason: 'not_activated',
    })
  })

  it('charging workers racing over the same due periods move each period once', async () => {
    const clockId = await newClock()
    const sub = await subscribe({ ...monthly, testClock: clockId })
    await signOnBase(sub)
    const until = new Date(Date.UTC(2028, 1, 1))
    const config = env.t.app.config
    await Promise.all([1, 2, 3, 4].map(() => chargeDueSubscriptions(env.t.db, config, { clockId, until })))
    const periods = await periodPayments(sub.subscriptionId)
    expect(periods.map((p) => p.period)).toEqual([...Array(12).keys()])
    expect(periods.every((p) => p.status === 'succeeded')).toBe(true)
    expect(new Set(periods.map((p) => p.tx_id)).size).toBe(12)
  })
})
