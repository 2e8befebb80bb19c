/**
 * What the metrics and tracing hooks cost a request when tracing is off, as a ratio in one run:
 * `npm run bench:observability [-- --rounds 8 --blocks 6 --iterations 50]` (embedded PostgreSQL unless DATABASE_URL).
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
import {
  countPaymentChanges,
  observeHttpRequest,
  processRegistry,
  setMetricsRecording,
} from '../src/server/metrics/counters.js'
import { currentTraceparent, inSpan, tracingOn } from '../src/server/metrics/tracing.js'
import { openDatabase } from '../src/server/store/db.js'
import { openBenchCluster } from './postgres.js'

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '8' },
    blocks: { type: 'string', default: '6' },
    iterations: { type: 'string', default: '50' },
    // Both apps with the hooks on: what the same code measures against itself (the method's noise).
    control: { type: 'boolean', default: false },
  },
})
const rounds = Number(values.rounds)
const blocks = Number(values.blocks)
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
  bare: await buildApp({ db: database.db, config: { rateLimit: false }, requestHooks: values.control }),
}
const noWork = () => Promise.resolve()
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

/** CPU microseconds used by `iterations` payments' requests on one app. */
async function measure(variant: keyof typeof apps): Promise<number> {
  setMetricsRecording(variant === 'hooks' || values.control)
  const start = process.cpuUsage()
  for (let i = 0; i < iterations; i++) await lifecycle(apps[variant])
  const used = process.cpuUsage(start)
  return used.user + used.system
}

// Warm-up (JIT, pools, caches) on both, not measured.
for (const variant of ['hooks', 'bare'] as const) {
  setMetricsRecording(variant === 'hooks' || values.control)
  for (let i = 0; i < 200; i++) await lifecycle(apps[variant])
}

// Short blocks, alternating (ABAB in even rounds, BABA in odd ones): whatever else the machine does
// lands on both variants alike.
const measured: { hooks: number[]; bare: number[] } = { hooks: [], bare: [] }
const requestsPerVariant = blocks * iterations * 3
for (let round = 0; round < rounds; round++) {
  const used = { hooks: 0, bare: 0 }
  for (let block = 0; block < blocks * 2; block++) {
    const variant = (block + round) % 2 === 0 ? 'hooks' : 'bare'
    used[variant] += await measure(variant)
  }
  const hooks = used.hooks / requestsPerVariant
  const bare = used.bare / requestsPerVariant
  measured.hooks.push(hooks)
  measured.bare.push(bare)
  console.log(
    `round ${round + 1}: hooks ${hooks.toFixed(1)} µs, bare ${bare.toFixed(1)} µs CPU per request, ratio ${(hooks / bare).toFixed(3)}`,
  )
}
setMetricsRecording(true)

// The switch did what it says: the histogram counted the hooks app's requests and none of the bare one's.
const counted = (await processRegistry.getSingleMetric('caipay_http_request_duration_seconds')!.get()).values
  .filter(
    (value) => (value as { metricName?: string }).metricName === 'caipay_http_request_duration_seconds_count',
  )
  .reduce((sum, value) => sum + value.value, 0)
const hooksRequests = 200 * 3 + rounds * requestsPerVariant + 1
if (!values.control && counted !== hooksRequests)
  throw new Error(`counted ${counted} requests, expected ${hooksRequests}`)

// The hooks' own work timed alone, per request: the histogram observation a request makes, a payment
// transition counted (one per three requests here), and the tracing seam's off path (a span, a job trace,
// a traceparent read). A tight bound on what they can add, where the whole-request figures are noisy.
const calls = 1_000_000
setMetricsRecording(true)
const alone = process.cpuUsage()
for (let i = 0; i < calls; i++) {
  observeHttpRequest('/v1/payments/:id', 'GET', 200, 0.001)
  if (i % 3 === 0) countPaymentChanges('payment.cancelled', [{ mode: 'test', option_amount: null }])
  void inSpan('payment.confirm', { 'caipay.payment_id': 'pay_bench' }, noWork)
  currentTraceparent()
}
const aloneCpu = process.cpuUsage(alone)
const hookMicros = (aloneCpu.user + aloneCpu.system) / calls

const median = (xs: number[]) => {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = Math.floor(sorted.length / 2)
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}
const ratios = measured.hooks.map((hooks, i) => hooks / measured.bare[i]!)
console.log(
  `\n${rounds} rounds x ${blocks} blocks x ${iterations} payments x 3 requests per variant (create, read, cancel; test mode, inject)\n` +
    `CPU per request, median of rounds: hooks ${median(measured.hooks).toFixed(1)} µs, bare ${median(measured.bare).toFixed(1)} µs\n` +
    `ratio hooks / bare: median ${median(ratios).toFixed(3)}, range ${Math.min(...ratios).toFixed(3)}-${Math.max(...ratios).toFixed(3)}\n` +
    `the hooks alone: ${hookMicros.toFixed(3)} µs CPU per request (${calls.toLocaleString('en')} calls), ` +
    `ratio (bare + hooks) / bare = ${((median(measured.bare) + hookMicros) / median(measured.bare)).toFixed(5)}`,
)
await apps.hooks.close()
await apps.bare.close()
await database.close()
await cluster.close()
