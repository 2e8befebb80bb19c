import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmJobKinds } from '../../src/server/chains/evm/index.js'
import { expireDuePayments } from '../../src/server/payments/lifecycle.js'
import {
  createEvmEnv,
  type Buyer as EvmBuyer,
  type EvmEnv,
  isKind,
  usdc as usdcUnits,
} from '../evm/support.js'
import {
  type Buyer,
  createBuyer,
  createGatewayEnv,
  type GatewayEnv,
  isBaseOption,
  usdc,
} from '../gateway/support.js'
import { headers, idem, succeedPayment } from '../server/helpers.js'

/**
 * Many requests at once against one object. test/gateway/races.test.ts pins the two-party races
 * deterministically (lock parking); here the point is volume: dozens of contenders per object and
 * dozens of objects at once, checked for exactly-once outcomes and for rows written twice.
 */
let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  // A fixed clock: the expiry sweep below runs "later" than every confirm without real waiting.
  env = await createGatewayEnv({ startTime: new Date('2030-01-01T00:00:00Z') })
  buyer = createBuyer()
  const settled = await env.t.request({
    method: 'POST',
    url: `/v1/merchants/${env.merchantId}/settlements/crypto`,
    headers: headers(env.apiKey, undefined, { 'idempotency-key': idem() }),
    payload: { settlements: [{ asset: usdc.base, destination: buyer.accounts.base }] },
  })
  expect(settled.statusCode, settled.body).toBe(201)
})
afterAll(() => env.t.close())

function shuffled<T>(items: readonly T[]): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

describe('idempotent merchant creation under contention', () => {
  it('100 concurrent requests with one Idempotency-Key create exactly one merchant', async () => {
    const t = env.t
    const partnerId = await t.createPartner()
    const { apiKey } = await t.createKey('test', 'partner', partnerId)
    const key = idem()
    const body = { merchantName: 'Contended Cafe', merchantEmail: 'contended@example.com' }
    const responses = await Promise.all(
      Array.from({ length: 100 }, () =>
        t.request({
          method: 'POST',
          url: '/v1/merchants',
          headers: { 'api-key': apiKey, 'idempotency-key': key },
          payload: body,
        }),
      ),
    )

    const created = responses.filter((r) => r.statusCode === 201)
    const originals = created.filter((r) => r.headers['idempotent-replayed'] === undefined)
    const conflicts = responses.filter((r) => r.statusCode === 409)
    expect(created.length + conflicts.length, responses.map((r) => r.body).join('\n')).toBe(100)
    expect(originals).toHaveLength(1)
    for (const r of conflicts)
      expect(r.json).toEqual({ code: 'idempotency_conflict', message: expect.any(String) })
    const original = originals[0]!
    for (const r of created) {
      // A replay is the stored answer, byte for byte: same id, same timestamps.
      expect(r.body).toBe(original.body)
      if (r !== original) expect(r.headers['idempotent-replayed']).toBe('true')
    }

    const rows = await t.db.selectFrom('merchants').select('id').where('partner_id', '=', partnerId).execute()
    expect(rows.map((r) => r.id)).toEqual([original.json.merchant.id])

    // Once the dust settles, every retry is a replay, and a different body under the key is refused.
    const later = await t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: { 'api-key': apiKey, 'idempotency-key': key },
      payload: body,
    })
    expect([later.statusCode, later.headers['idempotent-replayed'], later.body]).toEqual([
      201,
      'true',
      original.body,
    ])
    const other = await t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: { 'api-key': apiKey, 'idempotency-key': key },
      payload: { ...body, merchantName: 'Someone Else' },
    })
    expect([other.statusCode, other.json.code]).toEqual([409, 'idempotency_conflict'])
  })

  it('60 concurrent payment creations sharing one key make one payment; 20 distinct keys make one each', async () => {
    const t = env.t
    const shared = idem()
    const body = { referenceId: 'contended-1', amount: { unit: 'iso4217/USD', value: '500' } }
    const keys = shuffled([
      ...Array.from({ length: 60 }, () => shared),
      ...Array.from({ length: 20 }, () => idem()),
    ])
    const responses = await Promise.all(
      keys.map(async (key, i) => ({
        key,
        res: await t.request({
          method: 'POST',
          url: '/v1/payments',
          headers: headers(env.apiKey, env.merchantId, { 'idempotency-key': key }),
          payload: key === shared ? body : { ...body, referenceId: `distinct-${i}` },
        }),
      })),
    )
    const sharedAnswers = responses.filter((r) => r.key === shared).map((r) => r.res)
    for (const r of sharedAnswers) {
      expect([201, 409], r.body).toContain(r.statusCode)
      if (r.statusCode === 409) expect(r.json.code).toBe('idempotency_conflict')
    }
    const sharedCreated = sharedAnswers.filter((r) => r.statusCode === 201)
    expect(sharedCreated.filter((r) => r.headers['idempotent-replayed'] === undefined)).toHaveLength(1)
    expect(new Set(sharedCreated.map((r) => r.json.paymentId)).size).toBe(1)
    // Distinct keys never block each other.
    for (const { res } of responses.filter((r) => r.key !== shared))
      expect(res.statusCode, res.body).toBe(201)

    const rows = await t.db
      .selectFrom('payments')
      .select(['id', 'reference_id'])
      .where('merchant_id', '=', env.merchantId)
      .where((eb) =>
        eb.or([eb('reference_id', '=', 'contended-1'), eb('reference_id', 'like', 'distinct-%')]),
      )
      .execute()
    expect(rows.filter((r) => r.reference_id === 'contended-1').map((r) => r.id)).toEqual([
      sharedCreated[0]!.json.paymentId,
    ])
    expect(rows.filter((r) => r.reference_id.startsWith('distinct-'))).toHaveLength(20)
  })
})

