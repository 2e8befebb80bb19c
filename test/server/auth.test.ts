import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { endpoint } from '../../src/contract/endpoint.js'
import { revokeApiKey } from '../../src/server/accounts/accounts.js'
import { defineRoute } from '../../src/server/route.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers, idem } from './helpers.js'

/** An endpoint of the `gateway` auth kind that only echoes who called. */
const whoami = endpoint({
  method: 'GET',
  path: '/__test/whoami',
  auth: 'gateway',
  response: z.object({
    partnerId: z.string(),
    mode: z.string(),
    role: z.string(),
    clientId: z.nullable(z.string()),
  }),
  status: 200,
  summary: 'test only',
})

let t: TestServer
let testKey: string
let liveKey: string
let walletKey: string
let merchantId: string

beforeAll(async () => {
  t = await createTestServer()
  defineRoute(t.app, whoami, async ({ auth }) => ({
    partnerId: auth.partnerId,
    mode: auth.mode,
    role: auth.role,
    clientId: auth.clientId,
  }))
  testKey = (await t.createKey('test')).apiKey
  liveKey = (await t.createKey('live')).apiKey
  walletKey = (await t.createKey('test', 'wallet')).apiKey
  merchantId = await createMerchant(t, testKey)
})
afterAll(() => t.close())

async function expectError(
  res: { statusCode: number; json: any; body: string },
  status: number,
  code: string,
) {
  expect(res.statusCode, res.body).toBe(status)
  expect(res.json.code).toBe(code)
  expect(typeof res.json.message).toBe('string')
}

