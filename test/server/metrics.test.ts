import { execFileSync } from 'node:child_process'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { enqueueJob } from '../../src/server/jobs/queue.js'
import { startMetricsServer } from '../../src/server/metrics/server.js'
import { operatorStatus } from '../../src/server/metrics/status.js'
import { startServer } from '../../src/server/server.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers } from './helpers.js'
import { sample, sampleSum } from './prometheus.js'

let t: TestServer
let apiKey: string
let merchantId: string
beforeAll(async () => {
  t = await createTestServer()
  apiKey = (await t.createKey('test')).apiKey
  merchantId = await createMerchant(t, apiKey)
})
afterAll(() => t.close())

async function scrape(): Promise<string> {
  const res = await t.app.inject({ method: 'GET', url: '/metrics' })
  expect(res.statusCode).toBe(200)
  expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/)
  return res.body
}

describe('/metrics', () => {
  it('counts requests by route pattern, method and status, never by URL', async () => {
    const paymentId = await createPayment(t, apiKey, merchantId)
    const route = { route: '/v1/payments/:id', method: 'GET', status: '200' }
    const before = sample(await scrape(), 'caipay_http_request_duration_seconds_count', route) ?? 0
    for (let i = 0; i < 3; i++) {
      const res = await t.request({
        method: 'GET',
        url: `/v1/payments/${paymentId}`,
        headers: headers(apiKey, merchantId),
      })
      expect(res.statusCode).toBe(200)
    }
    await t.app.inject({ method: 'GET', url: '/no/such/route/at/all' })
    const text = await scrape()
    expect(sample(text, 'caipay_http_request_duration_seconds_count', route)).toBe(before + 3)
    expect(
      sample(text, 'caipay_http_request_duration_seconds_count', { route: 'unmatched', status: '404' }),
    ).toBeGreaterThan(0)
    expect(text).not.toContain(paymentId)
    expect(text).not.toContain('/no/such/route')
  })

  it('counts payment transitions by what the payment became, mode and chain', async () => {
    const labels = (to: string) => ({ to, mode: 'test' })
    const before = await scrape()
    const count = (text: string, to: string) =>
      sampleSum(text, 'caipay_payment_transitions_total', labels(to))
    const succeeded = await createPayment(t, apiKey, merchantId, {
      referenceId: 'm-1',
      amount: { unit: 'iso4217/USD', value: '100' },
    })
    const cancelled = await createPayment(t, apiKey, merchantId, {
      referenceId: 'm-2',
      amount: { unit: 'iso4217/USD', value: '100' },
    })
    for (const [id, outcome] of [
      [succeeded, 'succeeded'],
      [cancelled, 'cancelled'],
    ] as const) {
      const res = await t.request({
        method: 'POST',
        url: `/v1/test/payments/${id}/simulate`,
        headers: headers(apiKey, merchantId),
        payload: { outcome },
      })
      expect(res.statusCode, res.body).toBe(200)
    }
    const after = await scrape()
    expect(count(after, 'succeeded') - count(before, 'succeeded')).toBe(1)
    expect(count(after, 'processing') - count(before, 'processing')).toBe(1)
    expect(count(after, 'cancelled') - count(before, 'cancelled')).toBe(1)
    // A cancelled payment never chose an option: no chain.
    expect(
      sample(after, 'caipay_payment_transitions_total', { ...labels('cancelled'), chain: 'none' }),
    ).toBeGreaterThan(0)
    // The simulated success paid on a chain (CAIP-2 of the simulated option's asset).
    const line = after
      .split('\n')
      .find((l) => l.startsWith('caipay_payment_transitions_total{') && l.includes('to="succeeded"'))
    expect(line).toMatch(/chain="(eip155|solana):[^"]+"/)
  })

  it('reads queued jobs and the oldest due one from the jobs table at scrape time', async () => {
    const paymentId = await createPayment(t, apiKey, merchantId, {
      referenceId: 'm-jobs',
      amount: { unit: 'iso4217/USD', value: '100' },
    })
    const now = Date.now()
    await enqueueJob(t.db, { kind: 'metrics.test', paymentId, runAt: new Date(now - 90_000) })
    const text = await scrape()
    expect(sample(text, 'caipay_jobs_queued', { kind: 'metrics.test' })).toBe(1)
    expect(sample(text, 'caipay_jobs_oldest_due_seconds', { kind: 'metrics.test' })).toBeGreaterThanOrEqual(
      89,
    )
    // Kinds this app runs are reported when nothing is queued, so alerts on them resolve.
    expect(sample(text, 'caipay_jobs_queued', { kind: 'webhook.deliver' })).toBe(0)
    await t.db.deleteFrom('jobs').where('kind', '=', 'metrics.test').execute()
    await new Promise((resolve) => setTimeout(resolve, 600))
    expect(sample(await scrape(), 'caipay_jobs_queued', { kind: 'metrics.test' })).toBeUndefined()
  })

  it('reports every job kind the runner runs, in /metrics and in caipay status (one registry)', async () => {
    const kinds = Object.keys(t.app.jobHandlers).sort()
    // The mode-independent jobs are in the registry, the capture expiry among them.
    expect(kinds).toEqual(expect.arrayContaining(['capture.expire', 'refund.test', 'webhook.deliver']))
    const text = await scrape()
    for (const kind of kinds) expect(sample(text, 'caipay_jobs_queued', { kind }), kind).toBeDefined()
    const status = await operatorStatus(t.db, t.app.config)
    expect(status.jobs.map((job) => job.kind).sort()).toEqual(kinds)
  })

  it('shows the connection pool and names no credential, partner or merchant', async () => {
    const text = await scrape()
    expect(sample(text, 'caipay_db_pool_max')).toBe(10)
    expect(sample(text, 'caipay_db_pool_connections', { state: 'in_use' })).toBeGreaterThanOrEqual(0)
    expect(sample(text, 'caipay_scrape_collector_up', { collector: 'database' })).toBe(1)
    for (const secret of [apiKey, apiKey.slice(0, 12), t.partnerId, merchantId])
      expect(text).not.toContain(secret)
  })

  it('passes promtool check metrics (Prometheus naming rules)', async () => {
    const text = await scrape()
    // promtool reads the exposition on stdin and exits non-zero with the problems on stdout.
    const out = execFileSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' })
    expect(out).toBe('')
  })
})

