import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sweepIdempotencyKeys } from '../../src/server/idempotency.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers, idem, succeedPayment } from './helpers.js'

const start = new Date('2026-03-01T12:00:00.000Z')
const startS = start.getTime() / 1000
const baseUsdc = 'caip19/eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'
/** Schema-valid, refused by the handler (payments/create.ts): a fiat code off the list is refused earlier. */
const unpricedAsset = 'caip19/eip155:1/erc20:0x0000000000000000000000000000000000000001'

let t: TestServer
let key: string
let merchantId: string

beforeAll(async () => {
  t = await createTestServer({ startTime: start, config: { publicBaseUrl: 'https://pay.example.com/' } })
  key = (await t.createKey('test')).apiKey
  merchantId = await createMerchant(t, key)
})
afterAll(() => t.close())

const create = (payload: unknown, extra: Record<string, string> = {}, merchant = merchantId) =>
  t.request({
    method: 'POST',
    url: '/v1/payments',
    headers: headers(key, merchant, extra),
    payload: payload as object,
  })
const get = (path: string, merchant: string | undefined = merchantId) =>
  t.request({ method: 'GET', url: path, headers: headers(key, merchant) })

describe('POST /v1/payments (row 10)', () => {
  it('creates a payment with the documented response', async () => {
    const res = await create({ referenceId: 'order-1', amount: { unit: 'iso4217/USD', value: '1250' } })
    expect(res.statusCode, res.body).toBe(201)
    expect(res.json.paymentId).toMatch(/^pay_[A-Za-z0-9]+$/)
    expect(res.json).toEqual({
      paymentId: res.json.paymentId,
      gatewayUrl: `https://pay.example.com/pay/${res.json.paymentId}`,
      status: 'requires_action',
      expiresAt: startS + 15 * 60,
      isFinal: false,
      pollInMs: expect.any(Number),
    })
    const row = await t.db
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', res.json.paymentId)
      .executeTakeFirstOrThrow()
    expect(row).toMatchObject({
      mode: 'test',
      merchant_id: merchantId,
      partner_id: t.partnerId,
      amount_value: '1250',
      amount_unit: 'iso4217/USD',
    })
  })

  it('keeps huge amounts exact (numeric, never a float)', async () => {
    const value = '123456789012345678901234567890123456789'
    const id = await createPayment(t, key, merchantId, {
      referenceId: 'big',
      amount: { unit: 'iso4217/USD', value },
    })
    const res = await get(`/v1/payments/${id}`)
    expect(res.json.amount.value).toBe(value)
  })

  it('accepts a future expiresAt and refuses a past or too distant one', async () => {
    const ok = await create({
      referenceId: 'e',
      amount: { unit: 'iso4217/EUR', value: '1' },
      expiresAt: startS + 3600,
    })
    expect(ok.statusCode).toBe(201)
    expect(ok.json.expiresAt).toBe(startS + 3600)
    for (const expiresAt of [startS - 1, startS, startS + 31 * 24 * 3600]) {
      const res = await create({ referenceId: 'e', amount: { unit: 'iso4217/EUR', value: '1' }, expiresAt })
      expect(res.statusCode).toBe(400)
      expect(res.json.code).toBe('params_validation')
      expect(res.json.issues[0].path).toBe('body.expiresAt')
    }
  })

  it('validates referenceId, amount and unit', async () => {
    for (const body of [
      { amount: { unit: 'iso4217/USD', value: '1' } },
      { referenceId: '', amount: { unit: 'iso4217/USD', value: '1' } },
      { referenceId: 'x'.repeat(36), amount: { unit: 'iso4217/USD', value: '1' } },
      { referenceId: 'bad#char', amount: { unit: 'iso4217/USD', value: '1' } },
      { referenceId: 'a', amount: { unit: 'iso4217/USD', value: '0' } },
      { referenceId: 'a', amount: { unit: 'iso4217/USD', value: '-5' } },
      { referenceId: 'a', amount: { unit: 'iso4217/USD', value: '12.50' } },
      { referenceId: 'a', amount: { unit: 'iso4217/USD', value: 1250 } },
      { referenceId: 'a', amount: { unit: 'USD', value: '1' } },
      { referenceId: 'a', amount: { unit: 'iso4217/XXX', value: '1' } },
      {
        referenceId: 'a',
        amount: { unit: 'caip19/eip155:1/erc20:0x0000000000000000000000000000000000000001', value: '1' },
      },
      { referenceId: 'a', amount: { unit: 'iso4217/USD', value: '1', display: {} } },
      { referenceId: 'a', amount: { unit: 'iso4217/USD', value: '1' }, expiresAt: '1700000000' },
      {
        referenceId: 'a',
        amount: { unit: 'iso4217/USD', value: '1' },
        checkout: { successUrl: 'https://a.example', errorUrl: 'https://b.example' },
      },
    ]) {
      const res = await create(body)
      expect(res.statusCode, JSON.stringify(body)).toBe(400)
      expect(res.json.code, JSON.stringify(body)).toBe('params_validation')
    }
  })

  it('the preview version takes checkout URLs; the stable one refuses them', async () => {
    const body = {
      referenceId: 'preview',
      amount: { unit: 'iso4217/USD', value: '500' },
      checkout: { successUrl: 'https://shop.example/ok', errorUrl: 'https://shop.example/ko' },
    }
    const stable = await create(body, { 'pay-version': '2026-02-18' })
    expect(stable.statusCode).toBe(400)
    expect(stable.json.code).toBe('params_validation')
    const preview = await create(body, { 'pay-version': '2026-02-19.preview' })
    expect(preview.statusCode, preview.body).toBe(201)
    expect(preview.headers['pay-version']).toBe('2026-02-19.preview')
    const row = await t.db
      .selectFrom('payments')
      .select('checkout')
      .where('id', '=', preview.json.paymentId)
      .executeTakeFirstOrThrow()
    expect(row.checkout).toEqual(body.checkout)
    const badUrl = await create(
      { ...body, checkout: { successUrl: 'javascript:alert(1)', errorUrl: 'https://x.example' } },
      { 'pay-version': '2026-02-19.preview' },
    )
    expect(badUrl.statusCode).toBe(400)
    expect(badUrl.json.issues[0].path).toMatch(/^body\.checkout/)
  })

  it('honours an Idempotency-Key when one is sent', async () => {
    const k = idem()
    const body = { referenceId: 'idem', amount: { unit: 'iso4217/USD', value: '100' } }
    const a = await create(body, { 'idempotency-key': k })
    const b = await create(body, { 'idempotency-key': k })
    expect(b.headers['idempotent-replayed']).toBe('true')
    expect(b.json.paymentId).toBe(a.json.paymentId)
    const other = await create({ ...body, referenceId: 'idem2' }, { 'idempotency-key': k })
    expect(other.statusCode).toBe(409)
    expect(other.json.code).toBe('idempotency_conflict')
  })

  it('the same key for another merchant is another request', async () => {
    const m2 = await createMerchant(t, key)
    const k = idem()
    const body = { referenceId: 'two-merchants', amount: { unit: 'iso4217/USD', value: '100' } }
    expect((await create(body, { 'idempotency-key': k })).statusCode).toBe(201)
    const res = await create(body, { 'idempotency-key': k }, m2)
    expect(res.statusCode).toBe(409)
  })
})

