/**
 * Load generation in a separate process.
 * - `runLoad`: autocannon at full speed against one route, the path rotating over a list (e.g. payment
 *   ids), optionally with a fresh `Idempotency-Key` per request. At a fixed `overallRate` it is an
 *   open-loop paced generator instead (`paced`): autocannon's rate mode sends each second's quota in a
 *   burst and then "corrects" for coordinated omission with a 1 ms expected interval, which turns one
 *   slow answer into dozens of made-up samples; see there.
 * - `runProbe`: a light latency probe (few connections, a fixed number of requests, microsecond
 *   timing) for the scale comparison, where autocannon's whole-millisecond histogram is too coarse.
 */
import http from 'node:http'
import autocannon from 'autocannon'
import { isJobChild, runJob, serveJob } from './child.js'
import { Connection, headLines, requestBytes } from './wire.js'

export interface LoadSpec {
  url: string
  method: 'GET' | 'POST'
  /** Rotated request by request (every connection walks the list from a different place). */
  paths: string[]
  headers?: Record<string, string>
  body?: string
  /** A unique `Idempotency-Key` on every request. */
  idempotencyKeys?: boolean
  connections: number
  durationS: number
  /** Unmeasured run first, same settings, so the server's JIT and pools are warm. */
  warmupS?: number
  /** Stop after this many requests instead of after `durationS` (autocannon runs only). */
  requests?: number
  /** Requests per second from all connections together, sent at an even pace (open loop). */
  overallRate?: number
}

export interface LoadResult {
  /** Successful (2xx) requests per second over the run. */
  rps: number
  /** Milliseconds (autocannon records whole milliseconds; the paced generator microseconds). */
  p50: number
  p90: number
  p99: number
  mean: number
  requests: number
  non2xx: number
  errors: number
  timeouts: number
  durationS: number
  /** CPU milliseconds the load generator itself used in the measured run. */
  cpuMs: number
  /** Paced runs: p99 of how late the generator sent requests (ms); near 0 when it kept the pace. */
  sendLagP99?: number
}

export interface ProbeTarget {
  url: string
  paths: string[]
  headers?: Record<string, string>
}

export interface ProbeSpec {
  /** Requests alternate between the targets, so each sees the same moments of a noisy machine. */
  targets: ProbeTarget[]
  /** Concurrent keep-alive connections per target. */
  concurrency: number
  /** Measured requests per target (after `warmup` unmeasured ones). */
  requests: number
  warmup?: number
}

export interface ProbeResult {
  /** Milliseconds, microsecond resolution. */
  p50: number
  p99: number
  mean: number
  requests: number
  /** Answers other than 200. */
  failures: number
}

type Job = { kind: 'load'; spec: LoadSpec } | { kind: 'probe'; spec: ProbeSpec }

export function runLoad(spec: LoadSpec): Promise<LoadResult> {
  return runJob<LoadResult>('load.ts', { kind: 'load', spec } satisfies Job)
}

/** One result per target, in order. */
export function runProbe(spec: ProbeSpec): Promise<ProbeResult[]> {
  return runJob<ProbeResult[]>('load.ts', { kind: 'probe', spec } satisfies Job)
}

function cannon(spec: LoadSpec, durationS: number): Promise<autocannon.Result> {
  let next = 0
  let key = 0
  const tag = `${process.pid}-${Date.now().toString(36)}`
  const paths = spec.paths
  const request: autocannon.Request = {
    method: spec.method,
    path: paths[0]!,
    ...(spec.body !== undefined ? { body: spec.body } : {}),
    headers: { ...spec.headers, ...(spec.body !== undefined ? { 'content-type': 'application/json' } : {}) },
    setupRequest: (req) => {
      req.path = paths[next++ % paths.length]!
      if (spec.idempotencyKeys) req.headers = { ...req.headers, 'idempotency-key': `bench-${tag}-${key++}` }
      return req
    },
  }
  return autocannon({
    url: spec.url,
    connections: spec.connections,
    ...(spec.requests ? { amount: spec.requests } : { duration: durationS }),
    requests: [request],
  })
}

/**
 * Open-loop load at a constant rate (as wrk2): request i is due at start + i / rate whatever the
 * answers before it, and its latency counts from that moment, so a stall shows in every request it
 * delays and in none it does not. Requests wait for one of `connections` keep-alive sockets. The first
 * `warmupS` seconds run at the same pace on the same sockets and are not recorded. It
 * speaks HTTP/1.1 on raw sockets (pre-built heads, Content-Length framing): node:http costs several
 * times more CPU per request, which on a small machine would take the server's share and measure
 * the generator (bench/wire.ts).
 */
