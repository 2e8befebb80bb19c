import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testAssetIds } from '../../src/contract/payment.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers } from './helpers.js'

/**
 * Test mode's pushed transfers (docs/push-payments.md): no chain, the live path's own rules. A payment
 * of USD 12.50 costs 12,500,000 minor units of the test USDC.
 */
let t: TestServer
let key: string
let merchantId: string
beforeAll(async () => {
  t = await createTestServer()
  key = (await t.createKey('test')).apiKey
  merchantId = await createMerchant(t, key)
})
afterAll(() => t?.close())

const push = (paymentId: string, body: Record<string, unknown> = {}) =>
  t.request({
    method: 'POST',
    url: `/v1/test/payments/${paymentId}/push`,
    headers: headers(key, merchantId),
    payload: body,
  })

describe('POST /v1/test/payments/:id/push', () => {
  it('received in two parts: pending while underpaid (shown as received), then succeeded', async () => {
    const id = await createPayment(t, key, merchantId)
    const first = await push(id, { amount: '5000000' })
    expect(first.statusCode, first.body).toBe(200)
    expect(first.json).toEqual({
      outcome: 'pending',
      status: 'requires_action',
      received: '5000000',
      due: '12500000',
    })
    const shown = await t.request({
      method: 'GET',
      url: `/v1/payments/${id}`,
      headers: headers(key, merchantId),
    })
    expect(shown.json.received).toEqual([expect.objectContaining({ value: '5000000' })])
    const rest = await push(id, { amount: '7500000' })
    expect(rest.json).toMatchObject({ outcome: 'succeeded', status: 'succeeded', received: '12500000' })
    const done = await t.request({
      method: 'GET',
      url: `/v1/payments/${id}`,
      headers: headers(key, merchantId),
    })
    expect(done.json).toMatchObject({ status: 'succeeded', source: 'push', info: { txId: `test:${id}` } })
    // Paid again: a deposit.
    const twice = await push(id)
    expect(twice.json).toMatchObject({
      outcome: 'deposit',
      reason: 'duplicate',
      depositId: expect.any(String),
    })
  })

  it('overpaid succeeds; late (after cancel) is a deposit the partner lists', async () => {
    const over = await createPayment(t, key, merchantId)
    expect((await push(over, { amount: '20000000' })).json).toMatchObject({
      outcome: 'succeeded',
      received: '20000000',
    })
    const late = await createPayment(t, key, merchantId)
    const cancel = await t.request({
      method: 'POST',
      url: `/v1/payments/${late}/cancel`,
      headers: headers(key, merchantId),
    })
    expect(cancel.statusCode, cancel.body).toBe(200)
    const pushed = await push(late)
    expect(pushed.json).toMatchObject({ outcome: 'deposit', reason: 'late', status: 'cancelled' })
    const listed = await t.request({ method: 'GET', url: '/v1/deposits', headers: headers(key) })
    expect(listed.statusCode, listed.body).toBe(200)
    expect(listed.json.deposits).toContainEqual(
      expect.objectContaining({
        depositId: pushed.json.depositId,
        paymentId: late,
        reason: 'late',
        status: 'held',
      }),
    )
  })

  it('underpaid at expiry (push.underpaid "hold", the default): what arrived is a held deposit', async () => {
    const id = await createPayment(t, key, merchantId)
    expect((await push(id, { amount: '5000000' })).json).toMatchObject({ outcome: 'pending' })
    const expired = await t.request({
      method: 'POST',
      url: `/v1/test/payments/${id}/simulate`,
      headers: headers(key, merchantId),
      payload: { outcome: 'expired' },
    })
    expect(expired.statusCode, expired.body).toBe(200)
    const listed = await t.request({ method: 'GET', url: '/v1/deposits', headers: headers(key) })
    expect(listed.json.deposits.filter((d: { paymentId: string }) => d.paymentId === id)).toEqual([
      expect.objectContaining({
        reason: 'underpaid',
        status: 'held',
        amount: expect.objectContaining({ value: '5000000' }),
        refundTxId: null,
      }),
    ])
  })

  it('pays in each listed test asset; an asset that cannot price the payment is 400 params_validation', async () => {
    for (const asset of testAssetIds) {
      const id = await createPayment(t, key, merchantId)
      const paid = await push(id, { asset })
      expect([asset, paid.statusCode, paid.json.outcome]).toEqual([asset, 200, 'succeeded'])
    }
    // A crypto amount is priced only by its own asset, another currency by none.
    const [evm, , solana] = testAssetIds
    const inSolana = await createPayment(t, key, merchantId, {
      referenceId: 'order-sol',
      amount: { unit: `caip19/${solana}`, value: '1000000' },
    })
    const euros = await createPayment(t, key, merchantId, {
      referenceId: 'order-eur',
      amount: { unit: 'iso4217/EUR', value: '1250' },
    })
    for (const [id, body] of [
      [inSolana, { asset: evm }],
      [euros, {}],
      [euros, { asset: solana }],
    ] as const) {
      const refused = await push(id, body)
      expect([refused.statusCode, refused.json.code]).toEqual([400, 'params_validation'])
    }
    expect((await push(inSolana, { asset: solana })).json).toMatchObject({ outcome: 'succeeded' })
  })

  it('is refused with a live key and for an unlisted asset', async () => {
    const id = await createPayment(t, key, merchantId)
    const unknown = await push(id, { asset: 'eip155:1/erc20:0x0000000000000000000000000000000000000001' })
    expect(unknown.statusCode).toBe(400)
    expect(unknown.json.code).toBe('params_validation')
    const liveKey = (await t.createKey('live')).apiKey
    const liveMerchant = await createMerchant(t, liveKey)
    const livePayment = await createPayment(t, liveKey, liveMerchant)
    const refused = await t.request({
      method: 'POST',
      url: `/v1/test/payments/${livePayment}/push`,
      headers: headers(liveKey, liveMerchant),
      payload: {},
    })
    expect(refused.statusCode).toBe(403)
    expect(refused.json.code).toBe('not_sandbox_api_key')
  })
})

