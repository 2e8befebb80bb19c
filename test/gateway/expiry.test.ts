import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { startExpiryJob } from '../../src/server/jobs/expiry.js'
import { createGatewayEnv, type GatewayEnv } from './support.js'

let env: GatewayEnv
beforeAll(async () => {
  env = await createGatewayEnv()
})
afterAll(() => env.t.close())

async function status(paymentId: string) {
  const row = await env.t.db
    .selectFrom('payments')
    .select('status')
    .where('id', '=', paymentId)
    .executeTakeFirstOrThrow()
  return row.status
}

describe('expiry', () => {
  it('the background job expires due payments on its interval, and stops', async () => {
    const due = await env.pay('100', 'iso4217/USD', { expiresAt: env.nowS() + 30 })
    const later = await env.pay('100', 'iso4217/USD', { expiresAt: env.nowS() + 3600 })
    let clock = new Date((env.nowS() + 31) * 1000)
    const job = startExpiryJob({ db: env.t.db, now: () => clock, intervalMs: 20 })
    for (let i = 0; i < 100 && (await status(due)) !== 'expired'; i++)
      await new Promise((r) => setTimeout(r, 20))
    expect(await status(due)).toBe('expired')
    expect(await status(later)).toBe('requires_action')
    await job.stop()
    clock = new Date((env.nowS() + 7200) * 1000)
    await new Promise((r) => setTimeout(r, 100))
    expect(await status(later)).toBe('requires_action')
  })

  it('reads apply expiry lazily, before any sweep', async () => {
    const paymentId = await env.pay('100', 'iso4217/USD', { expiresAt: env.nowS() + 30 })
    env.t.advanceTime(30_000)
    expect(await status(paymentId)).toBe('requires_action')
    const info = await env.gw('GET', paymentId)
    expect(info.json.status).toBe('expired')
    expect(await status(paymentId)).toBe('expired')
    const cancel = await env.gw('POST', paymentId, '/cancel')
    expect([cancel.statusCode, cancel.json.code]).toEqual([409, 'invalid_state'])
  })

  it('a sweep never touches a payment that already left requires_action', async () => {
    const paymentId = await env.pay('100', 'iso4217/USD', { expiresAt: env.nowS() + 30 })
    await env.gw('POST', paymentId, '/cancel')
    const job = startExpiryJob({
      db: env.t.db,
      now: () => new Date((env.nowS() + 60) * 1000),
      intervalMs: 60_000,
    })
    expect(await job.sweep()).not.toContain(paymentId)
    await job.stop()
    expect(await status(paymentId)).toBe('cancelled')
  })
})
