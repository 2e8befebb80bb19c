import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { onWake } from '../../src/server/jobs/wake.js'
import { createBuyer, createGatewayEnv, type GatewayEnv, isBaseOption, usdc } from '../gateway/support.js'
import { createMerchant, headers } from './helpers.js'

/** The payments domain layer's outbox: one event row per state change, written with the change. */

let env: GatewayEnv
beforeAll(async () => {
  env = await createGatewayEnv()
})
afterAll(() => env.t.close())

async function events(paymentId: string) {
  return env.t.db
    .selectFrom('payment_events')
    .select(['type', 'payment_state_version', 'snapshot', 'created_at', 'dispatched_at'])
    .where('payment_id', '=', paymentId)
    .orderBy('payment_state_version')
    .execute()
}

async function version(paymentId: string) {
  const row = await env.t.db
    .selectFrom('payments')
    .select('payment_state_version')
    .where('id', '=', paymentId)
    .executeTakeFirstOrThrow()
  return row.payment_state_version
}

const simulate = (paymentId: string, outcome: string) =>
  env.t.request({
    method: 'POST',
    url: `/v1/test/payments/${paymentId}/simulate`,
    headers: headers(env.apiKey, env.merchantId),
    payload: { outcome },
  })

describe('payment events (transactional outbox)', () => {
  it('creation writes payment.created at version 0 in the same statement, once per key', async () => {
    const body = { referenceId: 'evt-1', amount: { unit: 'iso4217/USD', value: '500' } }
    const create = () =>
      env.t.request({
        method: 'POST',
        url: '/v1/payments',
        headers: headers(env.apiKey, env.merchantId, { 'idempotency-key': 'evt-key-1' }),
        payload: body,
      })
    const first = await create()
    expect(first.statusCode, first.body).toBe(201)
    const replay = await create()
    expect(replay.headers['idempotent-replayed']).toBe('true')
    const paymentId = first.json.paymentId as string
    const rows = await events(paymentId)
    expect(rows.map((e) => [e.type, e.payment_state_version])).toEqual([['payment.created', 0]])
    expect(rows[0]!.snapshot).toMatchObject({ id: paymentId, amount_value: '500', status: 'requires_action' })
    expect(await version(paymentId)).toBe(0)
  })

  it('a refused creation (deleted merchant) writes no event', async () => {
    const before = await env.t.db
      .selectFrom('payment_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow()
    const merchantId = await createMerchant(env.t, env.apiKey, {
      merchantName: 'Gone',
      merchantEmail: 'gone@example.com',
    })
    await env.t.db
      .updateTable('merchants')
      .set({ deleted_at: new Date() })
      .where('id', '=', merchantId)
      .execute()
    const res = await env.t.request({
      method: 'POST',
      url: '/v1/payments',
      headers: headers(env.apiKey, merchantId),
      payload: { referenceId: 'evt-gone', amount: { unit: 'iso4217/USD', value: '500' } },
    })
    expect(res.statusCode).toBe(404)
    const after = await env.t.db
      .selectFrom('payment_events')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow()
    expect(after.n).toBe(before.n)
  })

  it('a confirmed test payment with a settlement: created, processing, succeeded, settled (0..3)', async () => {
    const buyer = createBuyer()
    const destination = `eip155:8453:${'0x000000000000000000000000000000000000bEEF'}`
    const settlement = await env.t.request({
      method: 'POST',
      url: `/v1/merchants/${env.merchantId}/settlements/crypto`,
      headers: headers(env.apiKey, undefined, { 'idempotency-key': 'evt-settle' }),
      payload: { settlements: [{ asset: usdc.base, destination }] },
    })
    expect(settlement.statusCode, settlement.body).toBe(201)
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect(confirm.json.status, confirm.body).toBe('succeeded')
    const rows = await events(paymentId)
    expect(rows.map((e) => [e.type, e.payment_state_version])).toEqual([
      ['payment.created', 0],
      ['payment.processing', 1],
      ['payment.succeeded', 2],
      ['payment.settled', 3],
    ])
    // One statement wrote all three; each snapshot shows the payment as its own step left it.
    expect(rows[1]!.snapshot).toMatchObject({
      status: 'processing',
      payment_state_version: 1,
      tx_id: null,
      settlement_status: null,
      settled_at: null,
      selected_option_id: option.id,
    })
    expect(rows[2]!.snapshot).toMatchObject({
      status: 'succeeded',
      payment_state_version: 2,
      tx_id: `test:${paymentId}`,
      settlement_status: 'pending',
      settled_at: null,
    })
    expect(rows[3]!.snapshot).toMatchObject({
      payment_state_version: 3,
      status: 'succeeded',
      tx_id: `test:${paymentId}`,
      settlement_status: 'succeeded',
      settlement_tx_id: `test:${paymentId}:settlement`,
      settlement_value: option.amount.value,
    })
    expect(await version(paymentId)).toBe(3)
  })

  it('simulated outcomes, a refund and a refused move: one event per change, none for a refusal', async () => {
    const failed = await env.pay()
    await simulate(failed, 'failed')
    const expired = await env.pay()
    await simulate(expired, 'expired')
    const cancelled = await env.pay()
    await simulate(cancelled, 'cancelled')
    expect((await simulate(cancelled, 'expired')).statusCode).toBe(409)
    const refunded = await env.pay()
    await simulate(refunded, 'succeeded')
    const refund = await env.t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(env.apiKey, env.merchantId),
      payload: { paymentId: refunded },
    })
    expect(refund.statusCode, refund.body).toBeLessThan(300)
    const types = async (id: string) => (await events(id)).map((e) => [e.type, e.payment_state_version])
    expect(await types(failed)).toEqual([
      ['payment.created', 0],
      ['payment.processing', 1],
      ['payment.failed', 2],
    ])
    expect(await types(expired)).toEqual([
      ['payment.created', 0],
      ['payment.expired', 1],
    ])
    expect(await types(cancelled)).toEqual([
      ['payment.created', 0],
      ['payment.cancelled', 1],
    ])
    expect(await types(refunded)).toEqual([
      ['payment.created', 0],
      ['payment.processing', 1],
      ['payment.succeeded', 2],
      ['refund.created', 3],
    ])
  })

  it('lazy expiry on a read and the sweep each write payment.expired once', async () => {
    const lazy = await env.pay()
    const swept = await env.pay()
    env.t.advanceTime(2 * 60 * 60 * 1000)
    const status = await env.t.request({
      method: 'GET',
      url: `/v1/payments/${lazy}/status`,
      headers: headers(env.apiKey, env.merchantId),
    })
    expect(status.json.status).toBe('expired')
    const list = await env.t.request({
      method: 'GET',
      url: '/v1/payments',
      headers: headers(env.apiKey),
    })
    expect(list.statusCode).toBe(200)
    for (const id of [lazy, swept]) {
      expect((await events(id)).map((e) => e.type)).toEqual(['payment.created', 'payment.expired'])
    }
  })

  it('an event no endpoint receives is written dispatched; one an endpoint receives waits for the dispatcher', async () => {
    const buyer = createBuyer()
    const pay = async () => {
      const paymentId = await env.pay()
      const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
      const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
      expect(confirm.json.status, confirm.body).toBe('succeeded')
      return paymentId
    }
    const dispatched = async (paymentId: string) =>
      (await events(paymentId)).map((e) => [
        e.type,
        e.dispatched_at?.getTime() === e.created_at.getTime() ? 'at once' : e.dispatched_at,
      ])

    const unheard = await pay()
    const endpoint = await env.t.request({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      headers: headers(env.apiKey),
      payload: { url: 'http://127.0.0.1:9/hooks', enabledEvents: ['payment.succeeded'] },
    })
    expect(endpoint.statusCode, endpoint.body).toBe(201)
    try {
      const heard = await pay()
      const unheardEvents = await dispatched(unheard)
      expect(unheardEvents.map(([type]) => type)).toContain('payment.succeeded')
      for (const [type, at] of unheardEvents) expect([type, at]).toEqual([type, 'at once'])
      // Only the type the endpoint enabled waits for the dispatcher; a settlement, if the merchant has
      // one, is written dispatched like the rest.
      const heardEvents = await dispatched(heard)
      expect(heardEvents.map(([type]) => type)).toContain('payment.succeeded')
      for (const [type, at] of heardEvents)
        expect([type, at]).toEqual([type, type === 'payment.succeeded' ? null : 'at once'])
    } finally {
      await env.t.request({
        method: 'DELETE',
        url: `/v1/webhook-endpoints/${endpoint.json.id}`,
        headers: headers(env.apiKey),
      })
    }
  })

  it("creation wakes this process's dispatcher only for an event somebody receives", async () => {
    let wakes = 0
    const stop = onWake(() => {
      wakes += 1
    })
    const create = async (key: string) => {
      const res = await env.t.request({
        method: 'POST',
        url: '/v1/payments',
        headers: headers(env.apiKey, env.merchantId, key ? { 'idempotency-key': key } : {}),
        payload: { referenceId: `wake-${key}`, amount: { unit: 'iso4217/USD', value: '500' } },
      })
      expect(res.statusCode, res.body).toBe(201)
    }
    await create('')
    await create('wake-unheard')
    expect(wakes).toBe(0)
    const endpoint = await env.t.request({
      method: 'POST',
      url: '/v1/webhook-endpoints',
      headers: headers(env.apiKey),
      payload: { url: 'http://127.0.0.1:9/hooks', enabledEvents: ['payment.created'] },
    })
    try {
      expect(endpoint.statusCode, endpoint.body).toBe(201)
      await create('')
      await create('wake-heard')
      expect(wakes).toBe(2)
    } finally {
      await env.t.request({
        method: 'DELETE',
        url: `/v1/webhook-endpoints/${endpoint.json.id}`,
        headers: headers(env.apiKey),
      })
      stop()
    }
  })
})
