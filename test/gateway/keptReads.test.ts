import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { createMerchant, createPayment, headers, idem } from '../server/helpers.js'
import {
  type Buyer,
  createBuyer,
  createGatewayEnv,
  type GatewayEnv,
  isBaseOption,
  pick,
  statementsOf,
  usdc,
} from './support.js'

/**
 * What the process keeps from earlier requests to spare a read: a payment's facts for its options call
 * (payments/paymentFacts.ts), and a fetch's read for the confirm that follows (gateway/fetchedReads.ts).
 * Whatever changed in between, the answer is the one a fresh read gives: the write holds only while what
 * it was planned on is still so, and every refusal is decided on a fresh read.
 */
let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv()
  buyer = createBuyer()
})
afterAll(() => env.t.close())

/** options -> fetch of the Base option, and its signed results: what confirm is sent. */
async function fetched(paymentId: string): Promise<{ option: PaymentOption; results: string[] }> {
  const options = await env.gw('POST', paymentId, '/options', { accounts: [buyer.accounts.base] })
  expect(options.statusCode, options.body).toBe(200)
  const option = pick(options.json.options, isBaseOption)
  const fetch = await env.gw('POST', paymentId, '/fetch', { optionId: option.id, data: '' })
  expect(fetch.statusCode, fetch.body).toBe(200)
  const results: string[] = []
  for (const action of fetch.json.actions) results.push(await buyer.sign(action))
  return { option, results }
}

async function cancelByMerchant(paymentId: string): Promise<void> {
  const cancel = await env.t.request({
    method: 'POST',
    url: `/v1/payments/${paymentId}/cancel`,
    headers: headers(env.apiKey, env.merchantId),
  })
  expect(cancel.statusCode, cancel.body).toBe(200)
}

const confirm = (paymentId: string, body: unknown, extra: Record<string, string> = {}) =>
  env.gw('POST', paymentId, '/confirm', body, extra)

const eventTypes = async (paymentId: string) =>
  (
    await env.t.db
      .selectFrom('payment_events')
      .select('type')
      .where('payment_id', '=', paymentId)
      .orderBy('payment_state_version')
      .execute()
  ).map((e) => e.type)

describe('a confirm planned on what its fetch read', () => {
  it('refuses by the option as it is now: a row changed after the fetch is not confirmed as read', async () => {
    const paymentId = await env.pay()
    const { option, results } = await fetched(paymentId)
    // Another process changed the option (here: a second action to sign), so the read is stale.
    await sql`UPDATE payment_options SET actions = actions || actions WHERE id = ${option.id}`.execute(
      env.t.db,
    )
    const res = await confirm(paymentId, { optionId: option.id, results })
    expect(res.statusCode, res.body).toBe(400)
    expect(res.json.code).toBe('params_validation')
    expect(res.json.message).toContain('the option has 2 actions')
    expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('requires_action')
  })

  it('confirms a quote renewed elsewhere after the one it read expired', async () => {
    const paymentId = await env.pay()
    const { option, results } = await fetched(paymentId)
    env.t.advanceTime((option.expiresAt - env.nowS() + 1) * 1000)
    const renewed = new Date((env.nowS() + 60) * 1000)
    await sql`UPDATE payment_options SET expires_at = ${renewed} WHERE id = ${option.id}`.execute(env.t.db)
    const res = await confirm(paymentId, { optionId: option.id, results })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toMatchObject({ status: 'succeeded' })
  })

  it('answers 409 for a payment cancelled after the fetch, and stores that answer under the key', async () => {
    const paymentId = await env.pay()
    const { option, results } = await fetched(paymentId)
    await cancelByMerchant(paymentId)
    const key = idem()
    const first = await confirm(paymentId, { optionId: option.id, results }, { 'idempotency-key': key })
    expect(first.statusCode, first.body).toBe(409)
    expect(first.json).toMatchObject({ code: 'invalid_state' })
    const again = await confirm(paymentId, { optionId: option.id, results }, { 'idempotency-key': key })
    expect(again.statusCode).toBe(409)
    expect(again.headers['idempotent-replayed']).toBe('true')
    expect(again.json).toEqual(first.json)
    expect(await eventTypes(paymentId)).toEqual(['payment.created', 'payment.cancelled'])
  })

  it('answers 410 for a payment that expired after the fetch (its quote with it)', async () => {
    const paymentId = await env.pay('1250', 'iso4217/USD', { expiresAt: env.nowS() + 90 })
    const { option, results } = await fetched(paymentId)
    env.t.advanceTime(91_000)
    const res = await confirm(paymentId, { optionId: option.id, results })
    expect(res.statusCode, res.body).toBe(410)
    expect(res.json).toMatchObject({ code: 'payment_expired' })
  })

  it('lets one of two racing confirms pay, and answers the other 409', async () => {
    const paymentId = await env.pay()
    const { option, results } = await fetched(paymentId)
    const answers = await Promise.all([
      confirm(paymentId, { optionId: option.id, results }),
      confirm(paymentId, { optionId: option.id, results }),
    ])
    expect(answers.map((a) => a.statusCode).sort()).toEqual([200, 409])
    expect(await eventTypes(paymentId)).toEqual([
      'payment.created',
      'payment.processing',
      'payment.succeeded',
    ])
  })

  it('shows a live-mode wallet nothing of what a test-mode fetch read: 404', async () => {
    const paymentId = await env.pay()
    const { option, results } = await fetched(paymentId)
    const { apiKey: liveWallet } = await env.t.createKey('live', 'wallet', await env.t.createPartner())
    const res = await env.t.request({
      method: 'POST',
      url: `/v1/gateway/payment/${paymentId}/confirm`,
      headers: headers(liveWallet),
      payload: { optionId: option.id, results },
    })
    expect(res.statusCode, res.body).toBe(404)
    expect(res.json.code).toBe('payment_not_found')
    // The test-mode wallet's confirm still finds the kept read: one statement, no read.
    const paid = await statementsOf(() => confirm(paymentId, { optionId: option.id, results }))
    expect(paid.result.json.status).toBe('succeeded')
    expect(paid.statements).toHaveLength(1)
  })

  it('settles with a crypto settlement the merchant added after the fetch', async () => {
    const merchantId = await createMerchant(env.t, env.apiKey)
    const paymentId = await createPayment(env.t, env.apiKey, merchantId)
    const { option, results } = await fetched(paymentId)
    const added = await env.t.request({
      method: 'POST',
      url: `/v1/merchants/${merchantId}/settlements/crypto`,
      headers: headers(env.apiKey, undefined, { 'idempotency-key': idem() }),
      payload: { settlements: [{ asset: usdc.base, destination: `eip155:8453:0x${'5'.repeat(40)}` }] },
    })
    expect(added.statusCode, added.body).toBe(201)
    const res = await confirm(paymentId, { optionId: option.id, results })
    expect(res.json).toMatchObject({ status: 'succeeded' })
    expect(await eventTypes(paymentId)).toEqual([
      'payment.created',
      'payment.processing',
      'payment.succeeded',
      'payment.settled',
    ])
  })
})

