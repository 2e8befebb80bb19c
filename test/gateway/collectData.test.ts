import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { collectDataSchema } from '../../src/server/gateway/collectData.js'
import {
  type Buyer,
  buildData,
  createBuyer,
  createGatewayEnv,
  type GatewayEnv,
  isBaseOption,
  isSolanaOption,
  pick,
} from './support.js'

const validFields = { fullName: 'Ada Lovelace', dateOfBirth: '1990-12-10', country: 'GB' }

let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv({
    config: { collectDataAtMinor: '100000', publicBaseUrl: 'https://pay.example.test' },
  })
  buyer = createBuyer()
})
afterAll(() => env.t.close())

async function optionsFor(paymentId: string) {
  const res = await env.gw('POST', paymentId, '/options', { accounts: Object.values(buyer.accounts) })
  expect(res.statusCode, res.body).toBe(200)
  return res.json.options as PaymentOption[]
}

function submit(paymentId: string, body: unknown) {
  return env.t.request({
    method: 'POST',
    url: `/v1/gateway/payment/${paymentId}/collect-data`,
    payload: body as Record<string, unknown>,
  })
}

describe('data collection (rule 2)', () => {
  it('payments under the threshold ask for nothing', async () => {
    const paymentId = await env.pay('99999')
    for (const o of await optionsFor(paymentId)) expect(o.collectData).toBeUndefined()
  })

  it('payments at the threshold carry the hosted form url and the JSON Schema of required fields', async () => {
    const paymentId = await env.pay('100000')
    const all = await optionsFor(paymentId)
    for (const o of all) {
      expect(o.collectData).toEqual({
        url: `https://pay.example.test/collect/${paymentId}?option=${o.id}`,
        schema: collectDataSchema,
      })
    }
    const schema = JSON.parse(all[0]!.collectData!.schema!)
    expect(schema.required).toEqual(['fullName', 'dateOfBirth', 'country'])
    expect(schema.type).toBe('object')
  })

  it('a caip19 amount is measured in USD at the asset rate', async () => {
    const paymentId = await env.pay(
      '1000000000',
      'caip19/eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    )
    const [option] = await optionsFor(paymentId)
    expect(option.collectData).toBeDefined()
  })

  it('fetch and confirm are 409 invalid_state until the form is completed; then the flow succeeds', async () => {
    const paymentId = await env.pay('150000')
    const options = await optionsFor(paymentId)
    const sol = pick(options, isSolanaOption)
    const evm = pick(options, isBaseOption)
    const fetchBody = { optionId: sol.id, data: buildData(sol) }
    const blocked = await env.gw('POST', paymentId, '/fetch', fetchBody)
    expect([blocked.statusCode, blocked.json.code]).toEqual([409, 'invalid_state'])
    const signature = await buyer.sign(evm.actions[0])
    const blockedConfirm = await env.gw('POST', paymentId, '/confirm', {
      optionId: evm.id,
      results: [signature],
    })
    expect([blockedConfirm.statusCode, blockedConfirm.json.code]).toEqual([409, 'invalid_state'])

    const done = await submit(paymentId, { optionId: evm.id, fields: validFields })
    expect(done.statusCode, done.body).toBe(200)
    expect(done.json).toEqual({ paymentId, optionId: evm.id, completed: true })
    // Completion is per option: the Solana one is still blocked.
    expect((await env.gw('POST', paymentId, '/fetch', fetchBody)).statusCode).toBe(409)
    const ok = await env.gw('POST', paymentId, '/confirm', { optionId: evm.id, results: [signature] })
    expect(ok.json.status, ok.body).toBe('succeeded')

    // Stored with the payment; no caller ever gets it back.
    const stored = await env.t.db
      .selectFrom('collected_data')
      .selectAll()
      .where('payment_id', '=', paymentId)
      .execute()
    expect(stored.map((r) => r.fields)).toEqual([validFields])
    const merchant = await env.t.request({
      method: 'GET',
      url: `/v1/payments/${paymentId}`,
      headers: { 'api-key': env.apiKey, 'merchant-id': env.merchantId },
    })
    const gateway = await env.gw('GET', paymentId)
    for (const body of [merchant.body, gateway.body, JSON.stringify(await optionsFor(paymentId))]) {
      expect(body).not.toContain('Lovelace')
    }
  })

  it('a refresh keeps the completion', async () => {
    const paymentId = await env.pay('150000')
    const evm = pick(await optionsFor(paymentId), isBaseOption)
    await submit(paymentId, { optionId: evm.id, fields: validFields })
    const refreshed = await env.gw('POST', paymentId, '/options', {
      accounts: [buyer.accounts.base],
      refresh: [evm.id],
    })
    const signature = await buyer.sign(refreshed.json.options[0].actions[0])
    const ok = await env.gw('POST', paymentId, '/confirm', { optionId: evm.id, results: [signature] })
    expect(ok.json.status, ok.body).toBe('succeeded')
  })

  it('the submission is validated field by field', async () => {
    const paymentId = await env.pay('150000')
    const [option] = await optionsFor(paymentId)
    const cases: [Record<string, unknown>, string][] = [
      [{ optionId: option.id, fields: { ...validFields, fullName: ' ' } }, 'fields.fullName'],
      [{ optionId: option.id, fields: { ...validFields, dateOfBirth: '1990-02-30' } }, 'fields.dateOfBirth'],
      [{ optionId: option.id, fields: { ...validFields, dateOfBirth: '2999-01-01' } }, 'fields.dateOfBirth'],
      [{ optionId: option.id, fields: { ...validFields, country: 'Germany' } }, 'fields.country'],
      [{ optionId: option.id, fields: { ...validFields, extra: 'x' } }, 'fields.extra'],
      [{ fields: validFields }, 'body.optionId'],
      [{ optionId: option.id }, 'body.fields'],
    ]
    for (const [body, path] of cases) {
      const res = await submit(paymentId, body)
      expect([res.statusCode, res.json.code, res.json.issues?.[0]?.path], JSON.stringify(body)).toEqual([
        400,
        'params_validation',
        path,
      ])
    }
  })

  it('refuses unknown options, options without a form, and payments no longer waiting', async () => {
    const paymentId = await env.pay('150000')
    const unknown = await submit(paymentId, { optionId: 'opt_nope', fields: validFields })
    expect([unknown.statusCode, unknown.json.code]).toEqual([404, 'payment_not_found'])
    const small = await env.pay('100')
    const [noForm] = await optionsFor(small)
    const refused = await submit(small, { optionId: noForm.id, fields: validFields })
    expect([refused.statusCode, refused.json.code]).toEqual([409, 'invalid_state'])
    const [option] = await optionsFor(paymentId)
    await env.gw('POST', paymentId, '/cancel')
    const late = await submit(paymentId, { optionId: option.id, fields: validFields })
    expect([late.statusCode, late.json.code]).toEqual([409, 'invalid_state'])
  })
})