describe('GET /v1/payments/:id (row 12) and /status (row 13)', () => {
  it('reads a new payment', async () => {
    const id = await createPayment(t, key, merchantId)
    const res = await get(`/v1/payments/${id}`)
    expect(res.statusCode).toBe(200)
    expect(res.json).toEqual({
      paymentId: id,
      status: 'requires_action',
      referenceId: 'order-1',
      amount: {
        unit: 'iso4217/USD',
        value: '1250',
        display: { assetName: 'US Dollar', assetSymbol: 'USD', decimals: 2 },
      },
      failureCode: null,
      info: null,
      settlement: null,
      expiresAt: startS + 900 + Math.floor((t.app.now().getTime() - start.getTime()) / 1000),
      createdAt: expect.any(String),
      source: 'pull',
    })
    const status = await get(`/v1/payments/${id}/status`)
    expect(status.json).toEqual({ status: 'requires_action', isFinal: false, pollInMs: 2000 })
  })

  it('displays currencies with their decimals and known tokens with network facts', async () => {
    const jpy = await createPayment(t, key, merchantId, {
      referenceId: 'jpy',
      amount: { unit: 'iso4217/JPY', value: '500' },
    })
    expect((await get(`/v1/payments/${jpy}`)).json.amount.display).toEqual({
      assetName: 'Japanese Yen',
      assetSymbol: 'JPY',
      decimals: 0,
    })
    const gbp = await createPayment(t, key, merchantId, {
      referenceId: 'gbp',
      amount: { unit: 'iso4217/GBP', value: '500' },
    })
    expect((await get(`/v1/payments/${gbp}`)).json.amount.display.decimals).toBe(2)
    const usdc = await createPayment(t, key, merchantId, {
      referenceId: 'usdc',
      amount: { unit: baseUsdc, value: '1000000' },
    })
    expect((await get(`/v1/payments/${usdc}`)).json.amount.display).toEqual({
      assetName: 'USD Coin',
      assetSymbol: 'USDC',
      decimals: 6,
      iconUrl: null,
      networkIconUrl: null,
      networkName: 'Base',
    })
  })

  it('a succeeded payment has info and txId', async () => {
    const id = await createPayment(t, key, merchantId)
    await succeedPayment(t, id)
    const res = await get(`/v1/payments/${id}`)
    expect(res.json.status).toBe('succeeded')
    expect(res.json.info.txId).toBe(`test:${id}`)
    expect(res.json.info.optionAmount.unit).toBe('iso4217/USD')
    expect(res.json.failureCode).toBeNull()
    const status = await get(`/v1/payments/${id}/status`)
    expect(status.json).toEqual({ status: 'succeeded', isFinal: true, pollInMs: null, txId: `test:${id}` })
  })

  it('shows failureCode only when failed and settlement once known', async () => {
    const id = await createPayment(t, key, merchantId)
    await t.db
      .updateTable('payments')
      .set({ status: 'failed', failure_code: 'declined_user' })
      .where('id', '=', id)
      .execute()
    const failed = await get(`/v1/payments/${id}`)
    expect(failed.json).toMatchObject({ status: 'failed', failureCode: 'declined_user', info: null })
    const settled = await createPayment(t, key, merchantId)
    await succeedPayment(t, settled, '0xabc')
    await t.db
      .updateTable('payments')
      .set({ settlement_status: 'pending' })
      .where('id', '=', settled)
      .execute()
    expect((await get(`/v1/payments/${settled}`)).json.settlement).toEqual({ successful: null })
    await t.db
      .updateTable('payments')
      .set({ settlement_status: 'succeeded', settlement_tx_id: '0xdef', settlement_unit: baseUsdc })
      .where('id', '=', settled)
      .execute()
    expect((await get(`/v1/payments/${settled}`)).json.settlement).toEqual({
      successful: { txId: '0xdef', amount: { unit: baseUsdc } },
    })
  })

  it('malformed id: 400; unknown: 404 payment_not_found; other merchant: 404', async () => {
    for (const bad of ['nope', 'pay_', 'pay_%20x', `pay_${'a'.repeat(61)}`]) {
      const res = await get(`/v1/payments/${bad}`)
      expect(res.statusCode, bad).toBe(400)
      expect(res.json.code).toBe('params_validation')
      expect(res.json.issues[0].path).toBe('path.id')
    }
    const unknown = await get('/v1/payments/pay_unknown')
    expect(unknown.statusCode).toBe(404)
    expect(unknown.json.code).toBe('payment_not_found')
    const id = await createPayment(t, key, merchantId)
    const other = await createMerchant(t, key)
    expect((await get(`/v1/payments/${id}`, other)).statusCode).toBe(404)
    expect((await get(`/v1/payments/${id}/status`, other)).statusCode).toBe(404)
  })

  it('applies expiry lazily on read', async () => {
    const id = await createPayment(t, key, merchantId)
    t.advanceTime(15 * 60 * 1000 + 1000)
    const status = await get(`/v1/payments/${id}/status`)
    expect(status.json).toEqual({ status: 'expired', isFinal: true, pollInMs: null })
    const row = await t.db
      .selectFrom('payments')
      .select('status')
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    expect(row.status).toBe('expired')
  })
})

