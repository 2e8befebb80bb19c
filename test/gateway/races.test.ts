import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startExpiryJob } from '../../src/server/jobs/expiry.js'
import { expireDuePayments, transitionPayment } from '../../src/server/payments/lifecycle.js'
import {
  type Buyer,
  createBuyer,
  createGatewayEnv,
  type GatewayEnv,
  isBaseOption,
  isSolanaOption,
} from './support.js'

let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv()
  buyer = createBuyer()
})
afterAll(() => env.t.close())

const rounds = 8

async function ready(pick = isBaseOption, expiresAt?: number) {
  const paymentId = await env.pay('100', 'iso4217/USD', expiresAt ? { expiresAt } : {})
  const { option, results } = await env.prepare(paymentId, buyer, pick)
  return { paymentId, body: { optionId: option.id, results } }
}

async function finalStatus(paymentId: string) {
  return (await env.gw('GET', paymentId, '/status')).json.status
}

/** Waits until some backend of this database waits on a row lock: the racing request is parked behind us. */
async function someoneWaitsOnALock() {
  for (let i = 0; i < 200; i++) {
    const { rows } = await sql<{ n: string }>`
      SELECT count(*) AS n FROM pg_stat_activity
      WHERE datname = current_database() AND wait_event_type = 'Lock'`.execute(env.t.db)
    if (Number(rows[0]!.n) > 0) return
    await new Promise((r) => setTimeout(r, 10))
  }
  throw new Error('nobody waited on the lock')
}

describe('exactly one winner', () => {
  it('confirm vs confirm', async () => {
    for (let i = 0; i < rounds; i++) {
      const { paymentId, body } = await ready(i % 2 ? isBaseOption : isSolanaOption)
      const responses = await Promise.all([
        env.gw('POST', paymentId, '/confirm', body),
        env.gw('POST', paymentId, '/confirm', body),
        env.gw('POST', paymentId, '/confirm', body),
      ])
      const codes = responses.map((r) => r.statusCode).sort()
      expect(codes, responses.map((r) => r.body).join('\n')).toEqual([200, 409, 409])
      for (const r of responses.filter((r) => r.statusCode === 409)) expect(r.json.code).toBe('invalid_state')
      expect(await finalStatus(paymentId)).toBe('succeeded')
    }
  })

  it('confirm vs cancel', async () => {
    for (let i = 0; i < rounds; i++) {
      const { paymentId, body } = await ready()
      const [confirm, cancel] = await Promise.all([
        env.gw('POST', paymentId, '/confirm', body),
        env.gw('POST', paymentId, '/cancel'),
      ])
      expect([confirm.statusCode, cancel.statusCode].sort(), `${confirm.body}\n${cancel.body}`).toEqual([
        200, 409,
      ])
      const loser = confirm.statusCode === 409 ? confirm : cancel
      expect(loser.json.code).toBe('invalid_state')
      expect(await finalStatus(paymentId)).toBe(confirm.statusCode === 200 ? 'succeeded' : 'cancelled')
    }
  })

  it('confirm vs the expiry sweep', async () => {
    for (let i = 0; i < rounds; i++) {
      const expiresAt = env.nowS() + 120
      const { paymentId, body } = await ready(isBaseOption, expiresAt)
      const job = startExpiryJob({
        db: env.t.db,
        now: () => new Date((expiresAt + 1) * 1000),
        intervalMs: 60_000,
      })
      const [confirm, expired] = await Promise.all([env.gw('POST', paymentId, '/confirm', body), job.sweep()])
      await job.stop()
      const confirmed = confirm.statusCode === 200
      expect(confirmed !== expired.includes(paymentId), confirm.body).toBe(true)
      // Lost at the UPDATE: 409; arrived after the sweep committed: it reads an expired payment, 410.
      if (!confirmed) expect(['invalid_state', 'payment_expired']).toContain(confirm.json.code)
      expect(await finalStatus(paymentId)).toBe(confirmed ? 'succeeded' : 'expired')
    }
  })

  it('confirm parked behind an expiry that commits first loses with 409 invalid_state', async () => {
    const expiresAt = env.nowS() + 120
    const { paymentId, body } = await ready(isBaseOption, expiresAt)
    const trx = await env.t.db.startTransaction().execute()
    expect(await expireDuePayments(trx, { now: new Date((expiresAt + 1) * 1000), paymentId })).toEqual([
      paymentId,
    ])
    const pending = env.gw('POST', paymentId, '/confirm', body)
    await someoneWaitsOnALock()
    await trx.commit().execute()
    const res = await pending
    expect([res.statusCode, res.json.code]).toEqual([409, 'invalid_state'])
    expect(await finalStatus(paymentId)).toBe('expired')
  })

  it('cancel parked behind a confirm that commits first loses with 409 invalid_state', async () => {
    const { paymentId } = await ready()
    const trx = await env.t.db.startTransaction().execute()
    await transitionPayment(trx, { paymentId, from: 'requires_action', to: 'processing' })
    const pending = env.gw('POST', paymentId, '/cancel')
    await someoneWaitsOnALock()
    await trx.commit().execute()
    const res = await pending
    expect([res.statusCode, res.json.code]).toEqual([409, 'invalid_state'])
    expect(await finalStatus(paymentId)).toBe('processing')
  })
})