describe('POST /v1/test/payments/:id/push with push.underpaid "refund"', () => {
  let r: TestServer
  let rKey: string
  let rMerchant: string
  beforeAll(async () => {
    r = await createTestServer({ config: { push: { underpaid: 'refund' } } })
    rKey = (await r.createKey('test')).apiKey
    rMerchant = await createMerchant(r, rKey)
  })
  afterAll(() => r?.close())

  it('on a payment that expired underpaid: what arrived is refunded at once (nothing moves in test mode), the new transfer is late', async () => {
    const id = await createPayment(r, rKey, rMerchant)
    const pushTo = (body: Record<string, unknown>) =>
      r.request({
        method: 'POST',
        url: `/v1/test/payments/${id}/push`,
        headers: headers(rKey, rMerchant),
        payload: body,
      })
    expect((await pushTo({ amount: '5000000' })).json).toMatchObject({ outcome: 'pending' })
    r.advanceTime(16 * 60 * 1000)
    const late = await pushTo({ amount: '1000000' })
    expect(late.statusCode, late.body).toBe(200)
    expect(late.json).toMatchObject({ outcome: 'deposit', reason: 'late', status: 'expired' })
    const listed = await r.request({ method: 'GET', url: '/v1/deposits', headers: headers(rKey) })
    const underpaid = listed.json.deposits.find((d: { reason: string }) => d.reason === 'underpaid')
    expect(underpaid).toMatchObject({
      paymentId: id,
      status: 'refunded',
      amount: expect.objectContaining({ value: '5000000' }),
    })
    expect(underpaid.refundTxId).toBe(`test:${underpaid.depositId}`)
    expect(listed.json.deposits).toContainEqual(
      expect.objectContaining({ depositId: late.json.depositId, reason: 'late', status: 'held' }),
    )
  })
})