describe('rate-limit rejections', () => {
  it('are counted by route', async () => {
    const limited = await createTestServer({ config: { rateLimit: { perSecond: 1, burst: 1 } } })
    try {
      const key = (await limited.createKey('test')).apiKey
      const route = { route: '/v1/merchants' }
      const before =
        sample(
          (await limited.app.inject({ url: '/metrics' })).body,
          'caipay_rate_limit_rejections_total',
          route,
        ) ?? 0
      const statuses = []
      for (let i = 0; i < 3; i++)
        statuses.push(
          (await limited.request({ method: 'GET', url: '/v1/merchants', headers: headers(key) })).statusCode,
        )
      const refused = statuses.filter((s) => s === 429).length
      expect(refused).toBeGreaterThan(0)
      const after = sample(
        (await limited.app.inject({ url: '/metrics' })).body,
        'caipay_rate_limit_rejections_total',
        route,
      )
      expect(after).toBe(before + refused)
    } finally {
      await limited.close()
    }
  })
})

describe('/readyz', () => {
  it('is ready with the database reachable and every migration applied', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/readyz' })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json()).toEqual({
      ready: true,
      checks: [
        { name: 'database', ok: true },
        { name: 'migrations', ok: true },
      ],
    })
  })

  it('is not ready (503 with a spec code) when a migration this code knows is not applied', async () => {
    const other = await createTestServer()
    try {
      await sql`DELETE FROM kysely_migration WHERE name = '017_payment_status_notify'`.execute(other.db)
      const res = await other.app.inject({ method: 'GET', url: '/readyz' })
      expect(res.statusCode).toBe(503)
      expect(res.json()).toMatchObject({
        code: 'internal_error',
        message: expect.stringContaining('017_payment_status_notify'),
        ready: false,
      })
    } finally {
      await other.close()
    }
  })
})

describe('the metrics port', () => {
  it('serves /metrics, /healthz and /readyz on a port of its own, and nothing else', async () => {
    const server = await startMetricsServer({ port: 0, db: t.db, ...t.app.operations })
    try {
      const metrics = await fetch(`${server.url}/metrics`)
      expect(metrics.status).toBe(200)
      expect(await metrics.text()).toContain('caipay_jobs_queued')
      expect(await (await fetch(`${server.url}/healthz`)).json()).toEqual({ ok: true })
      expect((await fetch(`${server.url}/readyz`)).status).toBe(200)
      const other = await fetch(`${server.url}/v1/merchants`)
      expect(other.status).toBe(404)
      expect(await other.json()).toMatchObject({ code: 'invalid_params' })
      expect((await fetch(`${server.url}/metrics`, { method: 'POST' })).status).toBe(405)
    } finally {
      await server.close()
    }
  })
})

describe('startServer with a metrics port', () => {
  it('an API instance keeps /metrics off its public port and serves it on the metrics port', async () => {
    const api = await startServer({ role: 'api', databaseUrl: t.databaseUrl, port: 0, metricsPort: 0 })
    try {
      expect((await fetch(`${api.url}/metrics`)).status).toBe(404)
      expect((await fetch(`${api.url}/readyz`)).status).toBe(200)
      const metrics = await fetch(`${api.metricsUrl}/metrics`)
      expect(metrics.status).toBe(200)
      expect(await metrics.text()).toContain('caipay_db_pool_max 10')
    } finally {
      await api.stop()
    }
  })
})
