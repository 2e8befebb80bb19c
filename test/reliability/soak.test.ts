import { type ChildProcess, spawn } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { createBuyer, isBaseOption } from '../gateway/support.js'

/**
 * A bounded soak on loopback: the real server (startServer, embedded PostgreSQL in a temp directory) in
 * its own process, mixed merchant and gateway traffic from a few concurrent clients for
 * CAIPAY_SOAK_SECONDS (default 30; e.g. 180 for a few minutes). Asserts:
 * - no 5xx and no error other than the deliberate ones (second refunds, confirming a cancelled payment,
 *   reading a payment that does not exist);
 * - after GC, the server's heapUsed grows by less than 24 MB and its RSS by less than 128 MB between the
 *   end of the warm-up and the end of the run (a leak of even 1 kB per request exceeds that);
 * - a clean shutdown: stop() resolves, the embedded PostgreSQL is gone (no postmaster.pid, port closed),
 *   and the process then exits by itself, i.e. stop() left no handle open.
 */
const seconds = Number(process.env.CAIPAY_SOAK_SECONDS ?? 30)
const clients = Number(process.env.CAIPAY_SOAK_CLIENTS ?? 6)
const warmupMs = Math.max(5_000, Math.min(20_000, seconds * 250))
const heapBound = 24 * 1024 * 1024
const rssBound = 128 * 1024 * 1024

interface Ready {
  url: string
  apiKey: string
  walletKey: string
  pid: number
}
type Memory = NodeJS.MemoryUsage
// biome-ignore lint/suspicious/noExplicitAny: parsed JSON from the wire, read field by field
type Wire = any

let child: ChildProcess
let dataDir: string
let ready: Ready
let exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>
const inbox: { type: string; [key: string]: unknown }[] = []
const waiters: (() => void)[] = []

function next(type: string, timeoutMs = 30_000): Promise<Record<string, Wire>> {
  return new Promise((resolve, reject) => {
    const deadline = setTimeout(
      () => reject(new Error(`no '${type}' from the server within ${timeoutMs} ms`)),
      timeoutMs,
    )
    const look = () => {
      const i = inbox.findIndex((m) => m.type === type)
      if (i === -1) return false
      clearTimeout(deadline)
      resolve(inbox.splice(i, 1)[0]!)
      return true
    }
    if (!look()) waiters.push(() => void look())
  })
}

function postmasterPidFile() {
  return join(dataDir, 'postgres', 'postmaster.pid')
}

beforeAll(async () => {
  dataDir = await mkdtemp(join(tmpdir(), 'caipay-soak-'))
  const script = fileURLToPath(new URL('./soakServer.ts', import.meta.url))
  child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', script, dataDir], {
    cwd: fileURLToPath(new URL('../..', import.meta.url)),
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    env: { ...process.env, NODE_OPTIONS: '' },
  })
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  exited = new Promise((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })))
  child.on('message', (message: { type: string }) => {
    inbox.push(message)
    for (const w of waiters.splice(0)) w()
  })
  ready = (await Promise.race([
    next('ready', 60_000),
    exited.then(({ code }) => {
      throw new Error(`soak server exited (${code}) before it was ready: ${stderr}`)
    }),
  ])) as Ready
})

afterAll(async () => {
  // Only when a test failed midway: our child, then the PostgreSQL it started (its pid file says which).
  if (child.exitCode === null && child.signalCode === null) {
    child.kill('SIGKILL')
    await exited
  }
  if (existsSync(postmasterPidFile())) {
    const pid = Number(readFileSync(postmasterPidFile(), 'utf8').split('\n')[0])
    if (pid > 0) {
      try {
        process.kill(pid, 'SIGQUIT')
      } catch {}
    }
    await new Promise((r) => setTimeout(r, 500))
  }
  await rm(dataDir, { recursive: true, force: true })
})

// ---------------------------------------------------------------------------------------------------

interface Tally {
  requests: number
  byRoute: Map<string, number[]>
  unexpected: string[]
  deliberate: Map<string, number>
  payments: Map<string, number>
}

const tally: Tally = {
  requests: 0,
  byRoute: new Map(),
  unexpected: [],
  deliberate: new Map(),
  payments: new Map(),
}

