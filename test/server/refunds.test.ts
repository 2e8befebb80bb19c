import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startJobRunner } from '../../src/server/jobs/runner.js'
import { renderPaymentEvent } from '../../src/server/webhooks/payload.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers, idem, succeedPayment } from './helpers.js'

const baseUsdc = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'
const buyer = 'eip155:8453:0x1111111111111111111111111111111111111111'

let t: TestServer
let key: string
let merchantId: string

beforeAll(async () => {
  // No sandbox delay: the simulated transfer is due at once, and runJobs() makes it happen.
  t = await createTestServer({ config: { sandboxRefundDelayMs: 0 } })
  key = (await t.createKey('test')).apiKey
  merchantId = await createMerchant(t, key)
})
afterAll(() => t.close())

const refund = (body: Record<string, unknown>, extra: Record<string, string> = {}, merchant = merchantId) =>
  t.request({ method: 'POST', url: '/v1/refunds', headers: headers(key, merchant, extra), payload: body })
const get = (url: string, merchant = merchantId) =>
  t.request({ method: 'GET', url, headers: headers(key, merchant) })
const simulate = (refundId: string, outcome: string, apiKey = key) =>
  t.request({
    method: 'POST',
    url: `/v1/test/refunds/${refundId}/simulate`,
    headers: headers(apiKey, merchantId),
    payload: { outcome },
  })

/** Runs the refund jobs that are due (test mode's simulated transfers). */
async function runJobs(): Promise<void> {
  const runner = startJobRunner({ db: t.db, handlers: t.app.jobHandlers, intervalMs: 60_000 })
  while ((await runner.runOnce()) > 0) {}
  await runner.stop()
}

/** A succeeded payment paid with `paid` token units of Base USDC by `buyer`. */
async function paidPayment(value = '1250', paid = '12500000'): Promise<string> {
  const id = await createPayment(t, key, merchantId, {
    referenceId: 'refund-me',
    amount: { unit: 'iso4217/USD', value },
  })
  await succeedPayment(t, id)
  await t.db
    .updateTable('payments')
    .set({
      buyer,
      option_amount: JSON.stringify({
        unit: `caip19/${baseUsdc}`,
        value: paid,
        display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 },
      }),
    })
    .where('id', '=', id)
    .execute()
  return id
}