describe('options quoted on the payment facts the process kept', () => {
  const options = (paymentId: string, headersOf = headers(env.walletKey)) =>
    env.t.request({
      method: 'POST',
      url: `/v1/gateway/payment/${paymentId}/options`,
      headers: headersOf,
      payload: { accounts: [buyer.accounts.base] },
    })
  const storedOptions = async (paymentId: string) =>
    (await env.t.db.selectFrom('payment_options').select('id').where('payment_id', '=', paymentId).execute())
      .length

  it('quotes a payment this process created in one statement, and one on no served chain too', async () => {
    const paymentId = await env.pay()
    const quoted = await statementsOf(() => options(paymentId))
    expect(quoted.result.statusCode, quoted.result.body).toBe(200)
    expect(quoted.statements).toHaveLength(1)
    expect(await storedOptions(paymentId)).toBe(quoted.result.json.options.length)
    const unserved = await statementsOf(() =>
      env.gw('POST', paymentId, '/options', { accounts: [`eip155:424242:0x${'7'.repeat(40)}`] }),
    )
    expect(unserved.result.json).toMatchObject({ options: [], info: { status: 'requires_action' } })
    expect(unserved.statements).toHaveLength(1)
  })

  it('answers a payment it paid as a fresh read does: no options, and what was paid', async () => {
    const paymentId = await env.pay()
    const { option, results } = await fetched(paymentId)
    expect((await confirm(paymentId, { optionId: option.id, results })).json.status).toBe('succeeded')
    const res = await options(paymentId)
    expect(res.json).toMatchObject({
      options: [],
      info: { status: 'succeeded' },
      resultInfo: { txId: `test:${paymentId}` },
    })
  })

  it('quotes the amount the payment has now, not the one kept', async () => {
    const paymentId = await env.pay('1250')
    // Changed by hand (nothing in caipay changes an amount): the kept facts no longer hold.
    await sql`UPDATE payments SET amount_value = 2000 WHERE id = ${paymentId}`.execute(env.t.db)
    const res = await options(paymentId)
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json.info.amount.value).toBe('2000')
    expect(pick(res.json.options, isBaseOption).amount.value).toBe('20000000')
    expect(await storedOptions(paymentId)).toBe(res.json.options.length)
  })

  it('answers a payment cancelled since its creation as a fresh read does, and stores no quote', async () => {
    const paymentId = await env.pay()
    await cancelByMerchant(paymentId)
    const res = await options(paymentId)
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toMatchObject({ options: [], info: { status: 'cancelled' } })
    expect(await storedOptions(paymentId)).toBe(0)
  })

  it('answers 410 for a payment that expired since, and stores no quote', async () => {
    const paymentId = await env.pay('1250', 'iso4217/USD', { expiresAt: env.nowS() + 60 })
    env.t.advanceTime(61_000)
    const res = await options(paymentId)
    expect(res.statusCode, res.body).toBe(410)
    expect(res.json.code).toBe('payment_expired')
    expect(await storedOptions(paymentId)).toBe(0)
  })

  it('shows a live-mode wallet nothing: 404, and stores no quote', async () => {
    const paymentId = await env.pay()
    const { apiKey: liveWallet } = await env.t.createKey('live', 'wallet', await env.t.createPartner())
    const res = await options(paymentId, headers(liveWallet))
    expect(res.statusCode, res.body).toBe(404)
    expect(res.json.code).toBe('payment_not_found')
    expect(await storedOptions(paymentId)).toBe(0)
  })

  it("shows the merchant's name as it is now", async () => {
    const merchantId = await createMerchant(env.t, env.apiKey)
    const paymentId = await createPayment(env.t, env.apiKey, merchantId)
    const renamed = await env.t.request({
      method: 'PATCH',
      url: `/v1/merchants/${merchantId}`,
      headers: headers(env.apiKey, undefined, { 'idempotency-key': idem() }),
      payload: { merchantName: 'Tea House' },
    })
    expect(renamed.statusCode, renamed.body).toBe(200)
    const res = await options(paymentId)
    expect(res.json.info.merchant.name).toBe('Tea House')
  })
})
