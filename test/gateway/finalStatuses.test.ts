import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { finalStatusLimit } from '../../src/server/fastPath.js'
import { FinalStatuses } from '../../src/server/payments/finalStatuses.js'
import { createMerchant, headers } from '../server/helpers.js'
import { type Buyer, createBuyer, createGatewayEnv, type GatewayEnv, isBaseOption } from './support.js'

/**
 * A final payment's status answer is kept by the app's fast path (payments/finalStatuses.ts), unless
 * fast paths are off (CAIPAY_FAST_PATHS=0 runs this file that way too). What a status read checks still
 * holds for a kept answer: the merchant it belongs to, and the mode of the credential.
 */
let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv()
  buyer = createBuyer()
})
afterAll(() => env.t.close())

const fastPaths = () => env.t.app.fastPath.enabled
const kept = (paymentId: string) => env.t.app.fastPath.finalStatuses.get(paymentId)

async function paidPayment(): Promise<string> {
  const paymentId = await env.pay('1250')
  const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
  const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
  expect(confirm.json).toMatchObject({ status: 'succeeded', isFinal: true })
  expect(kept(paymentId)).toBeUndefined()
  const status = await env.gw('GET', paymentId, '/status')
  expect(status.json).toEqual({ ...confirm.json, txId: `test:${paymentId}` })
  expect(kept(paymentId)?.answer).toEqual(fastPaths() ? status.json : undefined)
  return paymentId
}

const merchantStatus = (paymentId: string, merchantId: string) =>
  env.t.request({
    method: 'GET',
    url: `/v1/payments/${paymentId}/status`,
    headers: headers(env.apiKey, merchantId),
  })

describe('final status answers kept by the process', () => {
  it('answers the merchant its own payment, and another merchant 404', async () => {
    const paymentId = await paidPayment()
    const own = await merchantStatus(paymentId, env.merchantId)
    expect(own.json).toEqual({
      status: 'succeeded',
      isFinal: true,
      pollInMs: null,
      txId: `test:${paymentId}`,
    })
    const otherMerchant = await createMerchant(env.t, env.apiKey)
    const other = await merchantStatus(paymentId, otherMerchant)
    expect(other.statusCode).toBe(404)
    expect(other.json.code).toBe('payment_not_found')
  })

  it('answers a test-mode wallet, and a live-mode one 404', async () => {
    const paymentId = await paidPayment()
    expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('succeeded')
    const { apiKey: liveWallet } = await env.t.createKey('live', 'wallet', await env.t.createPartner())
    const live = await env.t.request({
      method: 'GET',
      url: `/v1/gateway/payment/${paymentId}/status`,
      headers: headers(liveWallet),
    })
    expect(live.statusCode).toBe(404)
    expect(live.json.code).toBe('payment_not_found')
  })

  it('a status read of a final payment keeps its answer; an open one is not kept', async () => {
    const open = await env.pay()
    expect((await env.gw('GET', open, '/status')).json.status).toBe('requires_action')
    expect(kept(open)).toBeUndefined()
    const cancel = await env.gw('POST', open, '/cancel')
    expect(cancel.statusCode, cancel.body).toBe(200)
    expect((await env.gw('GET', open, '/status')).json.status).toBe('cancelled')
    const cancelled = { status: 'cancelled', isFinal: true, pollInMs: null }
    expect(kept(open)?.answer).toEqual(fastPaths() ? cancelled : undefined)
  })

  it('keeps a bounded number of final answers, dropping the oldest; a limit of 0 keeps none', () => {
    const finals = new FinalStatuses(finalStatusLimit)
    const answer = { status: 'succeeded', isFinal: true, pollInMs: null } as const
    for (let i = 0; i <= finalStatusLimit; i++)
      finals.remember(`pay_${i}`, { merchantId: 'mer', mode: 'test', answer })
    expect(finals.get('pay_0')).toBeUndefined()
    expect(finals.get('pay_1')).toBeDefined()
    expect(finals.get(`pay_${finalStatusLimit}`)?.answer).toEqual(answer)
    expect(Object.isFrozen(finals.get('pay_1')!.answer)).toBe(true)
    finals.remember('pay_open', {
      merchantId: 'mer',
      mode: 'test',
      answer: { status: 'processing', isFinal: false, pollInMs: 1000 },
    })
    expect(finals.get('pay_open')).toBeUndefined()
    const off = new FinalStatuses(0)
    off.remember('pay_1', { merchantId: 'mer', mode: 'test', answer })
    expect(off.get('pay_1')).toBeUndefined()
  })
})