describe('POST /v1/refunds', () => {
  it('a full refund: 201 pending, then succeeded with test:<refundId>; the payment is refunded once', async () => {
    const id = await paidPayment()
    const res = await refund({ paymentId: id })
    expect(res.statusCode, res.body).toBe(201)
    expect(res.json).toEqual({
      refundId: expect.stringMatching(/^ref_[A-Za-z0-9]+$/),
      paymentId: id,
      status: 'pending',
      amount: { unit: 'iso4217/USD', value: '1250', display: expect.any(Object) },
      destination: buyer,
      reason: null,
      createdAt: expect.any(String),
    })
    // Pending already counts: a second full refund is refused at once.
    const again = await refund({ paymentId: id })
    expect([again.statusCode, again.json.code]).toEqual([409, 'already_refunded'])

    await runJobs()
    const read = await get(`/v1/refunds/${res.json.refundId}`)
    expect(read.json).toMatchObject({ status: 'succeeded', txId: `test:${res.json.refundId}` })
    const listed = await t.request({
      method: 'GET',
      url: '/v1/payments?referenceId=refund-me&limit=200',
      headers: headers(key),
    })
    expect(listed.statusCode, listed.body).toBe(200)
    expect(listed.json.data.find((p: { paymentId: string }) => p.paymentId === id).refunded).toBe(true)
    const row = await t.db
      .selectFrom('refunds')
      .selectAll()
      .where('id', '=', res.json.refundId)
      .executeTakeFirstOrThrow()
    expect(row).toMatchObject({ asset: baseUsdc, asset_value: '12500000', paid_from: 'float' })
  })

  it('partial refunds: each at most what remains; the last sends what is left of the paid asset, to the unit', async () => {
    const id = await paidPayment('1000', '999999')
    const part = (value: string) => refund({ paymentId: id, amount: { unit: 'iso4217/USD', value } })
    const a = await part('333')
    const b = await part('333')
    expect([a.statusCode, b.statusCode]).toEqual([201, 201])
    const over = await part('335')
    expect([over.statusCode, over.json.code]).toEqual([409, 'invalid_state'])
    expect(over.json.message).toMatch(/334/)
    const wrongUnit = await refund({ paymentId: id, amount: { unit: 'iso4217/EUR', value: '1' } })
    expect([wrongUnit.statusCode, wrongUnit.json.code]).toEqual([400, 'params_validation'])
    const rest = await refund({ paymentId: id, reason: 'the rest' })
    expect(rest.json).toMatchObject({ status: 'pending', amount: { value: '334' }, reason: 'the rest' })
    const values = await t.db
      .selectFrom('refunds')
      .select('asset_value')
      .where('payment_id', '=', id)
      .orderBy('created_at')
      .execute()
    expect(values.map((v) => v.asset_value).sort()).toEqual(['332999', '332999', '334001'])
    expect(values.reduce((sum, v) => sum + BigInt(v.asset_value!), 0n)).toBe(999999n)
    expect((await part('1')).json.code).toBe('already_refunded')

    // The payment is refunded only once every refund has succeeded.
    await simulate(a.json.refundId, 'succeeded')
    const payment = () =>
      t.db.selectFrom('payments').select('refunded_at').where('id', '=', id).executeTakeFirstOrThrow()
    expect((await payment()).refunded_at).toBeNull()
    await runJobs()
    expect((await payment()).refunded_at).not.toBeNull()
  })

  it('a destination on the paid chain only; the default is the payer', async () => {
    const id = await paidPayment()
    const other = 'eip155:8453:0x2222222222222222222222222222222222222222'
    const elsewhere = await refund({
      paymentId: id,
      destination: 'eip155:1:0x2222222222222222222222222222222222222222',
    })
    expect([elsewhere.statusCode, elsewhere.json.code]).toEqual([400, 'params_validation'])
    expect(elsewhere.json.message).toMatch(/eip155:8453/)
    const solana = await refund({
      paymentId: id,
      destination: 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM',
    })
    expect(solana.statusCode).toBe(400)
    const ok = await refund({
      paymentId: id,
      destination: other,
      amount: { unit: 'iso4217/USD', value: '1' },
    })
    expect([ok.statusCode, ok.json.destination]).toEqual([201, other])
    const tooSmall = await paidPayment('100000', '10')
    const dust = await refund({ paymentId: tooSmall, amount: { unit: 'iso4217/USD', value: '1' } })
    expect([dust.statusCode, dust.json.code]).toEqual([400, 'params_validation'])
  })

  it('only succeeded payments of this merchant, with valid ids', async () => {
    const waiting = await createPayment(t, key, merchantId)
    expect((await refund({ paymentId: waiting })).json.code).toBe('payment_not_succeeded')
    expect((await refund({ paymentId: 'pay_missing' })).json.code).toBe('payment_not_found')
    for (const bad of ['', 'x', 'pay_!', 42, `pay_${'a'.repeat(61)}`]) {
      const res = await refund({ paymentId: bad })
      expect([res.statusCode, res.json.code], String(bad)).toEqual([400, 'params_validation'])
    }
    for (const body of [
      { paymentId: waiting, amount: { unit: 'iso4217/USD', value: '0' } },
      { paymentId: waiting, amount: '5' },
      { paymentId: waiting, destination: 'nope' },
      { paymentId: waiting, reason: '' },
      { paymentId: waiting, extra: 1 },
    ]) {
      const res = await refund(body)
      expect([res.statusCode, res.json.code], JSON.stringify(body)).toEqual([400, 'params_validation'])
    }
    const otherMerchant = await createMerchant(t, key, {
      merchantName: 'Other',
      merchantEmail: 'o@example.com',
    })
    const mine = await paidPayment()
    expect((await refund({ paymentId: mine }, {}, otherMerchant)).json.code).toBe('payment_not_found')
    const made = await refund({ paymentId: mine, amount: { unit: 'iso4217/USD', value: '5' } })
    expect((await get(`/v1/refunds/${made.json.refundId}`, otherMerchant)).json.code).toBe('refund_not_found')
    expect((await get('/v1/refunds/ref_missing')).statusCode).toBe(404)
    expect((await get('/v1/refunds/nope')).statusCode).toBe(400)
  })

  it('parallel refunds never add up to more than was paid (row lock), and one full refund wins', async () => {
    const id = await paidPayment('1250')
    const parts = await Promise.all(
      Array.from({ length: 30 }, () =>
        refund({ paymentId: id, amount: { unit: 'iso4217/USD', value: '100' } }),
      ),
    )
    expect(parts.filter((r) => r.statusCode === 201)).toHaveLength(12)
    for (const r of parts.filter((r) => r.statusCode !== 201)) expect(r.json.code).toBe('invalid_state')
    const fulls = await Promise.all(Array.from({ length: 10 }, () => refund({ paymentId: id })))
    expect(fulls.filter((r) => r.statusCode === 201).map((r) => r.json.amount.value)).toEqual(['50'])
    for (const r of fulls.filter((r) => r.statusCode !== 201)) expect(r.json.code).toBe('already_refunded')
    const total = await t.db
      .selectFrom('refunds')
      .select((eb) => eb.fn.sum<string>('amount_value').as('sum'))
      .where('payment_id', '=', id)
      .executeTakeFirstOrThrow()
    expect(total.sum).toBe('1250')
  })

  it('the database itself refuses refunds beyond the payment, whoever writes them', async () => {
    const id = await paidPayment('100')
    const made = await refund({ paymentId: id })
    const row = await t.db
      .selectFrom('refunds')
      .selectAll()
      .where('id', '=', made.json.refundId)
      .executeTakeFirstOrThrow()
    await expect(
      t.db
        .insertInto('refunds')
        .values({ ...row, id: 'ref_sneaky', amount_value: '1' })
        .execute(),
    ).rejects.toMatchObject({ code: '23514' })
  })

  it('Idempotency-Key: a replay answers the same refund; a refusal is replayed as well', async () => {
    const id = await paidPayment()
    const k = idem()
    const first = await refund(
      { paymentId: id, amount: { unit: 'iso4217/USD', value: '10' } },
      { 'idempotency-key': k },
    )
    const replay = await refund(
      { paymentId: id, amount: { unit: 'iso4217/USD', value: '10' } },
      { 'idempotency-key': k },
    )
    expect([first.statusCode, replay.statusCode, replay.headers['idempotent-replayed']]).toEqual([
      201,
      201,
      'true',
    ])
    expect(replay.json.refundId).toBe(first.json.refundId)
    const other = await refund(
      { paymentId: id, amount: { unit: 'iso4217/USD', value: '11' } },
      { 'idempotency-key': k },
    )
    expect([other.statusCode, other.json.code]).toEqual([409, 'idempotency_conflict'])
    expect(await t.db.selectFrom('refunds').select('id').where('payment_id', '=', id).execute()).toHaveLength(
      1,
    )

    const waiting = await createPayment(t, key, merchantId)
    const k2 = idem()
    const refused = await refund({ paymentId: waiting }, { 'idempotency-key': k2 })
    await succeedPayment(t, waiting)
    const again = await refund({ paymentId: waiting }, { 'idempotency-key': k2 })
    expect([again.statusCode, again.body]).toEqual([400, refused.body])
  })
})