async function paced(spec: LoadSpec & { overallRate: number }) {
  const url = new URL(spec.url)
  const tag = `${process.pid}-${Date.now().toString(36)}-paced`
  const body = spec.body === undefined ? undefined : Buffer.from(spec.body)
  const lines = headLines(url, spec.headers)
  const bytesOf = (i: number) => {
    const key = spec.idempotencyKeys ? `idempotency-key: bench-${tag}-${i}\r\n` : ''
    return requestBytes(spec.method, spec.paths[i % spec.paths.length]!, `${lines}${key}`, body)
  }

  const latencies: number[] = []
  let ok = 0
  let non2xx = 0
  /** How late the generator itself dispatched each request: large values would void the figures. */
  const lags: number[] = []
  const queue: { i: number; due: bigint }[] = []
  let outstanding = 0
  let drained: (() => void) | undefined
  let failure: Error | undefined

  const send = (connection: Connection, request: { i: number; due: bigint }) => {
    connection.send(bytesOf(request.i)).then(
      (answer) => {
        outstanding--
        if (request.i >= warmup) {
          latencies.push(Number(process.hrtime.bigint() - request.due) / 1e6)
          if (answer.status >= 200 && answer.status < 300) ok++
          else non2xx++
        }
        const next = queue.shift()
        if (next) send(connection, next)
        else idle.push(connection)
        if (outstanding === 0) drained?.()
      },
      (error: Error) => {
        failure ??= new Error(`paced load: ${error.message}`)
        drained?.()
      },
    )
  }

  const connections = Array.from({ length: spec.connections }, () => new Connection(url))
  await Promise.all(connections.map((c) => c.ready))
  const idle = [...connections]

  const warmup = Math.round(spec.overallRate * (spec.warmupS ?? 0))
  const total = warmup + Math.round(spec.overallRate * spec.durationS)
  const intervalNs = BigInt(Math.round(1e9 / spec.overallRate))
  const start = process.hrtime.bigint()
  const measuredFrom = start + BigInt(warmup) * intervalNs
  let sent = 0
  while (sent < total && !failure) {
    const dueNow = Math.min(total, Number((process.hrtime.bigint() - start) / intervalNs) + 1)
    const now = process.hrtime.bigint()
    for (; sent < dueNow; sent++) {
      const request = { i: sent, due: start + BigInt(sent) * intervalNs }
      if (sent >= warmup) lags.push(Number(now - request.due) / 1e6)
      outstanding++
      const connection = idle.pop()
      if (connection) send(connection, request)
      else queue.push(request)
    }
    await new Promise((resolve) => setTimeout(resolve, 1))
  }
  if (outstanding > 0 && !failure) await new Promise<void>((resolve) => (drained = resolve))
  const elapsedS = Number(process.hrtime.bigint() - measuredFrom) / 1e9
  for (const c of connections) c.close()
  if (failure) throw failure
  const sorted = latencies.sort((a, b) => a - b)
  return {
    rps: ok / elapsedS,
    p50: percentile(sorted, 0.5),
    p90: percentile(sorted, 0.9),
    p99: percentile(sorted, 0.99),
    mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
    requests: sorted.length,
    non2xx,
    errors: 0,
    timeouts: 0,
    durationS: elapsedS,
    sendLagP99: percentile(
      lags.sort((a, b) => a - b),
      0.99,
    ),
  }
}

async function load(spec: LoadSpec): Promise<LoadResult> {
  if (spec.overallRate !== undefined) {
    const cpu = process.cpuUsage()
    const r = await paced({ ...spec, overallRate: spec.overallRate })
    const used = process.cpuUsage(cpu)
    return { ...r, cpuMs: (used.user + used.system) / 1000 }
  }
  if (spec.warmupS) await cannon(spec, spec.warmupS)
  const cpu = process.cpuUsage()
  const r = await cannon(spec, spec.durationS)
  const used = process.cpuUsage(cpu)
  const ok = r['2xx']
  return {
    rps: ok / r.duration,
    p50: r.latency.p50,
    p90: r.latency.p90,
    p99: r.latency.p99,
    mean: r.latency.average,
    requests: r.requests.total,
    non2xx: r.non2xx,
    errors: r.errors,
    timeouts: r.timeouts,
    durationS: r.duration,
    cpuMs: (used.user + used.system) / 1000,
  }
}

async function probe(spec: ProbeSpec): Promise<ProbeResult[]> {
  const clients = spec.targets.map((t) => {
    const url = new URL(t.url)
    return {
      ...t,
      host: url.hostname,
      port: url.port,
      agent: new http.Agent({ keepAlive: true, maxSockets: spec.concurrency }),
      next: 0,
      latencies: [] as number[],
      failures: 0,
    }
  })
  const get = (client: (typeof clients)[number], path: string) =>
    new Promise<number>((resolve, reject) => {
      const req = http.request(
        {
          agent: client.agent,
          host: client.host,
          port: client.port,
          path,
          method: 'GET',
          headers: client.headers,
        },
        (res) => {
          res.resume()
          res.once('end', () => resolve(res.statusCode ?? 0))
        },
      )
      req.once('error', reject)
      req.end()
    })
  // Each worker does request 1 on target A, then on B, ...: the targets share every moment of the run.
  const worker = async (rounds: number, record: boolean) => {
    for (let i = 0; i < rounds; i++) {
      for (const client of clients) {
        const path = client.paths[client.next++ % client.paths.length]!
        const start = process.hrtime.bigint()
        const status = await get(client, path)
        const ms = Number(process.hrtime.bigint() - start) / 1e6
        if (!record) continue
        if (status !== 200) client.failures++
        client.latencies.push(ms)
      }
    }
  }
  const run = async (perTarget: number, record: boolean) => {
    const rounds = Math.ceil(perTarget / spec.concurrency)
    await Promise.all(Array.from({ length: spec.concurrency }, () => worker(rounds, record)))
  }
  await run(spec.warmup ?? Math.min(200, spec.requests), false)
  await run(spec.requests, true)
  return clients.map((client) => {
    client.agent.destroy()
    const sorted = client.latencies.sort((a, b) => a - b)
    return {
      p50: percentile(sorted, 0.5),
      p99: percentile(sorted, 0.99),
      mean: sorted.reduce((a, b) => a + b, 0) / sorted.length,
      requests: sorted.length,
      failures: client.failures,
    }
  })
}

export function percentile(sorted: readonly number[], q: number): number {
  if (sorted.length === 0) return Number.NaN
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!
}

if (isJobChild(import.meta.url))
  serveJob<Job, unknown>((job) => (job.kind === 'load' ? load(job.spec) : probe(job.spec)))
