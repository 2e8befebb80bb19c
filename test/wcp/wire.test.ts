import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createBuyer, createGatewayEnv, type GatewayEnv } from '../gateway/support.js'

// The /wcp mount's wire format, request by request (what the SDK sends, as measured against its WASM).

const sanctioned = `eip155:8453:0x${'5a'.repeat(20)}`
const sdkHeaders = { 'wcp-version': '2026-02-19.preview', 'api-version': '2026-02-19.preview' }
let env: GatewayEnv
beforeAll(async () => {
  env = await createGatewayEnv({
    config: {
      sanctioned: [sanctioned],
      collectDataAtMinor: '100000',
      publicBaseUrl: 'https://sandbox.example.test',
    },
  })
})
afterAll(() => env.t.close())

function wcp(
  paymentId: string,
  suffix: string,
  body?: unknown,
  headers: Record<string, string> = sdkHeaders,
) {
  return env.t.request({
    method: body === undefined ? 'GET' : 'POST',
    url: `/wcp/v1/gateway/payment/${paymentId}${suffix}`,
    headers: { 'api-key': env.walletKey, ...headers },
    ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
  })
}

describe('/wcp wire format', () => {
  it('reads WCP-Version and echoes it as WCP-Version; the native gateway keeps Pay-Version', async () => {
    const paymentId = await env.pay()
    const res = await wcp(paymentId, '/status')
    expect(res.statusCode).toBe(200)
    expect(res.headers['wcp-version']).toBe('2026-02-19.preview')
    expect(res.headers['pay-version']).toBeUndefined()
    const unknown = await wcp(paymentId, '/status', undefined, { 'wcp-version': '2030-01-01' })
    expect([unknown.statusCode, unknown.json.code]).toEqual([400, 'unknown_api_version'])
    const native = await env.gw('GET', paymentId, '/status')
    expect(native.headers['pay-version']).toBe('2026-02-18')
    expect(native.headers['wcp-version']).toBeUndefined()
  })

  it('answers options with the SDK action shapes, form fields and schema as JSON, info on request', async () => {
    const paymentId = await env.pay('100000')
    const buyer = createBuyer()
    const res = await wcp(paymentId, '/options?includePaymentInfo=true', {
      accounts: [buyer.accounts.base, buyer.accounts.solana],
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json.info).toMatchObject({ status: 'requires_action', merchant: { name: 'Coffee Shop' } })
    const evm = res.json.options.find((o: { account: string }) => o.account === buyer.accounts.base)
    expect(evm.actions).toEqual([
      {
        type: 'walletRpc',
        data: {
          chain_id: 'eip155:8453',
          method: 'eth_signTypedData_v4',
          params: [buyer.evm.address, expect.any(String)],
        },
      },
    ])
    expect(evm.collectData.fields[0]).toEqual({
      id: 'fullName',
      name: 'Full name',
      required: true,
      type: 'text',
    })
    expect(evm.collectData.schema).toMatchObject({
      type: 'object',
      required: ['fullName', 'dateOfBirth', 'country'],
    })
    const mixed = res.json.options.find((o: { actions: unknown[] }) => o.actions.length === 2)
    expect(mixed.actions[1]).toEqual({ type: 'build', data: { data: expect.stringMatching(/^bld_/) } })
    const without = await wcp(paymentId, '/options?includePaymentInfo=false', {
      accounts: [buyer.accounts.base],
    })
    expect(without.json.info).toBeUndefined()
  })

  it('fetch answers the one build action it was given; empty data answers every action', async () => {
    const paymentId = await env.pay()
    const buyer = createBuyer()
    const res = await wcp(paymentId, '/options', { accounts: [buyer.accounts.base, buyer.accounts.solana] })
    const mixed = res.json.options.find((o: { actions: unknown[] }) => o.actions.length === 2)
    const one = await wcp(paymentId, '/fetch', { optionId: mixed.id, data: mixed.actions[1].data.data })
    expect(one.json.actions.map((a: { data: { method: string } }) => a.data.method)).toEqual([
      'solana_signTransaction',
    ])
    const all = await wcp(paymentId, '/fetch', { optionId: mixed.id, data: '' })
    expect(all.json.actions.map((a: { data: { method: string } }) => a.data.method)).toEqual([
      'personal_sign',
      'solana_signTransaction',
    ])
    expect(all.json.actions[1]).toEqual(one.json.actions[0])
    const evm = res.json.options.find((o: { account: string }) => o.account === buyer.accounts.base)
    const plain = await wcp(paymentId, '/fetch', { optionId: evm.id, data: '' })
    expect(plain.json.actions).toEqual(evm.actions)
  })

  it('answers with a status the SDK reads a message for; the native gateway keeps its statuses', async () => {
    const paymentId = await env.pay()
    const res = await wcp(paymentId, '/options', { accounts: [sanctioned] })
    expect([res.statusCode, res.json.code]).toEqual([400, 'sanctioned_user'])
    const native = await env.gw('POST', paymentId, '/options', { accounts: [sanctioned] })
    expect([native.statusCode, native.json.code]).toEqual([451, 'sanctioned_user'])
    const missing = await wcp('pay_nothingHere', '/status')
    expect([missing.statusCode, missing.json.code]).toEqual([404, 'payment_not_found'])
  })

  it('lets a browser send the SDK its headers (CORS preflight) and read WCP-Version', async () => {
    const paymentId = await env.pay()
    const sent = 'api-key,api-version,content-type,sdk-name,sdk-platform,sdk-version,wcp-version'
    const preflight = await env.t.request({
      method: 'OPTIONS',
      url: `/wcp/v1/gateway/payment/${paymentId}/options`,
      headers: {
        origin: 'https://wallet.example',
        'access-control-request-method': 'POST',
        'access-control-request-headers': sent,
      },
    })
    expect(preflight.statusCode).toBe(204)
    const allowed = String(preflight.headers['access-control-allow-headers']).toLowerCase().split(', ')
    for (const name of sent.split(',')) expect(allowed, name).toContain(name)
    const res = await wcp(paymentId, '/status', undefined, {
      ...sdkHeaders,
      origin: 'https://wallet.example',
    })
    expect(res.headers['access-control-allow-origin']).toBe('*')
    expect(String(res.headers['access-control-expose-headers'])).toContain('WCP-Version')
  })

  it('finds a payment by its link on the public base URL, percent-encoded twice', async () => {
    const paymentId = await env.pay()
    const link = encodeURIComponent(encodeURIComponent(`https://sandbox.example.test/pay/${paymentId}`))
    const res = await wcp(link, '/status')
    expect([res.statusCode, res.json.status]).toEqual([200, 'requires_action'])
    for (const other of [
      `https://other.example.test/pay/${paymentId}`,
      `https://sandbox.example.test/x/${paymentId}`,
    ]) {
      const refused = await wcp(encodeURIComponent(encodeURIComponent(other)), '/status')
      expect([refused.statusCode, refused.json.code]).toEqual([404, 'payment_not_found'])
    }
  })
})
