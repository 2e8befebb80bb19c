/**
 * Webhook delivery latency: milliseconds from a payment's state change (the event's `created_at`, the
 * server's clock at the change) to the moment a loopback receiver has the whole signed request, over
 * 1,000 events: 500 `payment.created` (woken in-process after the creating statement) and 500
 * `payment.cancelled` (woken by the NOTIFY its commit sends). One payment at a time, so the figures are
 * latency, not queueing. Run: `npx tsx bench/webhooks.ts` (embedded PostgreSQL unless DATABASE_URL).
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createApiKey, createPartner } from '../src/server/accounts/accounts.js'
import { resolveConfig } from '../src/server/config.js'
import { startServer } from '../src/server/server.js'
import { openBenchCluster } from './postgres.js'
import { median } from './stats.js'

const payments = 500
const cluster = await openBenchCluster()
const databaseUrl = await cluster.createDatabase('caipay_bench_webhooks')
const server = await startServer({ port: 0, databaseUrl, config: resolveConfig({ rateLimit: false }) })

const latencies: Record<string, number[]> = { 'payment.created': [], 'payment.cancelled': [] }
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (chunk: Buffer) => chunks.push(chunk))
  req.on('end', () => {
    const received = Date.now()
    const event = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { type: string; created_at: string }
    latencies[event.type]?.push(received - new Date(event.created_at).getTime())
    res.writeHead(204).end()
  })
})
await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve))
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`

const partnerId = await createPartner(server.db)
const { apiKey } = await createApiKey(server.db, { partnerId, mode: 'test', role: 'partner' })
async function call(method: string, path: string, body?: unknown, extra: Record<string, string> = {}) {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { 'api-key': apiKey, 'content-type': 'application/json', ...extra },
    ...(body ? { body: JSON.stringify(body) } : {}),
  })
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`)
  return (await res.json()) as { paymentId: string; merchant: { id: string } }
}
await call('POST', '/v1/webhook-endpoints', { url: receiverUrl })
const merchant = await call(
  'POST',
  '/v1/merchants',
  { merchantName: 'Bench', merchantEmail: 'bench@example.com' },
  { 'idempotency-key': 'bench-merchant' },
)
const merchantId = merchant.merchant.id

const count = () => latencies['payment.created']!.length + latencies['payment.cancelled']!.length
for (let i = 0; i < payments; i++) {
  const created = await call(
    'POST',
    '/v1/payments',
    { referenceId: `bench-${i}`, amount: { unit: 'iso4217/USD', value: '100' } },
    { 'merchant-id': merchantId },
  )
  await call('POST', `/v1/payments/${created.paymentId}/cancel`, undefined, { 'merchant-id': merchantId })
}
const deadline = Date.now() + 30_000
while (count() < payments * 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))

const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.ceil((p / 100) * xs.length) - 1]!
const all = [...latencies['payment.created']!, ...latencies['payment.cancelled']!]
const line = (name: string, xs: number[]) =>
  console.log(
    `${name.padEnd(18)} n=${xs.length}  median ${median(xs)} ms  p99 ${percentile(xs, 99)} ms  max ${Math.max(...xs)} ms`,
  )
console.log(`webhook delivery latency, state change -> receipt (loopback, PostgreSQL ${cluster.version})`)
line('all events', all)
for (const [type, xs] of Object.entries(latencies)) line(type, xs)

receiver.close()
await server.stop()
await cluster.dropDatabase(databaseUrl)
await cluster.close()