describe('refunds under contention', () => {
  it('50 concurrent refunds of one succeeded payment: one 201, 49 already_refunded, one refund', async () => {
    const paymentId = await env.pay('1999')
    await succeedPayment(env.t, paymentId)
    const responses = await Promise.all(
      Array.from({ length: 50 }, () =>
        env.t.request({
          method: 'POST',
          url: '/v1/refunds',
          headers: headers(env.apiKey, env.merchantId),
          payload: { paymentId },
        }),
      ),
    )
    const ok = responses.filter((r) => r.statusCode === 201)
    expect(ok, responses.map((r) => r.body).join('\n')).toHaveLength(1)
    expect(ok[0]!.json).toMatchObject({ paymentId, status: 'pending', amount: { value: '1999' } })
    const rest = responses.filter((r) => r.statusCode !== 201)
    expect(rest).toHaveLength(49)
    for (const r of rest) expect([r.statusCode, r.json.code]).toEqual([409, 'already_refunded'])

    const refunds = await env.t.db
      .selectFrom('refunds')
      .select('id')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(refunds).toHaveLength(1)
    const listed = await env.t.request({
      method: 'GET',
      url: `/v1/payments/${paymentId}`,
      headers: headers(env.apiKey, env.merchantId),
    })
    expect([listed.statusCode, listed.json.status]).toEqual([200, 'succeeded'])
  })

  it('refunds racing with the same Idempotency-Key replay the one answer', async () => {
    const paymentId = await env.pay('2999')
    await succeedPayment(env.t, paymentId)
    const key = idem()
    const responses = await Promise.all(
      Array.from({ length: 30 }, () =>
        env.t.request({
          method: 'POST',
          url: '/v1/refunds',
          headers: headers(env.apiKey, env.merchantId, { 'idempotency-key': key }),
          payload: { paymentId },
        }),
      ),
    )
    const fresh = responses.filter(
      (r) => r.statusCode === 201 && r.headers['idempotent-replayed'] === undefined,
    )
    expect(fresh).toHaveLength(1)
    for (const r of responses) {
      if (r.statusCode === 201) expect(r.json).toEqual(fresh[0]!.json)
      else expect([r.statusCode, r.json.code]).toEqual([409, 'idempotency_conflict'])
    }
  })
})

