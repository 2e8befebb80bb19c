import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createMerchant, createPayment } from '../server/helpers.js'
import { createGatewayEnv, type GatewayEnv } from './support.js'

let env: GatewayEnv
beforeAll(async () => {
  env = await createGatewayEnv()
})
afterAll(() => env.t.close())

function simulate(paymentId: string, outcome: string, apiKey = env.apiKey, merchantId = env.merchantId) {
  return env.t.request({
    method: 'POST',
    url: `/v1/test/payments/${paymentId}/simulate`,
    headers: { 'api-key': apiKey, 'merchant-id': merchantId },
    payload: { outcome },
  })
}

async function payment(paymentId: string) {
  const res = await env.t.request({
    method: 'GET',
    url: `/v1/payments/${paymentId}`,
    headers: { 'api-key': env.apiKey, 'merchant-id': env.merchantId },
  })
  return res.json
}

describe('POST /v1/test/payments/:id/simulate', () => {
  it('succeeded: final, with txId test:<id>', async () => {
    const paymentId = await env.pay()
    const res = await simulate(paymentId, 'succeeded')
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toEqual({
      status: 'succeeded',
      isFinal: true,
      pollInMs: null,
      txId: `test:${paymentId}`,
    })
    expect((await payment(paymentId)).info.txId).toBe(`test:${paymentId}`)
  })

  it('failed sets failureCode declined_user', async () => {
    const paymentId = await env.pay()
    expect((await simulate(paymentId, 'failed')).json).toEqual({
      status: 'failed',
      isFinal: true,
      pollInMs: null,
    })
    expect(await payment(paymentId)).toMatchObject({
      status: 'failed',
      failureCode: 'declined_user',
      info: null,
    })
  })

  it('expired and cancelled', async () => {
    const a = await env.pay()
    expect((await simulate(a, 'expired')).json.status).toBe('expired')
    const b = await env.pay()
    expect((await simulate(b, 'cancelled')).json.status).toBe('cancelled')
    // The sandbox cancels the way the merchant endpoint does: same transition, same recorded reason.
    const row = await env.t.db
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', b)
      .executeTakeFirstOrThrow()
    expect([row.cancelled_reason, row.cancelled_at]).toEqual(['cancelled_by_merchant', expect.any(Date)])
  })

  it('409 invalid_state from a final payment', async () => {
    const paymentId = await env.pay()
    await simulate(paymentId, 'cancelled')
    for (const outcome of ['succeeded', 'failed', 'expired', 'cancelled']) {
      const res = await simulate(paymentId, outcome)
      expect([res.statusCode, res.json.code]).toEqual([409, 'invalid_state'])
    }
  })

  it('400 for an unknown outcome', async () => {
    const paymentId = await env.pay()
    const res = await simulate(paymentId, 'exploded')
    expect([res.statusCode, res.json.code]).toEqual([400, 'params_validation'])
  })

  it('403 not_sandbox_api_key with a live key', async () => {
    const { apiKey: liveKey } = await env.t.createKey('live')
    const liveMerchant = await createMerchant(env.t, liveKey)
    const livePayment = await createPayment(env.t, liveKey, liveMerchant)
    const res = await simulate(livePayment, 'succeeded', liveKey, liveMerchant)
    expect([res.statusCode, res.json.code]).toEqual([403, 'not_sandbox_api_key'])
  })

  it('a wallet-role key cannot simulate (403 forbidden)', async () => {
    const paymentId = await env.pay()
    const res = await simulate(paymentId, 'succeeded', env.walletKey)
    expect([res.statusCode, res.json.code]).toEqual([403, 'forbidden'])
  })
})
