/**
 * The mixed workload: three classes of clients on one server as it ships, all at once, on a database of
 * a million payments (bench/scale.ts populates it).
 * - `wallets`: wallets showing an open payment poll `GET /v1/gateway/payment/{id}/status` at the
 *   `pollInMs` each answer gives (the wallet library's loop), staggered over the first interval. Their
 *   latency counts from when the poll was due, so a stalled server shows in every poll it delays.
 * - `merchants`: closed loop; each round `POST /v1/payments` (Idempotency-Key), the new payment's
 *   `GET /v1/payments/{id}/status`, and the status of one of the merchant's older payments.
 * - `flows`: closed loop; each round a wallet pays one payment through the gateway: options -> fetch ->
 *   confirm -> status until final (test mode). The payments are inserted beforehand.
 * Each class runs in its own load-generator process (a job child); they share a start time, a warm-up
 * and a measured window, over which the orchestrator reads the CPU of the server process and of
 * PostgreSQL from /proc and samples the server's resident memory (VmRSS).
 *
 * CPU per request by class: /proc gives only the server's and PostgreSQL's totals over the mixed
 * window, not a split by class. So, on the same server and database right after the mixed run, each
 * class runs alone at the rate it reached in the mix (the same wallets; merchants and flows paced at
 * their mixed rounds per second), and its CPU per request alone is measured the same way. The mixed
 * totals are then apportioned by those weights: class c gets
 *   total x (alone_c x requests_c) / sum over classes (alone_k x requests_k),
 * per request alone_c x total / sum(alone_k x requests_k). The classes' shares then add up to what
 * the processes really spent in the mix, and `interference` (mixed total / sum of the alone figures
 * at the mixed counts) shows what running together costs on top of running apart: below 1, requests
 * cost less together (fuller event-loop turns and fewer idle wake-ups per request on a busier server),
 * above 1 they get in each other's way. Background work of the server (jobs, the webhook dispatcher) is
 * in every figure, spread the same way.
 */
import { randomBytes } from 'node:crypto'
import { isJobChild, runJob, serveJob } from './child.js'
import { processCpuMs, residentBytes, treeCpuMs } from './cpu.js'
import { percentile } from './load.js'
import { ConnectionPool, headLines, requestBytes } from './wire.js'

export type MixedClassName = 'wallets' | 'merchants' | 'flows'

export interface MixedClass {
  name: MixedClassName
  headers: Record<string, string>
  /**
   * wallets: the payments they poll (wallet i polls ids[i % length]); merchants: older payments whose
   * status they read; flows: payments to pay, each once, in order.
   */
  ids: string[]
  /** wallets: how many poll; merchants and flows: concurrent clients of the closed loop. */
  actors: number
  /** merchants and flows: rounds started per second at an even pace instead of the closed loop. */
  rate?: number
}

interface ClassJob extends MixedClass {
  url: string
  /** Epoch milliseconds: when the warm-up starts; the measured window follows it. */
  startAt: number
  warmupS: number
  durationS: number
}

export interface Latency {
  requests: number
  /** Milliseconds. */
  p50: number
  p99: number
}

export interface ClassResult {
  name: MixedClassName
  /** Requests answered within the measured window, and per second. */
  requests: number
  rps: number
  /** Rounds completed within it (a poll; create + two reads; a paid payment), and per second. */
  rounds: number
  roundsPerS: number
  /** Per request, all kinds together; per round; per kind of request. */
  latency: Latency
  roundLatency: Latency
  kinds: Record<string, Latency>
  /** Payments of `ids` taken (flows), so a later run starts after them. */
  used: number
  /** Flows: every payment of `ids` was taken before the window ended (the run stopped short). */
  exhausted: boolean
  /** CPU milliseconds of this generator process within the window. */
  cpuMs: number
  /** Seconds the generator started after `startAt` (its warm-up is that much shorter). */
  lateS: number
}

const clock = () => performance.timeOrigin + performance.now()
const sleepUntil = (t: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, t - clock())))

interface Status {
  status: string
  isFinal: boolean
  pollInMs: number | null
}

interface Sample {
  kind: string
  ms: number
}