describe('crypto settlement registration under contention', () => {
  it('40 concurrent registrations of one asset (distinct keys): one 201, the rest settlement_asset_conflict', async () => {
    const t = env.t
    const merchant = await t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: headers(env.apiKey, undefined, { 'idempotency-key': idem() }),
      payload: { merchantName: 'Settle Race', merchantEmail: 'race@example.com' },
    })
    const merchantId = merchant.json.merchant.id as string
    const responses = await Promise.all(
      Array.from({ length: 40 }, () =>
        t.request({
          method: 'POST',
          url: `/v1/merchants/${merchantId}/settlements/crypto`,
          headers: headers(env.apiKey, undefined, { 'idempotency-key': idem() }),
          payload: { settlements: [{ asset: usdc.ethereum, destination: buyer.accounts.ethereum }] },
        }),
      ),
    )
    const codes = responses.map((r) => (r.statusCode === 201 ? 'created' : `${r.statusCode} ${r.json?.code}`))
    expect(
      codes.filter((c) => c === 'created'),
      codes.join(', '),
    ).toHaveLength(1)
    expect(
      codes.filter((c) => c !== 'created').every((c) => c === '409 settlement_asset_conflict'),
      codes.join(', '),
    ).toBe(true)
    const rows = await t.db
      .selectFrom('crypto_settlements')
      .select('id')
      .where('merchant_id', '=', merchantId)
      .execute()
    expect(rows).toHaveLength(1)
  })
})