describe('payment lists (rows 11, 14, 15)', () => {
  let listKey: string
  let m1: string
  let m2: string
  const ids: string[] = []
  beforeAll(async () => {
    listKey = (await t.createKey('test', 'partner', await t.createPartner())).apiKey
    m1 = await createMerchant(t, listKey)
    m2 = await createMerchant(t, listKey)
    for (let i = 0; i < 6; i++) {
      t.advanceTime(1000)
      ids.push(
        await createPayment(t, listKey, i % 2 ? m2 : m1, {
          referenceId: `ref-${i}`,
          amount: { unit: 'iso4217/USD', value: String(100 + i) },
          expiresAt: Math.floor(t.app.now().getTime() / 1000) + 7 * 24 * 3600,
        }),
      )
    }
    await succeedPayment(t, ids[0]!)
    await t.request({ method: 'POST', url: `/v1/payments/${ids[1]}/cancel`, headers: headers(listKey, m2) })
  })
  const list = (url: string, merchant?: string) =>
    t.request({ method: 'GET', url, headers: headers(listKey, merchant) })
  const idsOf = (res: { json: { data: { paymentId: string }[] } }) => res.json.data.map((p) => p.paymentId)

  it('row 11 lists all merchants of the partner, newest first', async () => {
    const res = await list('/v1/payments')
    expect(res.statusCode).toBe(200)
    expect(idsOf(res)).toEqual([...ids].reverse())
    expect(res.json.nextCursor).toBeNull()
    const item = res.json.data.find((p: { paymentId: string }) => p.paymentId === ids[0])
    expect(item).toEqual({
      paymentId: ids[0],
      merchantId: m1,
      referenceId: 'ref-0',
      status: 'succeeded',
      amount: {
        unit: 'iso4217/USD',
        value: '100',
        display: { assetName: 'US Dollar', assetSymbol: 'USD', decimals: 2 },
      },
      optionAmount: null,
      buyer: null,
      txId: `test:${ids[0]}`,
      refunded: false,
      createdAt: expect.any(String),
      updatedAt: expect.any(String),
    })
  })

  it('row 11 filters by merchantId, status (repeatable), referenceId and time', async () => {
    expect(idsOf(await list(`/v1/payments?merchantId=${m2}`))).toEqual([ids[5], ids[3], ids[1]])
    expect(idsOf(await list('/v1/payments?status=succeeded'))).toEqual([ids[0]])
    expect(idsOf(await list('/v1/payments?status=succeeded&status=cancelled'))).toEqual([ids[1], ids[0]])
    expect(idsOf(await list('/v1/payments?referenceId=ref-4'))).toEqual([ids[4]])
    const rows = await t.db
      .selectFrom('payments')
      .select(['id', 'created_at'])
      .where('id', 'in', ids)
      .execute()
    const at = (id: string) => Math.floor(rows.find((r) => r.id === id)!.created_at.getTime() / 1000)
    expect(idsOf(await list(`/v1/payments?startTs=${at(ids[2]!)}&endTs=${at(ids[4]!)}`))).toEqual([
      ids[3],
      ids[2],
    ])
    const bad = await list('/v1/payments?status=paid')
    expect(bad.statusCode).toBe(400)
    expect(bad.json.code).toBe('params_validation')
    const otherPartnerMerchant = await list(`/v1/payments?merchantId=${merchantId}`)
    expect(otherPartnerMerchant.statusCode).toBe(404)
  })

  it('paginates across pages; limit bounds are enforced', async () => {
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const res = await list(`/v1/payments?limit=4${cursor ? `&cursor=${cursor}` : ''}`)
      seen.push(...idsOf(res))
      cursor = res.json.nextCursor
    } while (cursor)
    expect(seen).toEqual([...ids].reverse())
    for (const q of ['limit=0', 'limit=201', 'limit=x']) {
      const res = await list(`/v1/payments?${q}`)
      expect(res.statusCode).toBe(400)
      expect(res.json.code).toBe('params_validation')
    }
    expect((await list('/v1/payments?limit=200')).statusCode).toBe(200)
  })

  it('pages a multi-status filter in keyset order (one range per status, merged)', async () => {
    const statuses = 'status=requires_action&status=succeeded&status=cancelled&status=requires_action'
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const res = await list(`/v1/payments?${statuses}&limit=2${cursor ? `&cursor=${cursor}` : ''}`)
      expect(res.statusCode).toBe(200)
      seen.push(...idsOf(res))
      cursor = res.json.nextCursor
    } while (cursor)
    expect(seen).toEqual([...ids].reverse())
    const both = 'status=cancelled&status=requires_action&limit=2'
    const first = await list(`/v1/merchants/payments?${both}`, m2)
    expect(idsOf(first)).toEqual([ids[5], ids[3]])
    const next = await list(`/v1/merchants/payments?${both}&cursor=${first.json.nextCursor}`, m2)
    expect(idsOf(next)).toEqual([ids[1]])
    expect(next.json.nextCursor).toBeNull()
  })

  it('row 14 lists the Merchant-Id merchant', async () => {
    const res = await list('/v1/merchants/payments', m1)
    expect(res.statusCode).toBe(200)
    expect(idsOf(res)).toEqual([ids[4], ids[2], ids[0]])
    expect(res.headers.deprecation).toBeUndefined()
    const page = await list('/v1/merchants/payments?limit=2', m1)
    expect(idsOf(page)).toEqual([ids[4], ids[2]])
    expect(idsOf(await list(`/v1/merchants/payments?limit=2&cursor=${page.json.nextCursor}`, m1))).toEqual([
      ids[0],
    ])
    const merchantFilter = await list(`/v1/merchants/payments?merchantId=${m2}`, m1)
    expect(merchantFilter.statusCode).toBe(400)
  })

  it('row 15 is the deprecated path form with a Deprecation header', async () => {
    const res = await list(`/v1/merchants/${m2}/payments?status=cancelled`)
    expect(res.statusCode).toBe(200)
    expect(res.headers.deprecation).toBe('true')
    expect(idsOf(res)).toEqual([ids[1]])
    expect((await list('/v1/merchants/mrch_none/payments')).statusCode).toBe(404)
  })

  it('shows expired payments as expired in lists', async () => {
    const k = (await t.createKey('test', 'partner', await t.createPartner())).apiKey
    const m = await createMerchant(t, k)
    const id = await createPayment(t, k, m)
    t.advanceTime(16 * 60 * 1000)
    const res = await t.request({ method: 'GET', url: '/v1/merchants/payments', headers: headers(k, m) })
    expect(res.json.data[0]).toMatchObject({ paymentId: id, status: 'expired' })
  })
})

