import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Fetch } from '../../src/client/http.js'
import { createMerchantClient } from '../../src/client/merchant.js'
import { startJobRunner } from '../../src/server/jobs/runner.js'
import { captureExpiryJobKind, capturePayment, voidPayment } from '../../src/server/payments/capture.js'
import { renderPaymentEvent } from '../../src/server/webhooks/payload.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, headers, idem } from './helpers.js'

let t: TestServer
let key: string
let merchantId: string

beforeAll(async () => {
  t = await createTestServer({
    config: { sandboxRefundDelayMs: 0, capture: { defaultHoldSeconds: 3600, maxHoldSeconds: 86_400 } },
  })
  key = (await t.createKey('test')).apiKey
  merchantId = await createMerchant(t, key)
})
afterAll(() => t.close())

const post = (url: string, payload?: unknown, extra: Record<string, string> = {}) =>
  t.request({
    method: 'POST',
    url,
    headers: headers(key, merchantId, extra),
    ...(payload ? { payload } : {}),
  })
const get = (url: string) => t.request({ method: 'GET', url, headers: headers(key, merchantId) })
const nowS = () => Math.floor(Date.now() / 1000)

async function runJobs(): Promise<void> {
  const runner = startJobRunner({ db: t.db, handlers: t.app.jobHandlers, intervalMs: 60_000 })
  while ((await runner.runOnce()) > 0) {}
  await runner.stop()
}

/** A manual-capture payment of 10.00 USD, paid in the sandbox: held (authorized). */
async function heldPayment(body: Record<string, unknown> = {}): Promise<string> {
  const created = await post('/v1/payments', {
    referenceId: 'hold-me',
    amount: { unit: 'iso4217/USD', value: '1000' },
    capture: 'manual',
    ...body,
  })
  expect(created.statusCode, created.body).toBe(201)
  const id = created.json.paymentId as string
  const paid = await post(`/v1/test/payments/${id}/simulate`, { outcome: 'succeeded' })
  expect(paid.statusCode, paid.body).toBe(200)
  return id
}

const events = async (paymentId: string) =>
  (
    await t.db
      .selectFrom('payment_events')
      .select(['type', 'snapshot'])
      .where('payment_id', '=', paymentId)
      .orderBy('payment_state_version')
      .execute()
  ).map((e) => e.type)

