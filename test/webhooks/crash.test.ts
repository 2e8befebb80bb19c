import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { freePort } from '../ports.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'
import { type Receiver, startReceiver, verifyWithStandardWebhooks } from './receiver.js'

/**
 * SIGKILL between state changes and their deliveries: the server (`node bin/caipay.js serve`, test mode)
 * commits payment events while the merchant's receiver hangs, so every first attempt is in flight or not
 * yet dispatched when the process is killed. After a restart with the receiver answering, every event of
 * the outbox is delivered (same id and body on every attempt), none that the outbox does not hold, and no
 * payment request waited on the receiver.
 */

const root = fileURLToPath(new URL('../..', import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let pg: TestDatabase
let receiver: Receiver
let child: ChildProcess | undefined
let url = ''
let args: string[] = []
let apiKey = ''

async function start(): Promise<void> {
  let log = ''
  const started = spawn(process.execPath, [join(root, 'bin/caipay.js'), 'serve', ...args], {
    cwd: root,
    env: { ...process.env, NODE_OPTIONS: '', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  started.stdout?.on('data', (chunk: Buffer) => {
    log += chunk.toString()
  })
  started.stderr?.on('data', (chunk: Buffer) => {
    log += chunk.toString()
  })
  child = started
  const deadline = Date.now() + 30_000
  for (;;) {
    if (started.exitCode !== null) throw new Error(`caipay serve exited:\n${log}`)
    try {
      if ((await fetch(`${url}/healthz`)).ok) return
    } catch {}
    if (Date.now() > deadline) throw new Error(`caipay serve did not come up:\n${log}`)
    await sleep(50)
  }
}

async function kill(): Promise<void> {
  if (!child || child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child!.once('exit', resolve))
  child.kill('SIGKILL')
  await exited
}

async function api(method: string, path: string, body?: unknown, extra: Record<string, string> = {}) {
  const started = Date.now()
  const res = await fetch(`${url}${path}`, {
    method,
    headers: { 'api-key': apiKey, ...(body ? { 'content-type': 'application/json' } : {}), ...extra },
    ...(body ? { body: JSON.stringify(body) } : {}),
  })
  return { status: res.status, json: await res.json(), ms: Date.now() - started }
}

beforeAll(async () => {
  pg = await createTestDatabase()
  receiver = await startReceiver()
  const partnerId = await createPartner(pg.db)
  apiKey = (await createApiKey(pg.db, { partnerId, mode: 'test', role: 'partner' })).apiKey
  const port = await freePort()
  url = `http://127.0.0.1:${port}`
  args = ['--database-url', pg.url, '--port', String(port)]
  await start()
}, 60_000)

afterAll(async () => {
  await kill()
  await receiver?.close()
  await pg?.drop()
})

describe('webhooks across a SIGKILL', () => {
  it('every committed event is delivered after a restart, none invented, no payment waited', async () => {
    receiver.hang = true
    const endpoint = await api('POST', '/v1/webhook-endpoints', { url: receiver.url })
    expect(endpoint.status).toBe(201)
    const secret = endpoint.json.secret as string
    const merchant = await api(
      'POST',
      '/v1/merchants',
      { merchantName: 'Crash Hooks', merchantEmail: 'crash-hooks@example.com' },
      { 'idempotency-key': 'crash-hooks-merchant' },
    )
    const merchantId = merchant.json.merchant.id as string
    const outcomes = ['succeeded', 'failed', 'cancelled', 'expired']
    const slowest: number[] = []
    for (let i = 0; i < 12; i++) {
      const created = await api(
        'POST',
        '/v1/payments',
        { referenceId: `crash-${i}`, amount: { unit: 'iso4217/USD', value: '100' } },
        { 'merchant-id': merchantId },
      )
      expect(created.status).toBe(201)
      const simulated = await api(
        'POST',
        `/v1/test/payments/${created.json.paymentId}/simulate`,
        { outcome: outcomes[i % outcomes.length] },
        { 'merchant-id': merchantId },
      )
      expect(simulated.status).toBe(200)
      slowest.push(created.ms, simulated.ms)
    }
    // The receiver has not answered anything; the payment path never waited for it (a 10 s timeout).
    expect(Math.max(...slowest)).toBeLessThan(2_000)
    await receiver.waitFor(1)
    await kill()

    // The killed runner's claims stay leased for 60 s; it is dead, so let them run out now.
    await sql`UPDATE jobs SET locked_until = now() - interval '1 second' WHERE state = 'running'`.execute(
      pg.db,
    )
    receiver.hang = false
    await start()

    const outbox = await pg.db.selectFrom('payment_events').select(['id', 'type', 'payment_id']).execute()
    // Per outcome: succeeded and failed 3 events (created, processing, final), cancelled and expired 2.
    expect(outbox.length).toBe(3 * (3 + 3 + 2 + 2))
    const expected = new Set(outbox.map((e) => e.id))
    const deadline = Date.now() + 30_000
    for (;;) {
      const delivered = await pg.db
        .selectFrom('webhook_deliveries')
        .select(['event_id', 'state'])
        .where('state', '=', 'succeeded')
        .execute()
      if (delivered.length === expected.size) break
      if (Date.now() > deadline) throw new Error(`${delivered.length} of ${expected.size} delivered`)
      await sleep(100)
    }
    const received = receiver.received.filter((r) => r.event.data.payment_id.startsWith('pay_'))
    const byId = new Map<string, string>()
    for (const r of received) {
      const event = verifyWithStandardWebhooks(secret, r)
      expect(expected.has(event.id), `invented event ${event.id}`).toBe(true)
      const seen = byId.get(event.id)
      if (seen !== undefined) expect(r.body).toBe(seen)
      byId.set(event.id, r.body)
    }
    expect(new Set(byId.keys())).toEqual(expected)
    for (const e of outbox) expect(JSON.parse(byId.get(e.id)!).type).toBe(e.type)
  }, 120_000)
})