/** One class of clients (in a job child). Any non-2xx answer or lost connection fails the run. */
async function runClass(job: ClassJob): Promise<ClassResult> {
  const url = new URL(job.url)
  const lines = headLines(url, job.headers)
  const windowStart = job.startAt + job.warmupS * 1000
  const windowEnd = windowStart + job.durationS * 1000
  const connections = job.name === 'wallets' ? Math.min(32, job.actors) : job.actors
  const pool = new ConnectionPool(url, connections)
  await pool.open()
  const lateS = Math.max(0, clock() - job.startAt) / 1000
  const samples: Sample[] = []
  const rounds: number[] = []
  const failures: string[] = []
  let cpuAtStart: NodeJS.CpuUsage | undefined
  let cpuUsed: NodeJS.CpuUsage | undefined
  const cpuTimers = [
    setTimeout(() => (cpuAtStart = process.cpuUsage()), Math.max(0, windowStart - clock())),
    setTimeout(() => (cpuUsed = process.cpuUsage(cpuAtStart)), Math.max(0, windowEnd - clock())),
  ]
  const inWindow = (t: number) => t >= windowStart && t < windowEnd
  const tag = `${process.pid}-${Date.now().toString(36)}`
  let sequence = 0

  const call = async <T = Status>(
    kind: string,
    method: string,
    path: string,
    body?: unknown,
    extra = '',
  ): Promise<T> => {
    const sent = clock()
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body))
    const answer = await pool.send(requestBytes(method, path, `${lines}${extra}`, payload))
    const done = clock()
    if (answer.status < 200 || answer.status >= 300) {
      throw new Error(`${method} ${path}: ${answer.status} ${answer.body.toString()}`)
    }
    if (inWindow(done)) samples.push({ kind, ms: done - sent })
    return JSON.parse(answer.body.toString()) as T
  }
  const round = async (body: () => Promise<void>, due = clock()) => {
    try {
      await body()
      const done = clock()
      if (inWindow(done)) rounds.push(done - due)
    } catch (error) {
      failures.push(error instanceof Error ? error.message : String(error))
    }
  }

  let used = 0
  const exhausted = () => job.name === 'flows' && used >= job.ids.length
  /** One client's round (each client its own wallet account). */
  const client: () => () => Promise<void> = {
    merchants: () => {
      const create = { referenceId: 'mixed', amount: { unit: 'iso4217/USD', value: '1250' } }
      return async () => {
        const key = `idempotency-key: mixed-${tag}-${sequence++}\r\n`
        const payment = await call<{ paymentId: string }>('create', 'POST', '/v1/payments', create, key)
        await call('status', 'GET', `/v1/payments/${payment.paymentId}/status`)
        const older = job.ids[Math.floor(Math.random() * job.ids.length)]!
        await call('status', 'GET', `/v1/payments/${older}/status`)
      }
    },
    flows: () => {
      const account = `eip155:8453:0x${randomBytes(20).toString('hex')}`
      return async () => {
        const id = job.ids[used++]
        if (id === undefined) throw new Error(`flows: all ${job.ids.length} payments paid; insert more`)
        const base = `/v1/gateway/payment/${id}`
        const options = await call<{ options: { id: string }[] }>('options', 'POST', `${base}/options`, {
          accounts: [account],
        })
        const optionId = options.options[0]!.id
        const fetched = await call<{ actions: unknown[] }>('fetch', 'POST', `${base}/fetch`, {
          optionId,
          data: '',
        })
        const results = fetched.actions.map(() => `0x${randomBytes(65).toString('hex')}`)
        const key = `idempotency-key: mixed-${tag}-${sequence++}\r\n`
        let status = await call('confirm', 'POST', `${base}/confirm`, { optionId, results }, key)
        for (let polls = 0; !status.isFinal; polls++) {
          if (polls === 50) throw new Error(`flows: ${id} not final after 50 polls`)
          await new Promise((resolve) => setTimeout(resolve, status.pollInMs ?? 1000))
          status = await call('status', 'GET', `${base}/status`)
        }
        if (status.status !== 'succeeded') throw new Error(`flows: ${id} ended ${status.status}`)
      }
    },
    wallets: () => async () => {},
  }[job.name]

  if (job.name === 'wallets') {
    // Each wallet polls again pollInMs after an answer (the wallet library's loop), from its first due time.
    await Promise.all(
      Array.from({ length: job.actors }, async (_, w) => {
        const path = `/v1/gateway/payment/${job.ids[w % job.ids.length]}/status`
        let due = job.startAt + (w / job.actors) * 2000
        while (due < windowEnd && failures.length === 0) {
          await sleepUntil(due)
          let next = due + 2000
          await round(async () => {
            const status = await call('status', 'GET', path)
            next = clock() + (status.pollInMs ?? 2000)
          }, due)
          due = next
        }
      }),
    )
  } else if (job.rate) {
    const pending: Promise<void>[] = []
    for (let i = 0; failures.length === 0 && !exhausted(); i++) {
      const due = job.startAt + (i * 1000) / job.rate
      if (due >= windowEnd) break
      await sleepUntil(due)
      pending.push(round(client(), due))
    }
    await Promise.all(pending)
  } else {
    await sleepUntil(job.startAt)
    await Promise.all(
      Array.from({ length: job.actors }, async () => {
        const work = client()
        while (clock() < windowEnd && failures.length === 0 && !exhausted()) await round(work)
      }),
    )
  }
  pool.close()
  for (const timer of cpuTimers) clearTimeout(timer)
  if (failures.length) {
    throw new Error(
      `${job.name}: ${failures.length} failed rounds, first: ${failures.slice(0, 3).join('; ')}`,
    )
  }
  const cpu = cpuUsed ?? process.cpuUsage(cpuAtStart)
  const latency = (ms: number[]): Latency => {
    const sorted = ms.sort((a, b) => a - b)
    return { requests: sorted.length, p50: percentile(sorted, 0.5), p99: percentile(sorted, 0.99) }
  }
  const kinds: Record<string, Latency> = {}
  for (const kind of new Set(samples.map((s) => s.kind))) {
    kinds[kind] = latency(samples.filter((s) => s.kind === kind).map((s) => s.ms))
  }
  return {
    name: job.name,
    requests: samples.length,
    rps: samples.length / job.durationS,
    rounds: rounds.length,
    roundsPerS: rounds.length / job.durationS,
    latency: latency(samples.map((s) => s.ms)),
    roundLatency: latency(rounds),
    kinds,
    used,
    exhausted: exhausted() && clock() < windowEnd,
    cpuMs: (cpu.user + cpu.system) / 1000,
    lateS,
  }
}

