import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers, idem } from './helpers.js'

let t: TestServer
let key: string

beforeAll(async () => {
  t = await createTestServer()
  key = (await t.createKey('test')).apiKey
})
afterAll(() => t.close())

const create = (body: unknown, idempotencyKey: string | null = idem(), apiKey = key) =>
  t.request({
    method: 'POST',
    url: '/v1/merchants',
    headers: { 'api-key': apiKey, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
    payload: body as object,
  })

describe('POST /v1/merchants (row 2)', () => {
  it('creates a merchant with the documented shape', async () => {
    const res = await create({
      merchantName: ' Coffee ',
      merchantEmail: 'c@example.com',
      iconUrl: 'https://x.example/i.png',
    })
    expect(res.statusCode, res.body).toBe(201)
    expect(res.json.merchant).toMatchObject({
      name: 'Coffee',
      email: 'c@example.com',
      iconUrl: 'https://x.example/i.png',
      status: 'active',
      settlements: { crypto: [], fiat: [] },
    })
    expect(res.json.merchant.id).toMatch(/^mrch_[A-Za-z0-9]+$/)
    expect(new Date(res.json.merchant.createdAt).toISOString()).toBe(res.json.merchant.createdAt)
  })

  it('requires Idempotency-Key: 400 invalid_params', async () => {
    const res = await create({ merchantName: 'A', merchantEmail: 'a@example.com' }, null)
    expect(res.statusCode).toBe(400)
    expect(res.json.code).toBe('invalid_params')
  })

  it('rejects an Idempotency-Key over 255 characters', async () => {
    const res = await create({ merchantName: 'A', merchantEmail: 'a@example.com' }, 'k'.repeat(256))
    expect(res.statusCode).toBe(400)
    expect(res.json.code).toBe('invalid_params')
  })

  it('validates the body: 400 params_validation with issues', async () => {
    for (const body of [
      {},
      { merchantName: '', merchantEmail: 'a@example.com' },
      { merchantName: 'A', merchantEmail: 'not-an-email' },
      { merchantName: 'A', merchantEmail: 'a@example.com', iconUrl: 'http://insecure.example/i.png' },
      { merchantName: 'A'.repeat(257), merchantEmail: 'a@example.com' },
      { merchantName: 'A', merchantEmail: 'a@example.com', extra: 1 },
      { merchantName: 42, merchantEmail: 'a@example.com' },
    ]) {
      const res = await create(body)
      expect(res.statusCode, JSON.stringify(body)).toBe(400)
      expect(res.json.code).toBe('params_validation')
      expect(res.json.issues.length).toBeGreaterThan(0)
      for (const issue of res.json.issues) {
        expect(issue.path).toMatch(/^body/)
        expect(typeof issue.message).toBe('string')
      }
    }
  })

  it('replays with the same key and creates nothing new', async () => {
    const k = idem()
    const body = { merchantName: 'Replay', merchantEmail: 'r@example.com' }
    const first = await create(body, k)
    const second = await create(body, k)
    expect(first.statusCode).toBe(201)
    expect(second.statusCode).toBe(201)
    expect(second.headers['idempotent-replayed']).toBe('true')
    expect(first.headers['idempotent-replayed']).toBeUndefined()
    expect(second.json).toEqual(first.json)
    const count = await t.db.selectFrom('merchants').select('id').where('name', '=', 'Replay').execute()
    expect(count).toHaveLength(1)
  })

  it('same key, different body: 409 idempotency_conflict', async () => {
    const k = idem()
    expect((await create({ merchantName: 'One', merchantEmail: 'o@example.com' }, k)).statusCode).toBe(201)
    const res = await create({ merchantName: 'Two', merchantEmail: 'o@example.com' }, k)
    expect(res.statusCode).toBe(409)
    expect(res.json.code).toBe('idempotency_conflict')
  })

  it('50 concurrent identical requests create exactly one merchant', async () => {
    const k = idem()
    const body = { merchantName: 'Concurrent', merchantEmail: 'c@example.com' }
    const results = await Promise.all(Array.from({ length: 50 }, () => create(body, k)))
    const rows = await t.db.selectFrom('merchants').select('id').where('name', '=', 'Concurrent').execute()
    expect(rows).toHaveLength(1)
    const created = results.filter((r) => r.statusCode === 201)
    expect(created.length).toBeGreaterThanOrEqual(1)
    for (const r of results) {
      if (r.statusCode === 201) expect(r.json.merchant.id).toBe(rows[0]!.id)
      else {
        expect(r.statusCode).toBe(409)
        expect(r.json.code).toBe('idempotency_conflict')
      }
    }
    expect(created.filter((r) => r.headers['idempotent-replayed'] !== 'true')).toHaveLength(1)
  })

  it('a key left in flight by a crashed request is run again by the next one', async () => {
    const k = idem()
    const body = { merchantName: 'Crashed', merchantEmail: 'c@example.com' }
    const first = await create(body, k)
    // What a crash leaves: the record row committed, the handler's transaction rolled back.
    await t.db
      .updateTable('idempotency_keys')
      .set({ state: 'in_flight', response_body: null, response_status: null })
      .where('key', '=', k)
      .execute()
    await t.db.deleteFrom('merchants').where('id', '=', first.json.merchant.id).execute()
    const retry = await create(body, k)
    expect(retry.statusCode).toBe(201)
    expect(retry.headers['idempotent-replayed']).toBeUndefined()
    const replay = await create(body, k)
    expect(replay.headers['idempotent-replayed']).toBe('true')
    expect(replay.json.merchant.id).toBe(retry.json.merchant.id)
  })

  it('does not store validation failures under the key', async () => {
    const k = idem()
    expect((await create({ merchantName: '' }, k)).statusCode).toBe(400)
    const ok = await create({ merchantName: 'Later', merchantEmail: 'l@example.com' }, k)
    expect(ok.statusCode).toBe(201)
    expect(ok.headers['idempotent-replayed']).toBeUndefined()
  })

  it('scopes keys to (partner, mode)', async () => {
    const k = idem()
    const body = { merchantName: 'Scoped', merchantEmail: 's@example.com' }
    const live = (await t.createKey('live')).apiKey
    const other = (await t.createKey('test', 'partner', await t.createPartner())).apiKey
    const a = await create(body, k, key)
    const b = await create(body, k, live)
    const c = await create(body, k, other)
    for (const r of [a, b, c]) {
      expect(r.statusCode).toBe(201)
      expect(r.headers['idempotent-replayed']).toBeUndefined()
    }
    expect(new Set([a.json.merchant.id, b.json.merchant.id, c.json.merchant.id]).size).toBe(3)
  })

  it('a key lives 24 hours', async () => {
    const k = idem()
    const body = { merchantName: 'Ttl', merchantEmail: 't@example.com' }
    const first = await create(body, k)
    t.advanceTime(23 * 3600 * 1000)
    const replay = await create(body, k)
    expect(replay.headers['idempotent-replayed']).toBe('true')
    t.advanceTime(2 * 3600 * 1000)
    const fresh = await create(body, k)
    expect(fresh.statusCode).toBe(201)
    expect(fresh.headers['idempotent-replayed']).toBeUndefined()
    expect(fresh.json.merchant.id).not.toBe(first.json.merchant.id)
  })
})

describe('GET /v1/merchants (row 1)', () => {
  let partnerKey: string
  const ids: string[] = []
  beforeAll(async () => {
    partnerKey = (await t.createKey('test', 'partner', await t.createPartner())).apiKey
    for (let i = 0; i < 7; i++) {
      ids.push(
        await createMerchant(t, partnerKey, {
          merchantName: `Store ${i} ${i % 2 ? 'Alpha' : 'Beta'}`,
          merchantEmail: `m${i}@example.com`,
        }),
      )
    }
  })
  const list = (query = '') =>
    t.request({ method: 'GET', url: `/v1/merchants${query}`, headers: headers(partnerKey) })

  it('lists newest first with nextCursor null on the last page', async () => {
    const res = await list()
    expect(res.statusCode).toBe(200)
    expect(res.json.data.map((m: { id: string }) => m.id)).toEqual([...ids].reverse())
    expect(res.json.nextCursor).toBeNull()
  })

  it('paginates with keyset cursors across pages', async () => {
    const seen: string[] = []
    let cursor: string | null = null
    let pages = 0
    do {
      const res = await list(`?limit=3${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`)
      expect(res.statusCode, res.body).toBe(200)
      expect(res.json.data.length).toBeLessThanOrEqual(3)
      seen.push(...res.json.data.map((m: { id: string }) => m.id))
      cursor = res.json.nextCursor
      pages += 1
    } while (cursor)
    expect(pages).toBe(3)
    expect(seen).toEqual([...ids].reverse())
  })

  it('limit out of bounds or not an integer: 400 params_validation', async () => {
    for (const q of ['?limit=0', '?limit=101', '?limit=1.5', '?limit=abc', '?limit=-1']) {
      const res = await list(q)
      expect(res.statusCode, q).toBe(400)
      expect(res.json.code).toBe('params_validation')
      expect(res.json.issues[0].path).toBe('query.limit')
    }
    expect((await list('?limit=100')).statusCode).toBe(200)
  })

  it('rejects a forged cursor', async () => {
    const res = await list('?cursor=not-a-cursor')
    expect(res.statusCode).toBe(400)
    expect(res.json.code).toBe('params_validation')
  })

  it('searches name and id case-insensitively', async () => {
    const alpha = await list('?search=alpha')
    expect(alpha.json.data).toHaveLength(3)
    const byId = await list(`?search=${ids[2]!.slice(5, 15).toLowerCase()}`)
    expect(byId.json.data.map((m: { id: string }) => m.id)).toContain(ids[2])
    const literal = await list('?search=%25')
    expect(literal.json.data).toHaveLength(0)
  })

  it('filters by status and rejects unknown statuses', async () => {
    expect((await list('?status=active')).json.data).toHaveLength(7)
    expect((await list('?status=suspended')).json.data).toHaveLength(0)
    const bad = await list('?status=deleted')
    expect(bad.statusCode).toBe(400)
    expect(bad.json.code).toBe('params_validation')
  })

  it('rejects unknown query parameters', async () => {
    const res = await list('?colour=red')
    expect(res.statusCode).toBe(400)
    expect(res.json.code).toBe('params_validation')
  })

  it('returns an empty array for a partner without merchants', async () => {
    const fresh = (await t.createKey('test', 'partner', await t.createPartner())).apiKey
    const res = await t.request({ method: 'GET', url: '/v1/merchants', headers: headers(fresh) })
    expect(res.json).toEqual({ data: [], nextCursor: null })
  })
})

describe('GET/PATCH/DELETE /v1/merchants/:id (rows 3-5)', () => {
  it('reads a merchant with its settlements', async () => {
    const id = await createMerchant(t, key)
    await t.request({
      method: 'POST',
      url: `/v1/merchants/${id}/settlements/crypto`,
      headers: { 'api-key': key, 'idempotency-key': idem() },
      payload: {
        settlements: [
          {
            asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
            destination: 'eip155:8453:0x1111111111111111111111111111111111111111',
          },
        ],
      },
    })
    const res = await t.request({ method: 'GET', url: `/v1/merchants/${id}`, headers: headers(key) })
    expect(res.statusCode).toBe(200)
    expect(res.json.merchant.id).toBe(id)
    expect(res.json.merchant.settlements.fiat).toEqual([])
    expect(res.json.merchant.settlements.crypto).toHaveLength(1)
    expect(res.json.merchant.settlements.crypto[0].id).toMatch(/^crypto_/)
  })

  it('unknown merchant: 404 merchant_not_found', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/merchants/mrch_unknown', headers: headers(key) })
    expect(res.statusCode).toBe(404)
    expect(res.json.code).toBe('merchant_not_found')
  })

  it('patches fields; null unsets the icon; an empty body is refused', async () => {
    const id = await createMerchant(t, key, {
      merchantName: 'Old',
      merchantEmail: 'o@example.com',
      iconUrl: 'https://i.example/a.png',
    })
    const patch = (payload: object) =>
      t.request({ method: 'PATCH', url: `/v1/merchants/${id}`, headers: headers(key), payload })
    const renamed = await patch({ merchantName: 'New' })
    expect(renamed.statusCode, renamed.body).toBe(200)
    expect(renamed.json.merchant).toMatchObject({
      name: 'New',
      email: 'o@example.com',
      iconUrl: 'https://i.example/a.png',
    })
    const unset = await patch({ iconUrl: null, merchantEmail: 'n@example.com' })
    expect(unset.json.merchant).toMatchObject({ name: 'New', email: 'n@example.com', iconUrl: null })
    const empty = await patch({})
    expect(empty.statusCode).toBe(400)
    expect(empty.json.code).toBe('params_validation')
    const unknown = await t.request({
      method: 'PATCH',
      url: '/v1/merchants/mrch_x',
      headers: headers(key),
      payload: { merchantName: 'x' },
    })
    expect(unknown.statusCode).toBe(404)
  })

  it('soft-deletes idempotently, hides the merchant and refuses its payments', async () => {
    const id = await createMerchant(t, key)
    const paymentId = await createPayment(t, key, id)
    const del = () => t.request({ method: 'DELETE', url: `/v1/merchants/${id}`, headers: headers(key) })
    const first = await del()
    expect(first.statusCode).toBe(200)
    expect(first.json).toEqual({ id, deleted: true })
    expect((await del()).json).toEqual({ id, deleted: true })
    const list = await t.request({ method: 'GET', url: '/v1/merchants?limit=100', headers: headers(key) })
    expect(list.json.data.map((m: { id: string }) => m.id)).not.toContain(id)
    const read = await t.request({ method: 'GET', url: `/v1/merchants/${id}`, headers: headers(key) })
    expect(read.statusCode).toBe(404)
    const pay = await t.request({
      method: 'POST',
      url: '/v1/payments',
      headers: headers(key, id),
      payload: { referenceId: 'x', amount: { unit: 'iso4217/USD', value: '100' } },
    })
    expect(pay.statusCode).toBe(404)
    expect(pay.json.code).toBe('merchant_not_found')
    const row = await t.db
      .selectFrom('merchants')
      .select('deleted_at')
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    expect(row.deleted_at).not.toBeNull()
    expect(
      await t.db.selectFrom('payments').select('id').where('id', '=', paymentId).executeTakeFirst(),
    ).toBeDefined()
    const missing = await t.request({
      method: 'DELETE',
      url: '/v1/merchants/mrch_missing',
      headers: headers(key),
    })
    expect(missing.statusCode).toBe(404)
    expect(missing.json.code).toBe('merchant_not_found')
  })
})