describe('API keys', () => {
  it('has the documented formats', async () => {
    expect(testKey).toMatch(/^svc_test_[A-Za-z0-9]{32,}$/)
    expect(liveKey).toMatch(/^svc_[A-Za-z0-9]{32,}$/)
    expect(liveKey.startsWith('svc_test_')).toBe(false)
  })

  it('stores only a SHA-256 hash', async () => {
    const rows = await t.db.selectFrom('api_keys').selectAll().execute()
    for (const row of rows) {
      expect(row.key_hash).toMatch(/^[0-9a-f]{64}$/)
      expect(JSON.stringify(row)).not.toContain(testKey)
    }
  })

  it('missing key: 401 missing_api_key', async () => {
    await expectError(await t.request({ method: 'GET', url: '/v1/merchants' }), 401, 'missing_api_key')
    await expectError(
      await t.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': '' } }),
      401,
      'missing_api_key',
    )
  })

  it('unknown, malformed or revoked key: 401 invalid_api_key', async () => {
    for (const key of [`svc_test_${'a'.repeat(40)}`, 'nope', 'svc_test_short', `${testKey}x`]) {
      await expectError(
        await t.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': key } }),
        401,
        'invalid_api_key',
      )
    }
    const { apiKey, keyId } = await t.createKey('test')
    expect(
      (await t.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': apiKey } })).statusCode,
    ).toBe(200)
    await revokeApiKey(t.db, keyId)
    await expectError(
      await t.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': apiKey } }),
      401,
      'invalid_api_key',
    )
  })

  it('a key whose prefix lies about its mode is invalid', async () => {
    const forged = `svc_${testKey.slice('svc_test_'.length)}`
    await expectError(
      await t.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': forged } }),
      401,
      'invalid_api_key',
    )
  })

  it('wallet key on merchant endpoints: 403 forbidden', async () => {
    await expectError(
      await t.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': walletKey } }),
      403,
      'forbidden',
    )
    await expectError(
      await t.request({
        method: 'GET',
        url: '/v1/payments/pay_abc',
        headers: headers(walletKey, merchantId),
      }),
      403,
      'forbidden',
    )
  })

  it('Api-Key with App-Id: 400 conflicting_auth_headers', async () => {
    const { appId } = await t.createAppId('test')
    await expectError(
      await t.request({
        method: 'GET',
        url: '/v1/merchants',
        headers: { 'api-key': testKey, 'app-id': appId },
      }),
      400,
      'conflicting_auth_headers',
    )
  })

  it('App-Id alone on a merchant endpoint: 401 missing_api_key', async () => {
    const { appId } = await t.createAppId('test')
    await expectError(
      await t.request({
        method: 'GET',
        url: '/v1/merchants',
        headers: { 'app-id': appId, 'client-id': 'c' },
      }),
      401,
      'missing_api_key',
    )
  })
})

describe('Merchant-Id', () => {
  it('is required on merchant-scoped calls: 400 missing_merchant_id', async () => {
    await expectError(
      await t.request({ method: 'GET', url: '/v1/merchants/payments', headers: headers(testKey) }),
      400,
      'missing_merchant_id',
    )
  })

  it('unknown, other-mode or deleted merchant: 404 merchant_not_found', async () => {
    await expectError(
      await t.request({
        method: 'GET',
        url: '/v1/merchants/payments',
        headers: headers(testKey, 'mrch_nope'),
      }),
      404,
      'merchant_not_found',
    )
    await expectError(
      await t.request({
        method: 'GET',
        url: '/v1/merchants/payments',
        headers: headers(liveKey, merchantId),
      }),
      404,
      'merchant_not_found',
    )
    const doomed = await createMerchant(t, testKey)
    await t.request({ method: 'DELETE', url: `/v1/merchants/${doomed}`, headers: headers(testKey) })
    await expectError(
      await t.request({ method: 'GET', url: '/v1/merchants/payments', headers: headers(testKey, doomed) }),
      404,
      'merchant_not_found',
    )
  })
})

describe('header_not_ascii', () => {
  for (const name of ['api-key', 'merchant-id', 'idempotency-key', 'pay-version', 'app-id', 'client-id']) {
    it(`rejects non-ASCII ${name}`, async () => {
      const res = await t.request({
        method: 'POST',
        url: '/v1/payments',
        headers: { ...headers(testKey, merchantId), [name]: 'caf\u00e9' },
        payload: { referenceId: 'a', amount: { unit: 'iso4217/USD', value: '1' } },
      })
      await expectError(res, 400, 'header_not_ascii')
    })
  }

  it('rejects control characters too', async () => {
    const res = await t.request({
      method: 'GET',
      url: '/v1/merchants',
      headers: { 'api-key': testKey, 'pay-version': '2026-02-18\u0001' },
    })
    await expectError(res, 400, 'header_not_ascii')
  })
})

describe('gateway auth kind', () => {
  it('accepts an API key of any role', async () => {
    for (const [key, role] of [
      [testKey, 'partner'],
      [walletKey, 'wallet'],
    ] as const) {
      const res = await t.request({ method: 'GET', url: '/__test/whoami', headers: { 'api-key': key } })
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json).toEqual({ partnerId: t.partnerId, mode: 'test', role, clientId: null })
    }
  })

  it('accepts App-Id + Client-Id, mode from the app id', async () => {
    const testApp = await t.createAppId('test')
    const liveApp = await t.createAppId('live')
    expect(testApp.appId).toMatch(/^app_test_[A-Za-z0-9]+$/)
    expect(liveApp.appId).toMatch(/^app_[A-Za-z0-9]+$/)
    const res = await t.request({
      method: 'GET',
      url: '/__test/whoami',
      headers: { 'app-id': liveApp.appId, 'client-id': 'wallet-install-1' },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toEqual({
      partnerId: t.partnerId,
      mode: 'live',
      role: 'app',
      clientId: 'wallet-install-1',
    })
  })

  it('maps every missing or wrong credential to its code', async () => {
    const { appId } = await t.createAppId('test')
    await expectError(await t.request({ method: 'GET', url: '/__test/whoami' }), 401, 'missing_auth_headers')
    await expectError(
      await t.request({ method: 'GET', url: '/__test/whoami', headers: { 'client-id': 'c' } }),
      401,
      'missing_app_id',
    )
    await expectError(
      await t.request({ method: 'GET', url: '/__test/whoami', headers: { 'app-id': appId } }),
      401,
      'missing_client_id',
    )
    await expectError(
      await t.request({
        method: 'GET',
        url: '/__test/whoami',
        headers: { 'app-id': 'app_test_nope', 'client-id': 'c' },
      }),
      401,
      'invalid_app_id',
    )
    await expectError(
      await t.request({
        method: 'GET',
        url: '/__test/whoami',
        headers: { 'app-id': `app_test_${'x'.repeat(24)}`, 'client-id': 'c' },
      }),
      401,
      'invalid_app_id',
    )
    await expectError(
      await t.request({
        method: 'GET',
        url: '/__test/whoami',
        headers: { 'app-id': appId, 'api-key': testKey },
      }),
      400,
      'conflicting_auth_headers',
    )
    await expectError(
      await t.request({ method: 'GET', url: '/__test/whoami', headers: { 'api-key': 'svc_bad' } }),
      401,
      'invalid_api_key',
    )
  })
})

describe('Pay-Version', () => {
  const list = (version?: string) =>
    t.request({
      method: 'GET',
      url: '/v1/merchants',
      headers: { 'api-key': testKey, ...(version ? { 'pay-version': version } : {}) },
    })

  it('defaults to the pinned version and echoes it', async () => {
    const res = await list()
    expect(res.statusCode).toBe(200)
    expect(res.headers['pay-version']).toBe('2026-02-18')
    const partner = await t.db
      .selectFrom('partners')
      .select('api_version')
      .where('id', '=', t.partnerId)
      .executeTakeFirstOrThrow()
    expect(partner.api_version).toBe('2026-02-18')
  })

  it('uses an explicit preview and echoes it', async () => {
    const res = await list('2026-02-19.preview')
    expect(res.statusCode).toBe(200)
    expect(res.headers['pay-version']).toBe('2026-02-19.preview')
  })

  it('malformed: invalid_api_version; unknown: unknown_api_version', async () => {
    await expectError(await list('latest'), 400, 'invalid_api_version')
    await expectError(await list('2026-2-18'), 400, 'invalid_api_version')
    await expectError(await list('2030-01-01'), 400, 'unknown_api_version')
    await expectError(await list('2026-02-18.beta'), 400, 'unknown_api_version')
  })

  it('older than pinned: api_version_downgrade', async () => {
    const partnerId = await t.createPartner()
    await t.db
      .updateTable('partners')
      .set({ api_version: '2026-02-19.preview' })
      .where('id', '=', partnerId)
      .execute()
    const { apiKey } = await t.createKey('test', 'partner', partnerId)
    const res = await t.request({
      method: 'GET',
      url: '/v1/merchants',
      headers: { 'api-key': apiKey, 'pay-version': '2026-02-18' },
    })
    await expectError(res, 400, 'api_version_downgrade')
  })

  it('sets new merchants idempotency requirement independent of version', async () => {
    const res = await t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: { 'api-key': testKey, 'pay-version': '2026-02-19.preview', 'idempotency-key': idem() },
      payload: { merchantName: 'P', merchantEmail: 'p@example.com' },
    })
    expect(res.statusCode).toBe(201)
    expect(res.headers['pay-version']).toBe('2026-02-19.preview')
  })
})