export interface MixedPlan {
  url: string
  serverPid: number
  postmasterPid: number | undefined
  classes: MixedClass[]
  warmupS: number
  durationS: number
  /** Each class alone afterwards (for the CPU split). */
  aloneWarmupS: number
  aloneDurationS: number
  /** How often the server's VmRSS is read during the mixed run. */
  memorySampleMs: number
  /** Called once the mixed run is over, before the classes run alone. */
  onMixed?: (results: ClassResult[]) => void
}

/** CPU microseconds per request of the server process and of PostgreSQL. */
export interface CpuPerRequest {
  server: number
  postgres: number
}

export interface MixedOutcome {
  classes: {
    mixed: ClassResult
    alone: ClassResult
    /** In the mix (apportioned, see the header) and alone. */
    cpu: CpuPerRequest
    aloneCpu: CpuPerRequest
  }[]
  /** Milliseconds of CPU over the mixed window; seconds of the window. */
  total: { serverMs: number; postgresMs: number; loadgenMs: number; windowS: number }
  /** Mixed total / sum of the alone figures at the mixed request counts. */
  interference: CpuPerRequest
  memory: {
    /** Before the load started, the largest sample, the last one (end of the window), bytes. */
    startBytes: number
    maxBytes: number
    finalBytes: number
    /** The sample in the middle of the measured window: final - middle shows a trend. */
    middleBytes: number
    samples: number
    /** Tenths of the measured window: the sample at the end of each (the shape of the curve). */
    tenths: number[]
  }
}