/** One request; anything but the expected status (and code, for deliberate errors) is recorded. */
async function call(
  label: string,
  method: string,
  path: string,
  headers: Record<string, string>,
  expected: { status: number; code?: string },
  body?: unknown,
): Promise<Wire> {
  const started = performance.now()
  let status = 0
  let text = ''
  try {
    const res = await fetch(`${ready.url}${path}`, {
      method,
      headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    status = res.status
    text = await res.text()
  } catch (error) {
    text = String(error)
  }
  const ms = performance.now() - started
  tally.requests += 1
  const times = tally.byRoute.get(label) ?? []
  times.push(ms)
  tally.byRoute.set(label, times)
  let json: Wire
  try {
    json = JSON.parse(text)
  } catch {
    json = undefined
  }
  const ok = status === expected.status && (expected.code === undefined || json?.code === expected.code)
  if (!ok) tally.unexpected.push(`${label}: ${method} ${path} -> ${status} ${text.slice(0, 300)}`)
  else if (expected.code) tally.deliberate.set(expected.code, (tally.deliberate.get(expected.code) ?? 0) + 1)
  return ok ? json : undefined
}

const buyer = createBuyer()

async function client(index: number, merchantId: string, until: number) {
  const merchant = { 'api-key': ready.apiKey, 'merchant-id': merchantId }
  const wallet = { 'api-key': ready.walletKey }
  let n = 0
  while (Date.now() < until) {
    n += 1
    const scenario = (index + n) % 5
    if (scenario <= 2) {
      // Pay, then refund (twice: the second is refused).
      const created = await call(
        'create payment',
        'POST',
        '/v1/payments',
        { ...merchant, 'idempotency-key': `soak-${index}-${n}` },
        { status: 201 },
        {
          referenceId: `soak-${index}-${n}`,
          amount: { unit: 'iso4217/USD', value: String(100 + (n % 900)) },
        },
      )
      if (!created) continue
      const id = created.paymentId as string
      await call('gateway payment', 'GET', `/v1/gateway/payment/${id}`, wallet, { status: 200 })
      const options = await call(
        'options',
        'POST',
        `/v1/gateway/payment/${id}/options`,
        wallet,
        { status: 200 },
        {
          accounts: Object.values(buyer.accounts),
        },
      )
      const option = (options?.options as PaymentOption[] | undefined)?.find(isBaseOption)
      if (!option) {
        tally.unexpected.push(`options: no base option for ${id}`)
        continue
      }
      const results = []
      for (const action of option.actions) results.push(await buyer.sign(action))
      const confirmed = await call(
        'confirm',
        'POST',
        `/v1/gateway/payment/${id}/confirm`,
        wallet,
        { status: 200 },
        {
          optionId: option.id,
          results,
        },
      )
      if (confirmed && confirmed.status !== 'succeeded')
        tally.unexpected.push(`confirm: ${id} is ${confirmed.status}`)
      await call('gateway status', 'GET', `/v1/gateway/payment/${id}/status`, wallet, { status: 200 })
      const read = await call('read payment', 'GET', `/v1/payments/${id}`, merchant, { status: 200 })
      if (read && read.status !== 'succeeded') tally.unexpected.push(`read: ${id} is ${read.status}`)
      await call('refund', 'POST', '/v1/refunds', merchant, { status: 201 }, { paymentId: id })
      await call(
        'refund',
        'POST',
        '/v1/refunds',
        merchant,
        { status: 409, code: 'already_refunded' },
        { paymentId: id },
      )
      tally.payments.set('succeeded', (tally.payments.get('succeeded') ?? 0) + 1)
    } else if (scenario === 3) {
      // The buyer walks away; a late confirm is refused.
      const created = await call(
        'create payment',
        'POST',
        '/v1/payments',
        merchant,
        { status: 201 },
        { referenceId: `walk-${index}-${n}`, amount: { unit: 'iso4217/USD', value: '250' } },
      )
      if (!created) continue
      const id = created.paymentId as string
      const options = await call(
        'options',
        'POST',
        `/v1/gateway/payment/${id}/options`,
        wallet,
        { status: 200 },
        {
          accounts: [buyer.accounts.base],
        },
      )
      await call('gateway cancel', 'POST', `/v1/gateway/payment/${id}/cancel`, wallet, { status: 200 })
      const option = options?.options?.[0] as PaymentOption | undefined
      if (option) {
        await call(
          'confirm',
          'POST',
          `/v1/gateway/payment/${id}/confirm`,
          wallet,
          { status: 409, code: 'invalid_state' },
          { optionId: option.id, results: [`0x${'11'.repeat(65)}`] },
        )
      }
      await call('payment status', 'GET', `/v1/payments/${id}/status`, merchant, { status: 200 })
      tally.payments.set('cancelled', (tally.payments.get('cancelled') ?? 0) + 1)
    } else {
      // Reads: listings (two pages), merchants, and a payment that does not exist.
      const page = await call('list payments', 'GET', '/v1/payments?limit=50', merchant, { status: 200 })
      if (page?.nextCursor) {
        await call(
          'list payments',
          'GET',
          `/v1/payments?limit=50&cursor=${encodeURIComponent(page.nextCursor)}`,
          merchant,
          { status: 200 },
        )
      }
      await call('merchant payments', 'GET', '/v1/merchants/payments?limit=20&status=succeeded', merchant, {
        status: 200,
      })
      await call('list merchants', 'GET', '/v1/merchants', merchant, { status: 200 })
      await call('read payment', 'GET', '/v1/payments/pay_doesnotexist', merchant, {
        status: 404,
        code: 'payment_not_found',
      })
    }
  }
}

function memory(): Promise<Memory> {
  child.send({ type: 'memory' })
  return next('memory') as Promise<Memory>
}

const mb = (n: number) => `${(n / 1024 / 1024).toFixed(1)} MB`

function percentile(values: number[], p: number) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0
}

describe(`soak: ${seconds} s of mixed traffic against a real server`, () => {
  it(
    'no 5xx, only deliberate errors, bounded memory',
    async () => {
      const created = await fetch(`${ready.url}/v1/merchants`, {
        method: 'POST',
        headers: {
          'api-key': ready.apiKey,
          'idempotency-key': 'soak-merchant',
          'content-type': 'application/json',
        },
        body: JSON.stringify({ merchantName: 'Soak Shop', merchantEmail: 'soak@example.com' }),
      })
      expect(created.status).toBe(201)
      const merchantId = ((await created.json()) as { merchant: { id: string } }).merchant.id
      const started = Date.now()
      const end = started + seconds * 1000

      const traffic = Promise.all(Array.from({ length: clients }, (_, i) => client(i, merchantId, end)))
      // Memory is compared from the end of the warm-up (JIT, pools and caches filled) to the end.
      await new Promise((r) => setTimeout(r, warmupMs))
      const baseline = await memory()
      const samples: string[] = [`warm ${mb(baseline.heapUsed)}/${mb(baseline.rss)}`]
      const sampler = setInterval(() => {
        memory().then(
          (m) => samples.push(`${Math.round((Date.now() - started) / 1000)}s ${mb(m.heapUsed)}/${mb(m.rss)}`),
          () => {},
        )
      }, 10_000)
      await traffic
      clearInterval(sampler)
      const final = await memory()
      samples.push(`end ${mb(final.heapUsed)}/${mb(final.rss)}`)

      const elapsed = (Date.now() - started) / 1000
      const latencies = [...tally.byRoute.entries()]
        .map(
          ([route, t]) =>
            `${route} n=${t.length} p50=${percentile(t, 50).toFixed(0)} p99=${percentile(t, 99).toFixed(0)}`,
        )
        .join('; ')
      console.info(
        `soak: ${tally.requests} requests in ${elapsed.toFixed(0)} s (${(tally.requests / elapsed).toFixed(0)}/s) from ${clients} clients; ` +
          `payments ${JSON.stringify(Object.fromEntries(tally.payments))}; deliberate errors ${JSON.stringify(Object.fromEntries(tally.deliberate))}\n` +
          `latency ms: ${latencies}\nheapUsed/rss after GC: ${samples.join(', ')}`,
      )

      expect(tally.unexpected.slice(0, 20)).toEqual([])
      expect(tally.requests).toBeGreaterThan(seconds * 10)
      expect(tally.deliberate.get('already_refunded') ?? 0).toBeGreaterThan(0)
      expect(final.heapUsed - baseline.heapUsed, samples.join(', ')).toBeLessThan(heapBound)
      expect(final.rss - baseline.rss, samples.join(', ')).toBeLessThan(rssBound)

      // The server's own view agrees with what the clients did: every refund made, once its simulated
      // transfer (a job, due at once) has run.
      let body: { data: { refunded: boolean }[] } = { data: [] }
      for (const deadline = Date.now() + 15_000; Date.now() < deadline; ) {
        const list = await fetch(`${ready.url}/v1/merchants/payments?limit=200&status=succeeded`, {
          headers: { 'api-key': ready.apiKey, 'merchant-id': merchantId },
        })
        body = (await list.json()) as typeof body
        if (body.data.every((p) => p.refunded)) break
        await new Promise((resolve) => setTimeout(resolve, 200))
      }
      expect(body.data.length).toBeGreaterThan(0)
      expect(body.data.every((p) => p.refunded)).toBe(true)
    },
    (seconds + 90) * 1000,
  )

  it('shuts down cleanly: stop() resolves, PostgreSQL stopped, nothing left open', async () => {
    const pgPort = (JSON.parse(readFileSync(join(dataDir, 'postgres.json'), 'utf8')) as { port: number }).port
    expect(existsSync(postmasterPidFile())).toBe(true)
    child.send({ type: 'stop' })
    const stopped = await next('stopped', 30_000)
    expect(stopped.error).toBeUndefined()
    // Once the IPC channel is let go, only a leaked handle could keep the process alive.
    const exit = await Promise.race([exited, new Promise<'hung'>((r) => setTimeout(() => r('hung'), 15_000))])
    expect(exit, `still open after stop(): ${JSON.stringify(stopped.resources)}`).toEqual({
      code: 0,
      signal: null,
    })
    expect(existsSync(postmasterPidFile())).toBe(false)
    const refused = await new Promise<boolean>((resolve) => {
      const socket = net.connect(pgPort, '127.0.0.1')
      socket.once('connect', () => {
        socket.destroy()
        resolve(false)
      })
      socket.once('error', () => resolve(true))
    })
    expect(refused).toBe(true)
    console.info(`stop() took ${stopped.ms} ms`)
  }, 60_000)
})