describe('confirm vs gateway cancel vs expiry sweep, many payments at once', () => {
  const payments = 30

  it(`${payments} payments, each with confirm, cancel and a sweep fired together: one winner each`, async () => {
    const t = env.t
    const expiresAt = env.nowS() + 300
    const prepared = []
    for (let i = 0; i < payments; i++) {
      const paymentId = await env.pay(String(100 + i), 'iso4217/USD', { expiresAt })
      const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
      prepared.push({ paymentId, body: { optionId: option.id, results } })
    }
    const ids = prepared.map((p) => p.paymentId)
    const counts = async () => {
      const options = await t.db
        .selectFrom('payment_options')
        .select(['payment_id', sql<string>`count(*)`.as('n')])
        .where('payment_id', 'in', ids)
        .groupBy('payment_id')
        .execute()
      return Object.fromEntries(options.map((o) => [o.payment_id, Number(o.n)]))
    }
    const optionsBefore = await counts()
    // The sweep runs on another instance's clock, just past the expiry; confirms still see time before it.
    const sweepNow = new Date((expiresAt + 1) * 1000)

    type Outcome = {
      confirm?: number
      confirmCode?: string
      cancel?: number
      cancelCode?: string
      swept?: boolean
    }
    const outcomes = new Map<string, Outcome>(ids.map((id) => [id, {}]))
    // Under this load a request needs a few hundred ms to reach its UPDATE and a sweep a few ms: the
    // sweeps' head starts are shifted by about that much, so each of the three wins some payments.
    const pause = (minMs: number, maxMs: number) =>
      new Promise((r) => setTimeout(r, minMs + Math.random() * (maxMs - minMs)))
    const contenders = prepared.flatMap(({ paymentId, body }) => {
      const o = outcomes.get(paymentId)!
      return [
        async () => {
          await pause(0, 400)
          const r = await env.gw('POST', paymentId, '/confirm', body)
          o.confirm = r.statusCode
          o.confirmCode = r.json?.code
        },
        async () => {
          await pause(0, 400)
          const r = await env.gw('POST', paymentId, '/cancel')
          o.cancel = r.statusCode
          o.cancelCode = r.json?.code
        },
        async () => {
          await pause(250, 650)
          o.swept = (await expireDuePayments(t.db, { now: sweepNow, paymentId })).includes(paymentId)
        },
      ]
    })
    // Plus two unscoped sweeps late in the window, as if two more instances' timers fired.
    const global = [
      () => expireDuePayments(t.db, { now: sweepNow }),
      () => expireDuePayments(t.db, { now: sweepNow }),
    ]
    const globalResults: string[][] = []
    await Promise.all(
      shuffled([
        ...contenders.map((run) => run()),
        ...global.map(async (run) => {
          await pause(500, 800)
          globalResults.push(await run())
        }),
      ]),
    )

    const rows = await t.db.selectFrom('payments').selectAll().where('id', 'in', ids).execute()
    expect(rows).toHaveLength(payments)
    const tally = { succeeded: 0, cancelled: 0, expired: 0 }
    for (const row of rows) {
      const o = outcomes.get(row.id)!
      const sweptGlobally = globalResults.some((ids) => ids.includes(row.id))
      const winners = [o.confirm === 200, o.cancel === 200, o.swept === true || sweptGlobally].filter(Boolean)
      const label = `${row.id}: ${JSON.stringify({ ...o, sweptGlobally, status: row.status })}`
      expect(winners, label).toHaveLength(1)
      // No request failed in a way a client could not act on.
      expect([200, 409, 410], label).toContain(o.confirm)
      expect([200, 409], label).toContain(o.cancel)
      if (o.confirm !== 200) expect(['invalid_state', 'payment_expired'], label).toContain(o.confirmCode)
      if (o.cancel !== 200) expect(o.cancelCode, label).toBe('invalid_state')

      if (o.confirm === 200) {
        tally.succeeded += 1
        expect(row.status, label).toBe('succeeded')
        expect(row.tx_id).toBe(`test:${row.id}`)
        expect(row.buyer).toBe(buyer.accounts.base)
        expect(row.selected_option_id).toBe(prepared.find((p) => p.paymentId === row.id)!.body.optionId)
        expect(row.settlement_status).toBe('succeeded')
        expect(row.cancelled_at).toBeNull()
      } else {
        // The loser's confirm rolled back completely: no buyer, option, amount or settlement left behind.
        expect(
          [row.tx_id, row.buyer, row.selected_option_id, row.option_amount, row.settlement_status],
          label,
        ).toEqual([null, null, null, null, null])
        if (o.cancel === 200) {
          tally.cancelled += 1
          expect([row.status, row.cancelled_reason], label).toEqual(['cancelled', 'cancelled_by_user'])
        } else {
          tally.expired += 1
          expect([row.status, row.cancelled_at], label).toEqual(['expired', null])
        }
      }

      // What the merchant and the wallet read agrees with the row.
      const status = await env.gw('GET', row.id, '/status')
      expect(status.json.status, label).toBe(row.status)
      expect(status.json.isFinal, label).toBe(true)
    }
    expect(tally.succeeded + tally.cancelled + tally.expired).toBe(payments)

    // Nobody wrote an option or a job twice: options as quoted, and test mode queues no jobs at all.
    expect(await counts()).toEqual(optionsBefore)
    const jobs = await t.db
      .selectFrom('jobs')
      .select(['kind', 'payment_id', sql<string>`count(*)`.as('n')])
      .where('payment_id', 'in', ids)
      .groupBy(['kind', 'payment_id'])
      .execute()
    expect(jobs).toEqual([])
    const dupRefs = await t.db
      .selectFrom('payments')
      .select(['reference_id', sql<string>`count(*)`.as('n')])
      .where('id', 'in', ids)
      .groupBy('reference_id')
      .having(sql`count(*)`, '>', 1)
      .execute()
    expect(dupRefs).toEqual([])
    console.info(`three-way race over ${payments} payments:`, tally)
  })

  it('a second wave on the same payments changes nothing', async () => {
    const rows = await env.t.db
      .selectFrom('payments')
      .select(['id', 'status', 'updated_at'])
      .where('merchant_id', '=', env.merchantId)
      .where('status', 'in', ['succeeded', 'cancelled', 'expired'])
      .execute()
    const replay = await Promise.all(
      rows.flatMap((row) => [
        env.gw('POST', row.id, '/cancel'),
        env.t.request({
          method: 'POST',
          url: `/v1/payments/${row.id}/cancel`,
          headers: headers(env.apiKey, env.merchantId),
        }),
      ]),
    )
    for (const r of replay) {
      expect(r.statusCode, r.body).toBeGreaterThanOrEqual(400)
      expect(r.statusCode, r.body).toBeLessThan(500)
      expect(['invalid_state', 'payment_expired']).toContain(r.json.code)
    }
    const after = await env.t.db
      .selectFrom('payments')
      .select(['id', 'status', 'updated_at'])
      .where(
        'id',
        'in',
        rows.map((r) => r.id),
      )
      .execute()
    expect(new Map(after.map((r) => [r.id, [r.status, r.updated_at.getTime()]]))).toEqual(
      new Map(rows.map((r) => [r.id, [r.status, r.updated_at.getTime()]])),
    )
  })
})

