import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, headers, idem } from './helpers.js'

const baseUsdc = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'
const ethUsdc = 'eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'
const solUsdc = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'
const baseWallet = 'eip155:8453:0x1111111111111111111111111111111111111111'
const ethWallet = 'eip155:1:0x2222222222222222222222222222222222222222'
const solWallet = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM'

let t: TestServer
let key: string

beforeAll(async () => {
  t = await createTestServer()
  key = (await t.createKey('test')).apiKey
})
afterAll(() => t.close())

const register = (merchantId: string, settlements: unknown, idempotencyKey: string | null = idem()) =>
  t.request({
    method: 'POST',
    url: `/v1/merchants/${merchantId}/settlements/crypto`,
    headers: { 'api-key': key, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
    payload: { settlements } as object,
  })
const list = (merchantId: string) =>
  t.request({ method: 'GET', url: `/v1/merchants/${merchantId}/settlements`, headers: headers(key) })

describe('crypto settlements (rows 6-9)', () => {
  it('registers several destinations at once and lists them (row 6, 7)', async () => {
    const m = await createMerchant(t, key)
    const res = await register(m, [
      { asset: baseUsdc, destination: baseWallet },
      { asset: ethUsdc, destination: ethWallet },
      { asset: solUsdc, destination: solWallet },
    ])
    expect(res.statusCode, res.body).toBe(201)
    expect(res.json.settlements.map((s: { asset: string }) => s.asset)).toEqual([baseUsdc, ethUsdc, solUsdc])
    for (const s of res.json.settlements) expect(s.id).toMatch(/^crypto_[A-Za-z0-9]+$/)
    const listed = await list(m)
    expect(listed.statusCode).toBe(200)
    expect(listed.json.fiat).toEqual([])
    expect(listed.json.crypto).toHaveLength(3)
  })

  it('an empty list: {crypto: [], fiat: []}', async () => {
    const m = await createMerchant(t, key)
    expect((await list(m)).json).toEqual({ crypto: [], fiat: [] })
  })

  it('requires Idempotency-Key', async () => {
    const m = await createMerchant(t, key)
    const res = await register(m, [{ asset: baseUsdc, destination: baseWallet }], null)
    expect(res.statusCode).toBe(400)
    expect(res.json.code).toBe('invalid_params')
  })

  it('takes 1 to 50 entries', async () => {
    const m = await createMerchant(t, key)
    const none = await register(m, [])
    expect(none.statusCode).toBe(400)
    expect(none.json.code).toBe('params_validation')
    const many = Array.from({ length: 51 }, (_, i) => ({
      asset: `eip155:8453/erc20:0x${i.toString(16).padStart(40, '0')}`,
      destination: baseWallet,
    }))
    const tooMany = await register(m, many)
    expect(tooMany.statusCode).toBe(400)
    expect(tooMany.json.code).toBe('params_validation')
    const fifty = await register(m, many.slice(0, 50))
    expect(fifty.statusCode, fifty.body).toBe(201)
    expect(fifty.json.settlements).toHaveLength(50)
  })

  it('destination must be on the asset chain; CAIP formats are checked', async () => {
    const m = await createMerchant(t, key)
    for (const entry of [
      { asset: baseUsdc, destination: ethWallet },
      { asset: baseUsdc, destination: solWallet },
      { asset: 'not-an-asset', destination: baseWallet },
      { asset: baseUsdc, destination: 'eip155:8453:0xnothex' },
      { asset: baseUsdc },
    ]) {
      const res = await register(m, [entry])
      expect(res.statusCode, JSON.stringify(entry)).toBe(400)
      expect(res.json.code).toBe('params_validation')
    }
  })

  it('an asset registered twice: 409 settlement_asset_conflict, and the batch is atomic', async () => {
    const m = await createMerchant(t, key)
    expect((await register(m, [{ asset: baseUsdc, destination: baseWallet }])).statusCode).toBe(201)
    const again = await register(m, [
      { asset: ethUsdc, destination: ethWallet },
      { asset: baseUsdc.toLowerCase(), destination: baseWallet },
    ])
    expect(again.statusCode).toBe(409)
    expect(again.json.code).toBe('settlement_asset_conflict')
    const listed = await list(m)
    expect(listed.json.crypto.map((s: { asset: string }) => s.asset)).toEqual([baseUsdc])
    const dupInBatch = await register(m, [
      { asset: solUsdc, destination: solWallet },
      { asset: solUsdc, destination: solWallet },
    ])
    expect(dupInBatch.statusCode).toBe(409)
    expect(dupInBatch.json.code).toBe('settlement_asset_conflict')
    expect((await list(m)).json.crypto).toHaveLength(1)
  })

  it('the same asset on two merchants is fine', async () => {
    const a = await createMerchant(t, key)
    const b = await createMerchant(t, key)
    expect((await register(a, [{ asset: baseUsdc, destination: baseWallet }])).statusCode).toBe(201)
    expect((await register(b, [{ asset: baseUsdc, destination: baseWallet }])).statusCode).toBe(201)
  })

  it('a replayed conflict answers the same', async () => {
    const m = await createMerchant(t, key)
    await register(m, [{ asset: baseUsdc, destination: baseWallet }])
    const k = idem()
    const first = await register(m, [{ asset: baseUsdc, destination: baseWallet }], k)
    const second = await register(m, [{ asset: baseUsdc, destination: baseWallet }], k)
    expect(first.statusCode).toBe(409)
    expect(second.statusCode).toBe(409)
    expect(second.headers['idempotent-replayed']).toBe('true')
    expect(second.json).toEqual(first.json)
  })

  it('PUT changes the destination (row 8)', async () => {
    const m = await createMerchant(t, key)
    const created = await register(m, [{ asset: baseUsdc, destination: baseWallet }])
    const id = created.json.settlements[0].id
    const other = 'eip155:8453:0x3333333333333333333333333333333333333333'
    const put = await t.request({
      method: 'PUT',
      url: `/v1/merchants/${m}/settlements/crypto/${id}`,
      headers: headers(key),
      payload: { destination: other },
    })
    expect(put.statusCode, put.body).toBe(200)
    expect(put.json).toEqual({ id, asset: baseUsdc, destination: other })
    const wrongChain = await t.request({
      method: 'PUT',
      url: `/v1/merchants/${m}/settlements/crypto/${id}`,
      headers: headers(key),
      payload: { destination: ethWallet },
    })
    expect(wrongChain.statusCode).toBe(400)
    expect(wrongChain.json.code).toBe('params_validation')
    const unknown = await t.request({
      method: 'PUT',
      url: `/v1/merchants/${m}/settlements/crypto/crypto_nope`,
      headers: headers(key),
      payload: { destination: other },
    })
    expect([unknown.statusCode, unknown.json.code]).toEqual([404, 'settlement_not_found'])
  })

  it('DELETE removes it, and the asset can be registered again (row 9)', async () => {
    const m = await createMerchant(t, key)
    const created = await register(m, [{ asset: baseUsdc, destination: baseWallet }])
    const id = created.json.settlements[0].id
    const del = await t.request({
      method: 'DELETE',
      url: `/v1/merchants/${m}/settlements/crypto/${id}`,
      headers: headers(key),
    })
    expect(del.statusCode).toBe(200)
    expect(del.json).toEqual({ id, deleted: true })
    expect((await list(m)).json.crypto).toEqual([])
    expect((await register(m, [{ asset: baseUsdc, destination: baseWallet }])).statusCode).toBe(201)
  })

  it("another merchant's settlement id is not reachable through this merchant", async () => {
    const a = await createMerchant(t, key)
    const b = await createMerchant(t, key)
    const created = await register(a, [{ asset: baseUsdc, destination: baseWallet }])
    const id = created.json.settlements[0].id
    const del = await t.request({
      method: 'DELETE',
      url: `/v1/merchants/${b}/settlements/crypto/${id}`,
      headers: headers(key),
    })
    expect([del.statusCode, del.json.code]).toEqual([404, 'settlement_not_found'])
    expect((await list(a)).json.crypto).toHaveLength(1)
  })

  it('unknown merchant: 404 merchant_not_found', async () => {
    const res = await register('mrch_nope', [{ asset: baseUsdc, destination: baseWallet }])
    expect(res.statusCode).toBe(404)
    expect(res.json.code).toBe('merchant_not_found')
    expect((await list('mrch_nope')).statusCode).toBe(404)
  })
})