describe('test mode: the simulated transfer and its forced outcomes', () => {
  it('simulate failed: failureCode transfer_failed, the amount refundable again; a final refund refuses', async () => {
    const id = await paidPayment()
    const made = await refund({ paymentId: id })
    const failed = await simulate(made.json.refundId, 'failed')
    expect(failed.json).toMatchObject({ status: 'failed', failureCode: 'transfer_failed' })
    expect(failed.json.txId).toBeUndefined()
    await runJobs()
    expect((await get(`/v1/refunds/${made.json.refundId}`)).json.status).toBe('failed')
    const again = await simulate(made.json.refundId, 'succeeded')
    expect([again.statusCode, again.json.code]).toEqual([409, 'invalid_state'])
    const retry = await refund({ paymentId: id })
    expect([retry.statusCode, retry.json.amount.value]).toEqual([201, '1250'])
    const ok = await simulate(retry.json.refundId, 'succeeded')
    expect(ok.json).toMatchObject({ status: 'succeeded', txId: `test:${retry.json.refundId}` })
    const live = (await t.createKey('live')).apiKey
    const liveMerchant = await createMerchant(t, live)
    const refused = await t.request({
      method: 'POST',
      url: `/v1/test/refunds/${retry.json.refundId}/simulate`,
      headers: headers(live, liveMerchant),
      payload: { outcome: 'failed' },
    })
    expect([refused.statusCode, refused.json.code]).toEqual([403, 'not_sandbox_api_key'])
  })

  it('the events: refund.created, refund.succeeded and payment.refunded, each a version of the payment', async () => {
    const id = await paidPayment('1000', '1000')
    const half = { unit: 'iso4217/USD', value: '500' }
    const a = await refund({ paymentId: id, amount: half })
    const b = await refund({ paymentId: id, amount: half })
    await simulate(b.json.refundId, 'failed')
    const c = await refund({ paymentId: id })
    await runJobs()
    const events = await t.db
      .selectFrom('payment_events')
      .selectAll()
      .where('payment_id', '=', id)
      .orderBy('payment_state_version')
      .execute()
    expect(events.map((e) => e.type).slice(3)).toEqual([
      'refund.created',
      'refund.created',
      'refund.failed',
      'refund.created',
      'refund.succeeded',
      'refund.succeeded',
      'payment.refunded',
    ])
    const succeeded = events.filter((e) => e.type === 'refund.succeeded')
    expect(succeeded.map((e) => e.snapshot.id).sort()).toEqual([a.json.refundId, c.json.refundId].sort())
    const body = JSON.parse(renderPaymentEvent(succeeded[0]!))
    expect(body).toMatchObject({ type: 'refund.succeeded', api_version: expect.any(String) })
    expect(body.data).toEqual({
      refund_id: succeeded[0]!.snapshot.id,
      payment_id: id,
      merchant_id: merchantId,
      live: false,
      payment_state_version: succeeded[0]!.payment_state_version,
      status: 'succeeded',
      amount: { unit: 'iso4217/USD', value: '500' },
      asset_amount: { unit: `caip19/${baseUsdc}`, value: '500' },
      destination: buyer,
      reason: null,
      tx_id: `test:${succeeded[0]!.snapshot.id}`,
      failure_code: null,
      created_at: expect.any(String),
      succeeded_at: expect.any(String),
      failed_at: null,
    })
  })
})

