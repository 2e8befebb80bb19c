/**
 * What the metrics and tracing hooks cost a request when tracing is off, as a ratio in one run:
 * `npm run bench:observability [-- --rounds 12 --iterations 600]` (embedded PostgreSQL unless DATABASE_URL).
 *
 * One process, one database, two apps: `hooks` as caipay ships (the per-request histogram, payment
 * transitions counted, the tracing seam's calls, which with no OTLP endpoint configured are an
 * `undefined` check each) and `bare` (buildApp's `requestHooks: false` and counting switched off). Each
 * round runs the same requests against each app in turn (ABBA order, so drift and warm-up fall on both
 * alike): create a test-mode payment, read it, cancel it (a counted transition), through Fastify's
 * `inject` (every hook runs; no socket, so the share of the hooks is larger than over a network). CPU is
 * this process's user + system time (process.cpuUsage), never wall time: the machine is shared.
 * PostgreSQL's CPU is the same for both and not in the figure.
 */
import { parseArgs } from 'node:util'
import { createApiKey, createPartner } from '../src/server/accounts/accounts.js'
import { buildApp } from '../src/server/app.js'
import { setMetricsRecording } from '../src/server/metrics/counters.js'
import { tracingOn } from '../src/server/metrics/tracing.js'
import { openDatabase } from '../src/server/store/db.js'
import { openBenchCluster } from './postgres.js'

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '12' }, iterations: { type: 'string', default: '600' } },
})
const rounds = Number(values.rounds)
const iterations = Number(values.iterations)
if (tracingOn()) throw new Error('Measure with tracing off: unset OTEL_EXPORTER_OTLP_ENDPOINT.')

const cluster = await openBenchCluster()
const url = await cluster.createDatabase('caipay_bench_observability')
const database = await openDatabase({ databaseUrl: url })
const partnerId = await createPartner(database.db, { name: 'bench' })
const { apiKey } = await createApiKey(database.db, { partnerId, mode: 'test', role: 'partner' })
const apps = {
  // No rate limit (a bench of one caller), on both alike.
  hooks: await buildApp({ db: database.db, config: { rateLimit: false } }),
  bare: await buildApp({ db: database.db, config: { rateLimit: false }, requestHooks: false }),
}
const merchant = await apps.hooks.inject({
  method: 'POST',
  url: '/v1/merchants',
  headers: { 'api-key': apiKey, 'idempotency-key': 'bench-merchant' },
  payload: { merchantName: 'Bench Shop', merchantEmail: 'shop@bench.example' },
})
const merchantId = merchant.json().merchant.id as string
const headers = { 'api-key': apiKey, 'merchant-id': merchantId }
let sequence = 0

/** One payment's three requests; throws on anything but the expected answers. */
async function lifecycle(app: (typeof apps)['hooks']): Promise<void> {
  const created = await app.inject({
    method: 'POST',
    url: '/v1/payments',
    headers: { ...headers, 'idempotency-key': `bench-${++sequence}` },
    payload: { referenceId: 'bench-order', amount: { unit: 'iso4217/USD', value: '1250' } },
  })
  if (created.statusCode !== 201) throw new Error(`create: ${created.statusCode} ${created.body}`)
  const id = created.json().paymentId as string
  const read = await app.inject({ method: 'GET', url: `/v1/payments/${id}`, headers })
  if (read.statusCode !== 200) throw new Error(`read: ${read.statusCode} ${read.body}`)
  const cancelled = await app.inject({
    method: 'POST',
    url: `/v1/payments/${id}/cancel`,
    headers: { ...headers, 'idempotency-key': `bench-${++sequence}` },
  })
  if (cancelled.statusCode !== 200) throw new Error(`cancel: ${cancelled.statusCode} ${cancelled.body}`)
}

/** CPU microseconds per request of `iterations` payments' requests on one app. */
async function measure(variant: keyof typeof apps): Promise<number> {
  setMetricsRecording(variant === 'hooks')
  const start = process.cpuUsage()
  for (let i = 0; i < iterations; i++) await lifecycle(apps[variant])
  const used = process.cpuUsage(start)
  return (used.user + used.system) / (iterations * 3)
}

// Warm-up (JIT, pools, caches) on both, not measured.
for (const variant of ['hooks', 'bare'] as const) {
  setMetricsRecording(variant === 'hooks')
  for (let i = 0; i < 200; i++) await lifecycle(apps[variant])
}

const measured: { hooks: number[]; bare: number[] } = { hooks: [], bare: [] }
for (let round = 0; round < rounds; round++) {
  const order =
    round % 2 === 0
      ? (['hooks', 'bare', 'bare', 'hooks'] as const)
      : (['bare', 'hooks', 'hooks', 'bare'] as const)
  const perRound: Record<string, number[]> = { hooks: [], bare: [] }
  for (const variant of order) perRound[variant]!.push(await measure(variant))
  const hooks = (perRound.hooks![0]! + perRound.hooks![1]!) / 2
  const bare = (perRound.bare![0]! + perRound.bare![1]!) / 2
  measured.hooks.push(hooks)
  measured.bare.push(bare)
  console.log(
    `round ${round + 1}: hooks ${hooks.toFixed(1)} µs, bare ${bare.toFixed(1)} µs CPU per request, ratio ${(hooks / bare).toFixed(3)}`,
  )
}
setMetricsRecording(true)

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const ratios = measured.hooks.map((hooks, i) => hooks / measured.bare[i]!)
console.log(
  `\n${rounds} rounds x ${iterations} payments x 3 requests per variant (create, read, cancel; test mode, inject)\n` +
    `CPU per request, median of rounds: hooks ${median(measured.hooks).toFixed(1)} µs, bare ${median(measured.bare).toFixed(1)} µs\n` +
    `ratio hooks / bare: median ${median(ratios).toFixed(3)}, range ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}`,
)
await apps.hooks.close()
await apps.bare.close()
await database.close()
await cluster.close()