describe('POST /v1/payments/:id/cancel (row 16)', () => {
  const cancel = (id: string, extra: Record<string, string> = {}) =>
    t.request({ method: 'POST', url: `/v1/payments/${id}/cancel`, headers: headers(key, merchantId, extra) })

  it('cancels a waiting payment once', async () => {
    const id = await createPayment(t, key, merchantId)
    const res = await cancel(id)
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toEqual({
      paymentId: id,
      status: 'cancelled',
      cancelledAt: t.app.now().toISOString(),
      cancelledReason: 'cancelled_by_merchant',
    })
    const again = await cancel(id)
    expect(again.statusCode).toBe(409)
    expect(again.json.code).toBe('invalid_state')
    expect((await get(`/v1/payments/${id}/status`)).json).toEqual({
      status: 'cancelled',
      isFinal: true,
      pollInMs: null,
    })
  })

  it('accepts a JSON content type with an empty body', async () => {
    const id = await createPayment(t, key, merchantId)
    const res = await t.request({
      method: 'POST',
      url: `/v1/payments/${id}/cancel`,
      headers: headers(key, merchantId, { 'content-type': 'application/json' }),
      payload: '',
    })
    expect(res.statusCode, res.body).toBe(200)
  })

  it('refuses processing, succeeded and expired payments', async () => {
    const done = await createPayment(t, key, merchantId)
    await succeedPayment(t, done)
    expect((await cancel(done)).json.code).toBe('invalid_state')
    const late = await createPayment(t, key, merchantId)
    t.advanceTime(16 * 60 * 1000)
    const res = await cancel(late)
    expect(res.statusCode).toBe(409)
    expect(res.json.code).toBe('invalid_state')
  })

  it('unknown payment: 404', async () => {
    const res = await cancel('pay_missing')
    expect(res.statusCode).toBe(404)
    expect(res.json.code).toBe('payment_not_found')
  })

  it('an idempotent cancel replays the success', async () => {
    const id = await createPayment(t, key, merchantId)
    const k = idem()
    const a = await cancel(id, { 'idempotency-key': k })
    const b = await cancel(id, { 'idempotency-key': k })
    expect(a.statusCode).toBe(200)
    expect(b.statusCode).toBe(200)
    expect(b.headers['idempotent-replayed']).toBe('true')
  })
})