describe('GET /v1/refunds', () => {
  it("lists one payment's refunds newest first with cursor pages, or the merchant's", async () => {
    const id = await paidPayment('1000')
    const made: string[] = []
    for (let i = 0; i < 5; i++) {
      const res = await refund({ paymentId: id, amount: { unit: 'iso4217/USD', value: '10' } })
      made.push(res.json.refundId)
    }
    const seen: string[] = []
    let cursor: string | null = null
    do {
      const res = await get(`/v1/refunds?paymentId=${id}&limit=2${cursor ? `&cursor=${cursor}` : ''}`)
      expect(res.statusCode, res.body).toBe(200)
      seen.push(...res.json.data.map((r: { refundId: string }) => r.refundId))
      cursor = res.json.nextCursor
    } while (cursor)
    expect(seen).toEqual([...made].reverse())
    const all = await get('/v1/refunds?limit=100')
    expect(all.json.data.length).toBeGreaterThan(5)
    expect((await get('/v1/refunds?paymentId=nope')).statusCode).toBe(400)
    expect((await get('/v1/refunds?cursor=!!')).statusCode).toBe(400)
  })
})

describe('two partners', () => {
  it("never see each other's refunds", async () => {
    const otherPartner = await t.createPartner()
    const otherKey = (await t.createKey('test', 'partner', otherPartner)).apiKey
    const otherMerchant = await createMerchant(t, otherKey)
    const id = await paidPayment()
    const made = await refund({ paymentId: id, amount: { unit: 'iso4217/USD', value: '1' } })
    const asOther = (url: string) =>
      t.request({ method: 'GET', url, headers: headers(otherKey, otherMerchant) })
    expect((await asOther(`/v1/refunds/${made.json.refundId}`)).json.code).toBe('refund_not_found')
    expect((await asOther(`/v1/refunds?paymentId=${id}`)).json.data).toEqual([])
    const stolen = await t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(otherKey, otherMerchant),
      payload: { paymentId: id },
    })
    expect(stolen.json.code).toBe('payment_not_found')
    // Another partner's merchant id with my key: refused before anything runs.
    const crossed = await t.request({
      method: 'GET',
      url: '/v1/refunds',
      headers: headers(key, otherMerchant),
    })
    expect(crossed.statusCode).toBeGreaterThanOrEqual(400)
    await sql`SELECT 1`.execute(t.db)
  })
})