describe('the same three-way race in live mode (Anvil): the winner queues exactly one relay job', () => {
  const payments = 20
  let live: EvmEnv
  let payer: EvmBuyer
  beforeAll(async () => {
    live = await createEvmEnv()
    payer = await live.buyer(2, usdcUnits(10_000))
  })
  afterAll(() => live?.close())

  it(`${payments} gasless payments: one winner each, one job per confirmed payment, one transfer each`, async () => {
    const prepared = []
    for (let i = 0; i < payments; i++) {
      const { paymentId } = await live.pay(String(200 + i))
      const res = await live.gw('POST', paymentId, '/options', { accounts: [payer.account] })
      const option = res.json.options.find(isKind('eip3009'))
      prepared.push({
        paymentId,
        body: { optionId: option.id, results: [await payer.sign(option.actions[0])] },
      })
    }
    const ids = prepared.map((p) => p.paymentId)
    // Payments expire after the default 15 minutes; the sweep runs as if that time had passed.
    const sweepNow = new Date(Date.now() + 16 * 60_000)
    const pause = (minMs: number, maxMs: number) =>
      new Promise((r) => setTimeout(r, minMs + Math.random() * (maxMs - minMs)))
    const outcomes = new Map<string, { confirm?: number; cancel?: number; swept?: boolean }>(
      ids.map((id) => [id, {}]),
    )
    await Promise.all(
      prepared.flatMap(({ paymentId, body }) => {
        const o = outcomes.get(paymentId)!
        return [
          // Live confirm verifies the signature before its UPDATE: it gets a small head start.
          (async () => {
            await pause(0, 200)
            o.confirm = (await live.gw('POST', paymentId, '/confirm', body)).statusCode
          })(),
          (async () => {
            await pause(50, 350)
            o.cancel = (await live.gw('POST', paymentId, '/cancel')).statusCode
          })(),
          (async () => {
            await pause(150, 450)
            o.swept = (await expireDuePayments(live.t.db, { now: sweepNow, paymentId })).includes(paymentId)
          })(),
        ]
      }),
    )

    const rows = await live.t.db
      .selectFrom('payments')
      .select(['id', 'status'])
      .where('id', 'in', ids)
      .execute()
    const jobs = await live.t.db
      .selectFrom('jobs')
      .select(['payment_id', 'kind'])
      .where('payment_id', 'in', ids)
      .execute()
    const tally: Record<string, number> = {}
    for (const row of rows) {
      const o = outcomes.get(row.id)!
      const label = `${row.id}: ${JSON.stringify({ ...o, status: row.status })}`
      expect([o.confirm === 200, o.cancel === 200, o.swept === true].filter(Boolean), label).toHaveLength(1)
      const expected = o.confirm === 200 ? 'processing' : o.cancel === 200 ? 'cancelled' : 'expired'
      expect(row.status, label).toBe(expected)
      tally[expected] = (tally[expected] ?? 0) + 1
      // A losing confirm rolled its job back with it; a winning one queued exactly one relay.
      expect(
        jobs.filter((j) => j.payment_id === row.id).map((j) => j.kind),
        label,
      ).toEqual(o.confirm === 200 ? [evmJobKinds.relay] : [])
    }
    console.info(`live three-way race over ${payments} payments:`, tally)

    // The confirmed ones finish, each moving the buyer's money exactly once.
    const before = await live.balance(payer.address)
    const confirmed = rows.filter((r) => r.status === 'processing').map((r) => r.id)
    live.startRunner()
    let expectedDebit = 0n
    for (const id of confirmed) {
      expect((await live.waitFinal(id)).status).toBe('succeeded')
      expectedDebit += usdcUnits((200 + ids.indexOf(id)) / 100)
    }
    expect(before - (await live.balance(payer.address))).toBe(expectedDebit)
  })
})