// POST /v1/refunds (row 17): test/server/refunds.test.ts.

// Last in the file: its last case moves the clock a day on.
describe('POST /v1/payments under an Idempotency-Key', () => {
  const body = (referenceId: string) => ({ referenceId, amount: { unit: 'iso4217/USD', value: '700' } })
  const rowsOf = (referenceId: string) =>
    t.db.selectFrom('payments').select('id').where('reference_id', '=', referenceId).execute()
  const record = (k: string) =>
    t.db.selectFrom('idempotency_keys').selectAll().where('key', '=', k).executeTakeFirstOrThrow()

  it('stores the answer with the payment: the replay is the same bytes and no second row', async () => {
    const k = idem()
    const first = await create(body('one-statement'), { 'idempotency-key': k })
    expect(first.statusCode, first.body).toBe(201)
    const stored = await record(k)
    expect([stored.state, stored.response_status]).toEqual(['done', 201])
    expect(JSON.parse(stored.response_body!)).toEqual(first.json)
    const replay = await create(body('one-statement'), { 'idempotency-key': k })
    expect([replay.statusCode, replay.headers['idempotent-replayed'], replay.body]).toEqual([
      201,
      'true',
      first.body,
    ])
    expect(await rowsOf('one-statement')).toEqual([{ id: first.json.paymentId }])
  })

  it('the sweep deletes an answer once it has expired, not before', async () => {
    const k = idem()
    expect((await create(body('swept'), { 'idempotency-key': k })).statusCode).toBe(201)
    const { expires_at } = await record(k)
    await sweepIdempotencyKeys(t.db, new Date(expires_at.getTime() - 1000))
    expect((await record(k)).key).toBe(k)
    expect(await sweepIdempotencyKeys(t.db, new Date(expires_at.getTime() + 1000))).toBeGreaterThanOrEqual(1)
    const left = await t.db.selectFrom('idempotency_keys').select('key').where('key', '=', k).execute()
    expect(left).toEqual([])
  })

  it('a merchant deleted behind the cache: 404 stored under the key, nothing inserted', async () => {
    // A cache that outlives the test however slow the machine: the merchant stays cached throughout
    // (with fast paths off there is no cache, and the Merchant-Id lookup itself refuses).
    const cached = await createTestServer({ config: { authCacheMs: 60_000 }, fastPaths: true })
    try {
      const apiKey = (await cached.createKey('test')).apiKey
      const merchant = await createMerchant(cached, apiKey)
      await createPayment(cached, apiKey, merchant) // the cache now holds the merchant
      await cached.db
        .updateTable('merchants')
        .set({ deleted_at: new Date() })
        .where('id', '=', merchant)
        .execute()
      const k = idem()
      const send = () =>
        cached.request({
          method: 'POST',
          url: '/v1/payments',
          headers: headers(apiKey, merchant, { 'idempotency-key': k }),
          payload: body('deleted-merchant'),
        })
      const refused = await send()
      expect([refused.statusCode, refused.json.code]).toEqual([404, 'merchant_not_found'])
      const rows = await cached.db
        .selectFrom('payments')
        .select('id')
        .where('reference_id', '=', 'deleted-merchant')
        .execute()
      expect(rows).toEqual([])
      const stored = await cached.db
        .selectFrom('idempotency_keys')
        .selectAll()
        .where('key', '=', k)
        .executeTakeFirstOrThrow()
      expect(stored.response_status).toBe(404)
      const replay = await send()
      expect([replay.statusCode, replay.headers['idempotent-replayed']]).toEqual([404, 'true'])
    } finally {
      await cached.close()
    }
  })

  it("a refusal found before the insert (an asset this server does not price) is the key's answer too", async () => {
    const k = idem()
    const bad = { referenceId: 'bad-unit', amount: { unit: unpricedAsset, value: '1' } }
    const refused = await create(bad, { 'idempotency-key': k })
    expect([refused.statusCode, refused.json.code]).toEqual([400, 'params_validation'])
    const replay = await create(bad, { 'idempotency-key': k })
    expect([replay.statusCode, replay.headers['idempotent-replayed']]).toEqual([400, 'true'])
    const other = await create(body('bad-unit'), { 'idempotency-key': k })
    expect([other.statusCode, other.json.code]).toEqual([409, 'idempotency_conflict'])
    expect(await rowsOf('bad-unit')).toEqual([])
  })

  it('while another request holds the key: 409 and nothing written', async () => {
    const k = idem()
    // What a request in flight on another connection holds: the key's transaction-scoped lock.
    const trx = await t.db.startTransaction().execute()
    try {
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`caipay.idempotency:${t.partnerId}:test:${k}`}, 0))`.execute(
        trx,
      )
      const blocked = await create(body('held-key'), { 'idempotency-key': k })
      expect([blocked.statusCode, blocked.json.code]).toEqual([409, 'idempotency_conflict'])
    } finally {
      await trx.rollback().execute()
    }
    expect(await rowsOf('held-key')).toEqual([])
    expect(await t.db.selectFrom('idempotency_keys').select('key').where('key', '=', k).execute()).toEqual([])
    const after = await create(body('held-key'), { 'idempotency-key': k })
    expect(after.statusCode).toBe(201)
    expect(after.headers['idempotent-replayed']).toBeUndefined()
  })

  it('a refusal while another request holds the key: 409, nothing stored', async () => {
    const k = idem()
    const trx = await t.db.startTransaction().execute()
    try {
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`caipay.idempotency:${t.partnerId}:test:${k}`}, 0))`.execute(
        trx,
      )
      const bad = { referenceId: 'held-refusal', amount: { unit: unpricedAsset, value: '1' } }
      const blocked = await create(bad, { 'idempotency-key': k })
      expect([blocked.statusCode, blocked.json.code]).toEqual([409, 'idempotency_conflict'])
    } finally {
      await trx.rollback().execute()
    }
    expect(await t.db.selectFrom('idempotency_keys').select('key').where('key', '=', k).execute()).toEqual([])
  })

  it('an answer committed while the statement runs is the answer: a replay, one payment', async () => {
    const k = idem()
    const winner = await create(body('late-answer'), { 'idempotency-key': k })
    const stored = await record(k)
    await t.db.deleteFrom('idempotency_keys').where('key', '=', k).execute()
    // Another request's answer, written but not yet committed, on another connection.
    const trx = await t.db.startTransaction().execute()
    let committed = false
    try {
      await trx
        .insertInto('idempotency_keys')
        .values({ ...stored, response_headers: null })
        .execute()
      const pending = create(body('late-answer'), { 'idempotency-key': k })
      // The request's statement waits on that row (ON CONFLICT); then the other request commits.
      // Only this test's database (the cluster is shared with files running alongside), and no commit
      // before the request waits: committing first would test the plain replay instead.
      for (let i = 0; ; i++) {
        const { rows } = await sql<{ waiting: number }>`
          SELECT count(*)::int AS waiting FROM pg_stat_activity
          WHERE datname = current_database() AND wait_event_type = 'Lock'
            AND query LIKE '%idempotency_keys%'`.execute(t.db)
        if (rows[0]!.waiting > 0) break
        if (i === 500) throw new Error('the request never waited on the uncommitted answer')
        await new Promise((resolve) => setTimeout(resolve, 10))
      }
      await trx.commit().execute()
      committed = true
      const late = await pending
      expect([late.statusCode, late.headers['idempotent-replayed'], late.body]).toEqual([
        201,
        'true',
        winner.body,
      ])
    } finally {
      if (!committed) await trx.rollback().execute()
    }
    expect(await rowsOf('late-answer')).toEqual([{ id: winner.json.paymentId }])
  })

  it('prepared reads survive a migration that adds a payments column', async () => {
    const own = await createTestServer()
    try {
      const partnerKey = (await own.createKey('test')).apiKey
      const walletKey = (await own.createKey('test', 'wallet')).apiKey
      const merchant = await createMerchant(own, partnerKey)
      const paymentId = await createPayment(own, partnerKey, merchant)
      const readAll = async () => {
        const answers = await Promise.all(
          Array.from({ length: 12 }, (_, i) =>
            own.request(
              i % 2
                ? {
                    method: 'GET',
                    url: `/v1/gateway/payment/${paymentId}/status`,
                    headers: { 'api-key': walletKey },
                  }
                : {
                    method: 'GET',
                    url: `/v1/payments/${paymentId}/status`,
                    headers: headers(partnerKey, merchant),
                  },
            ),
          ),
        )
        return answers.map((r) => r.statusCode)
      }
      // Several rounds, so each pooled connection has the statements prepared.
      for (let i = 0; i < 3; i++) expect(await readAll()).toEqual(Array(12).fill(200))
      await sql`ALTER TABLE payments ADD COLUMN later_migration text`.execute(own.db)
      for (let i = 0; i < 3; i++) expect(await readAll()).toEqual(Array(12).fill(200))
    } finally {
      await own.close()
    }
  })

  it("an expired record or one left in flight is run again; another body's in-flight record is not", async () => {
    const k = idem()
    const first = await create(body('rerun'), { 'idempotency-key': k })
    await t.db
      .updateTable('idempotency_keys')
      .set({ state: 'in_flight', response_body: null, response_status: null })
      .where('key', '=', k)
      .execute()
    await t.db.deleteFrom('payments').where('id', '=', first.json.paymentId).execute()
    const conflicting = await create(body('rerun-other'), { 'idempotency-key': k })
    expect([conflicting.statusCode, conflicting.json.code]).toEqual([409, 'idempotency_conflict'])
    const retried = await create(body('rerun'), { 'idempotency-key': k })
    expect(retried.statusCode).toBe(201)
    expect(retried.headers['idempotent-replayed']).toBeUndefined()
    expect(retried.json.paymentId).not.toBe(first.json.paymentId)

    t.advanceTime(24 * 3600 * 1000 + 1000)
    const afterTtl = await create(body('rerun-other'), { 'idempotency-key': k })
    expect(afterTtl.statusCode).toBe(201)
    expect(afterTtl.headers['idempotent-replayed']).toBeUndefined()
    expect((await rowsOf('rerun-other')).map((r) => r.id)).toEqual([afterTtl.json.paymentId])
  })
})

describe('the fast-path switch', () => {
  it("buildApp's fastPaths option is the config every part is built from, the chain runtimes included", async () => {
    for (const fastPaths of [true, false]) {
      const server = await createTestServer({ fastPaths })
      try {
        expect(server.app.config.fastPaths).toBe(fastPaths)
      } finally {
        await server.close()
      }
    }
  })
})