/** Starts every class's generator on one shared clock and reads the server and PostgreSQL around the window. */
async function runWindow(
  plan: MixedPlan,
  classes: MixedClass[],
  warmupS: number,
  durationS: number,
  onSample?: (bytes: number, t: number) => void,
) {
  // Time for the generators to start (tsx) and connect before the shared start.
  const startAt = Date.now() + 4000
  const windowStart = startAt + warmupS * 1000
  const windowEnd = windowStart + durationS * 1000
  const jobs = classes.map((c) =>
    runJob<ClassResult>('mixed.ts', { ...c, url: plan.url, startAt, warmupS, durationS } satisfies ClassJob),
  )
  let finished = false
  const all = Promise.all(jobs).finally(() => (finished = true))
  const read = () => ({
    server: processCpuMs(plan.serverPid),
    postgres: plan.postmasterPid === undefined ? undefined : treeCpuMs(plan.postmasterPid),
  })
  const sampling = (async () => {
    if (!onSample) return
    for (let t = Date.now(); !finished && t <= windowEnd; t = Date.now()) {
      const bytes = residentBytes(plan.serverPid)
      if (bytes !== undefined) onSample(bytes, t)
      await new Promise((resolve) => setTimeout(resolve, plan.memorySampleMs))
    }
  })()
  const at = async (t: number) => {
    await Promise.race([sleepUntil(t), all.catch(() => {})])
    return read()
  }
  const before = await at(windowStart)
  const after = await at(windowEnd)
  const results = await all
  await sampling
  const spent = (key: 'server' | 'postgres') => {
    const [a, b] = [before[key], after[key]]
    return a === undefined || b === undefined ? Number.NaN : b - a
  }
  return { results, serverMs: spent('server'), postgresMs: spent('postgres'), windowStart, windowEnd }
}

export async function runMixed(plan: MixedPlan): Promise<MixedOutcome> {
  const memory: { bytes: number; t: number }[] = []
  const startBytes = residentBytes(plan.serverPid) ?? Number.NaN
  const mixed = await runWindow(plan, plan.classes, plan.warmupS, plan.durationS, (bytes, t) =>
    memory.push({ bytes, t }),
  )
  plan.onMixed?.(mixed.results)
  const alone: { result: ClassResult; cpu: CpuPerRequest }[] = []
  for (const [i, c] of plan.classes.entries()) {
    const m = mixed.results[i]!
    const solo: MixedClass =
      c.name === 'wallets' ? c : { ...c, ids: c.ids.slice(m.used), rate: Math.max(1, m.roundsPerS) }
    const run = await runWindow(plan, [solo], plan.aloneWarmupS, plan.aloneDurationS)
    const result = run.results[0]!
    alone.push({
      result,
      cpu: {
        server: (run.serverMs * 1000) / result.requests,
        postgres: (run.postgresMs * 1000) / result.requests,
      },
    })
  }
  const weighted = (key: keyof CpuPerRequest) =>
    alone.reduce((sum, a, i) => sum + a.cpu[key] * mixed.results[i]!.requests, 0) / 1000
  const scale = {
    server: mixed.serverMs / weighted('server'),
    postgres: mixed.postgresMs / weighted('postgres'),
  }
  const middleT = (mixed.windowStart + mixed.windowEnd) / 2
  const middle = memory.find((m) => m.t >= middleT) ?? memory.at(-1)
  return {
    classes: plan.classes.map((_, i) => ({
      mixed: mixed.results[i]!,
      alone: alone[i]!.result,
      cpu: { server: alone[i]!.cpu.server * scale.server, postgres: alone[i]!.cpu.postgres * scale.postgres },
      aloneCpu: alone[i]!.cpu,
    })),
    total: {
      serverMs: mixed.serverMs,
      postgresMs: mixed.postgresMs,
      loadgenMs: mixed.results.reduce((sum, r) => sum + r.cpuMs, 0),
      windowS: plan.durationS,
    },
    interference: scale,
    memory: {
      startBytes,
      maxBytes: Math.max(...memory.map((m) => m.bytes)),
      finalBytes: memory.at(-1)?.bytes ?? Number.NaN,
      middleBytes: middle?.bytes ?? Number.NaN,
      samples: memory.length,
      tenths: Array.from({ length: 10 }, (_, i) => {
        const t = mixed.windowStart + ((i + 1) * (mixed.windowEnd - mixed.windowStart)) / 10
        return [...memory].reverse().find((m) => m.t <= t)?.bytes ?? Number.NaN
      }),
    },
  }
}

if (isJobChild(import.meta.url)) serveJob(runClass)