describe('manual capture (test mode)', () => {
  it('creates with captureBy defaulted from config; refuses a captureBy beyond the maximum or before expiry', async () => {
    const created = await post('/v1/payments', {
      referenceId: 'm-1',
      amount: { unit: 'iso4217/USD', value: '100' },
      capture: 'manual',
    })
    expect(created.statusCode, created.body).toBe(201)
    const read = await get(`/v1/payments/${created.json.paymentId}`)
    expect(read.json).toMatchObject({ status: 'requires_action', captureMethod: 'manual', capture: null })
    const row = await t.db
      .selectFrom('payments')
      .select(['capture_by', 'created_at'])
      .where('id', '=', created.json.paymentId)
      .executeTakeFirstOrThrow()
    // captureBy is whole seconds; creation has milliseconds.
    expect(Math.abs((row.capture_by!.getTime() - row.created_at.getTime()) / 1000 - 3600)).toBeLessThan(1)

    const far = await post('/v1/payments', {
      referenceId: 'm-2',
      amount: { unit: 'iso4217/USD', value: '100' },
      capture: 'manual',
      captureBy: nowS() + 86_400 + 60,
    })
    expect([far.statusCode, far.json.code]).toEqual([400, 'params_validation'])
    expect(far.body).toMatch(/86400 seconds/)
    const early = await post('/v1/payments', {
      referenceId: 'm-3',
      amount: { unit: 'iso4217/USD', value: '100' },
      capture: 'manual',
      expiresAt: nowS() + 600,
      captureBy: nowS() + 300,
    })
    expect([early.statusCode, early.json.code]).toEqual([400, 'params_validation'])
    const automatic = await post('/v1/payments', {
      referenceId: 'm-4',
      amount: { unit: 'iso4217/USD', value: '100' },
      captureBy: nowS() + 3000,
    })
    expect([automatic.statusCode, automatic.json.code]).toEqual([400, 'params_validation'])
  })

  it('paid: succeeded with capture authorized and payment.authorized; nothing settles; capture all', async () => {
    const id = await heldPayment()
    const read = await get(`/v1/payments/${id}`)
    expect(read.json).toMatchObject({
      status: 'succeeded',
      captureMethod: 'manual',
      capture: {
        status: 'authorized',
        authorizedAmount: { unit: 'iso4217/USD', value: '1000' },
        capturedAmount: null,
      },
    })
    expect(await events(id)).toEqual([
      'payment.created',
      'payment.processing',
      'payment.succeeded',
      'payment.authorized',
    ])
    const captured = await post(`/v1/payments/${id}/capture`, {}, { 'idempotency-key': idem() })
    expect(captured.statusCode, captured.body).toBe(200)
    expect(captured.json.capture).toMatchObject({
      status: 'captured',
      capturedAmount: { unit: 'iso4217/USD', value: '1000' },
    })
    const again = await post(`/v1/payments/${id}/capture`)
    expect(again.json).toMatchObject({ code: 'invalid_state' })
    expect(again.statusCode).toBe(409)
    expect(again.json.message).toMatch(/captured/)
    const voided = await post(`/v1/payments/${id}/void`)
    expect([voided.statusCode, voided.json.code]).toEqual([409, 'invalid_state'])
    const refunds = await get(`/v1/refunds?paymentId=${id}`)
    expect(refunds.json.data).toEqual([])
    expect((await events(id)).at(-1)).toBe('payment.captured')
  })

  it('partial capture: the rest is refunded to the buyer (a refund from the authorized funds)', async () => {
    const id = await heldPayment()
    const over = await post(`/v1/payments/${id}/capture`, { amount: { unit: 'iso4217/USD', value: '1001' } })
    expect([over.statusCode, over.json.code]).toEqual([400, 'params_validation'])
    const res = await post(`/v1/payments/${id}/capture`, { amount: { unit: 'iso4217/USD', value: '600' } })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json.capture).toMatchObject({ status: 'partially_captured', capturedAmount: { value: '600' } })
    const refunds = await get(`/v1/refunds?paymentId=${id}`)
    expect(refunds.json.data).toHaveLength(1)
    expect(refunds.json.data[0]).toMatchObject({
      status: 'pending',
      amount: { value: '400' },
      reason: 'uncaptured',
    })
    const row = await t.db
      .selectFrom('refunds')
      .select(['paid_from', 'asset_value'])
      .where('payment_id', '=', id)
      .executeTakeFirstOrThrow()
    expect(row.paid_from).toBe('authorized')
    const payment = await t.db
      .selectFrom('payments')
      .select('option_amount')
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    const paidToken = BigInt(payment.option_amount!.value)
    expect(BigInt(row.asset_value!)).toBe(paidToken - (paidToken * 600n) / 1000n)
    await runJobs()
    expect((await get(`/v1/refunds?paymentId=${id}`)).json.data[0].status).toBe('succeeded')
    // Refunds of the captured part work as before: at most what was captured.
    const tooMuch = await post('/v1/refunds', {
      paymentId: id,
      amount: { unit: 'iso4217/USD', value: '601' },
    })
    expect([tooMuch.statusCode, tooMuch.json.code]).toEqual([409, 'invalid_state'])
    const rest = await post('/v1/refunds', { paymentId: id })
    expect(rest.statusCode, rest.body).toBe(201)
    expect(rest.json.amount.value).toBe('600')
  })

  it('void: everything refunded; a refund of a held payment is its void; the webhook carries capture', async () => {
    const id = await heldPayment()
    const res = await post(`/v1/payments/${id}/void`, undefined, { 'idempotency-key': 'void-1' })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json.capture).toMatchObject({ status: 'voided', capturedAmount: null })
    const replay = await post(`/v1/payments/${id}/void`, undefined, { 'idempotency-key': 'void-1' })
    expect(replay.statusCode).toBe(200)
    expect(replay.headers['idempotent-replayed']).toBe('true')
    const refunds = (await get(`/v1/refunds?paymentId=${id}`)).json.data
    expect(refunds).toHaveLength(1)
    expect(refunds[0].amount.value).toBe('1000')
    const capture = await post(`/v1/payments/${id}/capture`)
    expect([capture.statusCode, capture.json.code]).toEqual([409, 'invalid_state'])

    const other = await heldPayment()
    const part = await post('/v1/refunds', { paymentId: other, amount: { unit: 'iso4217/USD', value: '10' } })
    expect([part.statusCode, part.json.code]).toEqual([409, 'invalid_state'])
    const whole = await post('/v1/refunds', { paymentId: other })
    expect(whole.statusCode, whole.body).toBe(201)
    expect(whole.json.amount.value).toBe('1000')
    expect((await get(`/v1/payments/${other}`)).json.capture.status).toBe('voided')

    const event = await t.db
      .selectFrom('payment_events')
      .select(['id', 'type', 'created_at', 'snapshot'])
      .where('payment_id', '=', id)
      .where('type', '=', 'payment.voided')
      .executeTakeFirstOrThrow()
    const payload = JSON.parse(renderPaymentEvent(event as never))
    expect(payload.data.capture).toMatchObject({
      status: 'voided',
      authorized_amount: { unit: 'iso4217/USD', value: '1000' },
      captured_amount: null,
    })
  })

  it('an automatic payment cannot be captured or voided; an unpaid one not yet', async () => {
    const created = await post('/v1/payments', {
      referenceId: 'auto',
      amount: { unit: 'iso4217/USD', value: '100' },
    })
    const id = created.json.paymentId
    const capture = await post(`/v1/payments/${id}/capture`)
    expect([capture.statusCode, capture.json.code], capture.body).toEqual([409, 'invalid_state'])
    expect(capture.json.message).toMatch(/automatically/)
    const manual = await post('/v1/payments', {
      referenceId: 'unpaid',
      amount: { unit: 'iso4217/USD', value: '100' },
      capture: 'manual',
    })
    const early = await post(`/v1/payments/${manual.json.paymentId}/void`)
    expect([early.statusCode, early.json.code]).toEqual([409, 'invalid_state'])
    expect(early.json.message).toMatch(/once paid/)
    const missing = await post('/v1/payments/pay_doesnotexist/capture')
    expect([missing.statusCode, missing.json.code]).toEqual([404, 'payment_not_found'])
  })

  it('captureBy passed: the expiry job voids it (expired); a capture then is refused', async () => {
    const id = await heldPayment({ expiresAt: nowS() + 2, captureBy: nowS() + 3 })
    await new Promise((resolve) => setTimeout(resolve, 3100))
    const late = await post(`/v1/payments/${id}/capture`)
    expect([late.statusCode, late.json.code]).toEqual([409, 'invalid_state'])
    expect(late.json.message).toMatch(/captureBy has passed/)
    await runJobs()
    const read = await get(`/v1/payments/${id}`)
    expect(read.json.capture.status).toBe('expired')
    const refunds = (await get(`/v1/refunds?paymentId=${id}`)).json.data
    expect(refunds).toMatchObject([
      { status: 'succeeded', amount: { value: '1000' }, reason: 'capture_expired' },
    ])
    expect(await events(id)).toContain('payment.voided')
  })

  it('20 concurrent captures and voids: exactly one wins, one refund at most', async () => {
    const id = await heldPayment()
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        i % 2 === 0
          ? post(`/v1/payments/${id}/capture`, { amount: { unit: 'iso4217/USD', value: '500' } })
          : post(`/v1/payments/${id}/void`),
      ),
    )
    const won = answers.filter((a) => a.statusCode === 200)
    expect(won).toHaveLength(1)
    expect(answers.filter((a) => a.statusCode === 409)).toHaveLength(19)
    const refunds = (await get(`/v1/refunds?paymentId=${id}`)).json.data
    expect(refunds).toHaveLength(1)
    const types = await events(id)
    expect(types.filter((type) => type === 'payment.captured' || type === 'payment.voided')).toHaveLength(1)
  })

  it('a void whose money cannot go back (transfer_failed): held again, authorized; voided again, it goes', async () => {
    const other = await heldPayment()
    const voided = await post(`/v1/payments/${other}/void`)
    expect(voided.json.capture).toMatchObject({
      status: 'voided',
      heldAmount: { value: '0' },
      failureCode: null,
    })
    const [pending] = (await get(`/v1/refunds?paymentId=${other}`)).json.data
    // The expiry job runs early (skipped: nothing held) and finishes; then the transfer fails for good.
    await t.db
      .updateTable('jobs')
      .set({ run_at: new Date() })
      .where('payment_id', '=', other)
      .where('kind', '=', captureExpiryJobKind)
      .execute()
    const runner = startJobRunner({
      db: t.db,
      handlers: { [captureExpiryJobKind]: t.app.jobHandlers[captureExpiryJobKind]! },
      intervalMs: 60_000,
    })
    while ((await runner.runOnce()) > 0) {}
    await runner.stop()
    const skipped = await t.db
      .selectFrom('jobs')
      .select(['state'])
      .where('payment_id', '=', other)
      .where('kind', '=', captureExpiryJobKind)
      .executeTakeFirstOrThrow()
    expect(skipped.state).toBe('succeeded')
    const failed = await post(`/v1/test/refunds/${pending.refundId}/simulate`, { outcome: 'failed' })
    expect(failed.json).toMatchObject({ status: 'failed', failureCode: 'transfer_failed' })

    const held = (await get(`/v1/payments/${other}`)).json
    expect(held.capture).toMatchObject({
      status: 'authorized',
      capturedAmount: null,
      heldAmount: { value: '1000' },
      failureCode: 'transfer_failed',
    })
    expect((await events(other)).slice(-4)).toEqual([
      'payment.voided',
      'refund.created',
      'refund.failed',
      'payment.authorized',
    ])
    // The hold's bound still applies: the expiry job is due again at captureBy.
    const expiry = await t.db
      .selectFrom('jobs')
      .select(['state', 'run_at'])
      .where('payment_id', '=', other)
      .where('kind', '=', captureExpiryJobKind)
      .executeTakeFirstOrThrow()
    expect(expiry.state).toBe('pending')
    expect(expiry.run_at.getTime()).toBe(held.capture.captureBy * 1000)
    const event = await t.db
      .selectFrom('payment_events')
      .select(['id', 'type', 'created_at', 'snapshot'])
      .where('payment_id', '=', other)
      .where('type', '=', 'payment.authorized')
      .orderBy('payment_state_version', 'desc')
      .executeTakeFirstOrThrow()
    expect(JSON.parse(renderPaymentEvent(event as never)).data.capture).toMatchObject({
      status: 'authorized',
      held_amount: { value: '1000' },
      failure_code: 'transfer_failed',
      voided_at: null,
    })

    // Voided again (the merchant's call once the cause is fixed): a new refund, and the money goes.
    const again = await post(`/v1/payments/${other}/void`)
    expect(again.statusCode, again.body).toBe(200)
    expect(again.json.capture).toMatchObject({
      status: 'voided',
      heldAmount: { value: '0' },
      failureCode: null,
    })
    await runJobs()
    const refunds = (await get(`/v1/refunds?paymentId=${other}`)).json.data
    expect(refunds.map((r: { status: string }) => r.status).sort()).toEqual(['failed', 'succeeded'])
  })

  it('a partial capture whose rest cannot go back: still partially_captured, the rest held; a void returns it', async () => {
    const id = await heldPayment()
    const key = idem()
    const res = await post(
      `/v1/payments/${id}/capture`,
      { amount: { unit: 'iso4217/USD', value: '600' } },
      { 'idempotency-key': key },
    )
    expect(res.statusCode, res.body).toBe(200)
    const replay = await post(
      `/v1/payments/${id}/capture`,
      { amount: { unit: 'iso4217/USD', value: '600' } },
      { 'idempotency-key': key },
    )
    expect([replay.statusCode, replay.headers['idempotent-replayed']]).toEqual([200, 'true'])
    expect(replay.json.capture).toEqual(res.json.capture)
    const [rest] = (await get(`/v1/refunds?paymentId=${id}`)).json.data
    await post(`/v1/test/refunds/${rest.refundId}/simulate`, { outcome: 'failed' })

    const held = (await get(`/v1/payments/${id}`)).json.capture
    expect(held).toMatchObject({
      status: 'partially_captured',
      capturedAmount: { value: '600' },
      heldAmount: { value: '400' },
      failureCode: 'transfer_failed',
    })
    const capture = await post(`/v1/payments/${id}/capture`)
    expect([capture.statusCode, capture.json.code]).toEqual([409, 'invalid_state'])
    expect(capture.json.message).toMatch(/Allowed now: void, refund\./)

    const voided = await post(`/v1/payments/${id}/void`)
    expect(voided.statusCode, voided.body).toBe(200)
    expect(voided.json.capture).toMatchObject({
      status: 'partially_captured',
      capturedAmount: { value: '600' },
      heldAmount: { value: '0' },
      failureCode: null,
    })
    const refunds = (await get(`/v1/refunds?paymentId=${id}`)).json.data
    expect(refunds).toHaveLength(2)
    expect(refunds[0]).toMatchObject({ status: 'pending', amount: { value: '400' }, reason: 'uncaptured' })
    const [failedRow, againRow] = await t.db
      .selectFrom('refunds')
      .select(['asset_value', 'paid_from'])
      .where('payment_id', '=', id)
      .orderBy('created_at')
      .execute()
    expect(againRow).toEqual(failedRow)
    const twice = await post(`/v1/payments/${id}/void`)
    expect([twice.statusCode, twice.json.code]).toEqual([409, 'invalid_state'])
    await runJobs()
    expect((await get(`/v1/refunds?paymentId=${id}`)).json.data[0].status).toBe('succeeded')
  })

  it('a capture, a void and the expiry racing at captureBy: exactly one wins, one refund at most', async () => {
    for (let round = 0; round < 5; round++) {
      const id = await heldPayment()
      const row = await t.db
        .selectFrom('payments')
        .select('capture_by')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
      const at = row.capture_by!.getTime()
      const ctx = { merchantId, paymentId: id, sandboxDelayMs: 0 }
      // The capture a moment before captureBy, the void and the expiry a moment after: each is allowed
      // by itself; the payment row decides.
      const expiry = t.app.jobHandlers[captureExpiryJobKind]!
      const job = await t.db
        .selectFrom('jobs')
        .selectAll()
        .where('payment_id', '=', id)
        .where('kind', '=', captureExpiryJobKind)
        .executeTakeFirstOrThrow()
      const outcomes = await Promise.allSettled([
        capturePayment(t.db, { ...ctx, now: new Date(at - 1), body: {} }),
        voidPayment(t.db, { ...ctx, now: new Date(at + 1) }),
        expiry.run(job, {
          db: t.db,
          now: () => new Date(at + 1),
          log: { info() {}, warn() {}, error() {} },
        } as never),
      ])
      const [captured, voided, expired] = outcomes
      const wins = [
        captured.status === 'fulfilled',
        voided.status === 'fulfilled',
        expired.status === 'fulfilled' && 'expired' in (expired.value as object),
      ].filter(Boolean)
      expect(wins, JSON.stringify(outcomes)).toHaveLength(1)
      for (const outcome of [captured, voided])
        if (outcome.status === 'rejected') expect(outcome.reason).toMatchObject({ code: 'invalid_state' })
      if (expired.status === 'fulfilled' && !('expired' in (expired.value as object)))
        expect(expired.value).toHaveProperty('skipped')
      const types = await events(id)
      expect(types.filter((type) => type === 'payment.captured' || type === 'payment.voided')).toHaveLength(1)
      const refunds = (await get(`/v1/refunds?paymentId=${id}`)).json.data
      expect(refunds).toHaveLength(captured.status === 'fulfilled' ? 0 : 1)
    }
  })

  it('caipay/client: capturePayment and voidPayment', async () => {
    const fetch: Fetch = async (url, init) => {
      const target = new URL(url)
      const res = await t.request({
        method: init.method as 'POST',
        url: target.pathname + target.search,
        headers: init.headers as Record<string, string>,
        ...(init.body ? { payload: init.body as string } : {}),
      })
      return new Response(res.body, {
        status: res.statusCode,
        headers: { 'content-type': 'application/json' },
      })
    }
    const client = createMerchantClient({ baseUrl: 'http://127.0.0.1', apiKey: key, merchantId, fetch })
    const a = await heldPayment()
    const captured = await client.capturePayment({
      params: { id: a },
      body: { amount: { unit: 'iso4217/USD', value: '250' } },
      idempotencyKey: idem(),
    })
    expect(captured.capture).toMatchObject({ status: 'partially_captured', capturedAmount: { value: '250' } })
    const b = await heldPayment()
    const voided = await client.voidPayment({ params: { id: b } })
    expect(voided.capture?.status).toBe('voided')
    await expect(client.voidPayment({ params: { id: b } })).rejects.toMatchObject({ code: 'invalid_state' })
  })
})