describe('credential and merchant cache', () => {
  // A cache that outlives every test however slow the machine (the default TTL is 1 s of real time):
  // each "at once" below is then the invalidation at work, never an entry that happened to expire.
  let c: TestServer
  let key: string
  beforeAll(async () => {
    c = await createTestServer({ config: { authCacheMs: 60_000 } })
    key = (await c.createKey('test')).apiKey
  })
  afterAll(() => c?.close())

  const status = (apiKey: string, merchant: string, paymentId: string) =>
    c.request({ method: 'GET', url: `/v1/payments/${paymentId}/status`, headers: headers(apiKey, merchant) })
  const postPayment = (merchant: string, referenceId: string) =>
    c.request({
      method: 'POST',
      url: '/v1/payments',
      headers: headers(key, merchant),
      payload: { referenceId, amount: { unit: 'iso4217/USD', value: '100' } },
    })

  it('a key revoked behind the cache is still accepted until its entry expires (what the tests below defeat)', async () => {
    const { apiKey, keyId } = await c.createKey('test')
    const merchants = () => c.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': apiKey } })
    expect((await merchants()).statusCode).toBe(200)
    await c.db.updateTable('api_keys').set({ revoked_at: new Date() }).where('id', '=', keyId).execute()
    expect((await merchants()).statusCode).toBe(200)
  })

  it('a revoked key is refused at once by the instance that revoked it', async () => {
    const { apiKey, keyId } = await c.createKey('test')
    const merchants = () => c.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': apiKey } })
    // Twice: the second answer comes from the cache.
    expect((await merchants()).statusCode).toBe(200)
    expect((await merchants()).statusCode).toBe(200)
    await revokeApiKey(c.db, keyId)
    await expectError(await merchants(), 401, 'invalid_api_key')
  })

  it('a deleted merchant is refused at once, with or without an Idempotency-Key on the delete', async () => {
    for (const deleteHeaders of [{}, { 'idempotency-key': idem() }]) {
      const merchant = await createMerchant(c, key)
      const paymentId = await createPayment(c, key, merchant)
      expect((await status(key, merchant, paymentId)).statusCode).toBe(200)
      expect((await status(key, merchant, paymentId)).statusCode).toBe(200)
      const deleted = await c.request({
        method: 'DELETE',
        url: `/v1/merchants/${merchant}`,
        headers: { 'api-key': key, ...deleteHeaders },
      })
      expect(deleted.statusCode, deleted.body).toBe(200)
      await expectError(await status(key, merchant, paymentId), 404, 'merchant_not_found')
      await expectError(await postPayment(merchant, 'after-delete'), 404, 'merchant_not_found')
    }
  })

  it('creating a payment checks the merchant in the database even when the cache still holds it', async () => {
    // What another instance's delete looks like to this one: the row changes, the cache is not told.
    const merchant = await createMerchant(c, key)
    await createPayment(c, key, merchant)
    await c.db.updateTable('merchants').set({ deleted_at: new Date() }).where('id', '=', merchant).execute()
    await expectError(await postPayment(merchant, 'stale'), 404, 'merchant_not_found')
  })

  it('a merchant update is seen at once', async () => {
    const merchant = await createMerchant(c, key)
    const paymentId = await createPayment(c, key, merchant)
    expect((await status(key, merchant, paymentId)).statusCode).toBe(200)
    const patched = await c.request({
      method: 'PATCH',
      url: `/v1/merchants/${merchant}`,
      headers: { 'api-key': key, 'idempotency-key': idem() },
      payload: { merchantName: 'Renamed' },
    })
    expect(patched.statusCode, patched.body).toBe(200)
    const got = await c.request({
      method: 'GET',
      url: `/v1/merchants/${merchant}`,
      headers: { 'api-key': key },
    })
    expect(got.json.merchant.name).toBe('Renamed')
  })

  it('authCacheMs: 0 reads the database every time', async () => {
    const uncached = await createTestServer({ config: { authCacheMs: 0 } })
    try {
      const { apiKey, keyId } = await uncached.createKey('test')
      const merchants = () =>
        uncached.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': apiKey } })
      expect((await merchants()).statusCode).toBe(200)
      // Not through revokeApiKey: nothing tells the app, yet it refuses the key.
      await uncached.db
        .updateTable('api_keys')
        .set({ revoked_at: new Date() })
        .where('id', '=', keyId)
        .execute()
      await expectError(await merchants(), 401, 'invalid_api_key')
    } finally {
      await uncached.close()
    }
  })

  it('unknown keys are not cached', async () => {
    const merchants = (apiKey: string) =>
      c.request({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': apiKey } })
    const { apiKey } = await c.createKey('test')
    await expectError(await merchants(`svc_test_${'b'.repeat(40)}`), 401, 'invalid_api_key')
    expect((await merchants(apiKey)).statusCode).toBe(200)
    // A key refused while its row was missing is accepted as soon as the row exists: no miss was kept.
    const late = await c.createKey('test')
    const row = await c.db
      .selectFrom('api_keys')
      .selectAll()
      .where('id', '=', late.keyId)
      .executeTakeFirstOrThrow()
    await c.db.deleteFrom('api_keys').where('id', '=', late.keyId).execute()
    await expectError(await merchants(late.apiKey), 401, 'invalid_api_key')
    await c.db.insertInto('api_keys').values(row).execute()
    expect((await merchants(late.apiKey)).statusCode).toBe(200)
  })
})
