/**
 * What every bench case shares: the flags and run lengths, one measured run (`measure`) and rounds of
 * them, ratios against a ceiling paired round by round, and the report (`record`, `targets`, `notes`)
 * that bench/run.ts prints and writes to bench/results.json.
 */
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { processCpuMs, treeCpuMs } from './cpu.js'
import { type LoadResult, type LoadSpec, runLoad } from './load.js'
import type { BenchCluster } from './postgres.js'
import { summariseProfile } from './profile.js'
import { populate, type ScaleData } from './scale.js'
import type { Target } from './target.js'

export const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'skip-scale': { type: 'boolean', default: false },
    'cpu-prof': { type: 'boolean', default: false },
    only: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
  },
})
export const quick = flags.quick
/** The cases named by --only (all when absent). */
export const phases = new Set(
  (flags.only ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean),
)
export const partial = flags.only !== undefined
export const args = process.argv.slice(2)
export const command = args.length ? `npm run bench -- ${args.join(' ')}` : 'npm run bench'

/**
 * The gateway flow's targets as ratios to its ceiling (as many primary-key SELECTs, on the bare-Fastify
 * server, as the flow has requests), measured in the same run. The issue set them in milliseconds on the
 * bench of its day (server in-process, no logger), where the flow's 3.0 ms of server CPU and 2.35 ms of
 * PostgreSQL CPU were 9x and 6.5x four such reads: 1.2 ms and 1.0 ms are 3.6x and 2.77x of them, and 600
 * payments/s (2.2 ms of server and PostgreSQL CPU per payment, 3.17x the reads' 0.69 ms) is 1/3.17 of
 * the reads' rate. The bench now measures the server as it ships, where four bare reads alone cost about
 * as much as the absolute figures allow; those are still reported beside the ratios.
 */
export const flowTarget = { server: 3.6, postgres: 2.77, rate: 1 / 3.17 }

export const settings = quick
  ? {
      warmupS: 1,
      durationS: 3,
      flowPayments: 300,
      flowWarmup: 50,
      flowRounds: 3,
      serverRounds: 3,
      burstPayments: 3000,
      burstRounds: 3,
      burstRun: { warmupS: 1, durationS: 2 },
      scaleRows: 250_000,
      probe: 150,
      library: 1000,
      mixed: { warmupS: 3, durationS: 20, aloneWarmupS: 2, aloneDurationS: 5, memorySampleMs: 500 },
    }
  : {
      warmupS: 2,
      durationS: 8,
      flowPayments: 3000,
      flowWarmup: 200,
      flowRounds: 5,
      serverRounds: 5,
      burstPayments: 6000,
      burstRounds: 7,
      burstRun: { warmupS: 1, durationS: 4 },
      scaleRows: 1_000_000,
      probe: 400,
      library: 2000,
      mixed: { warmupS: 10, durationS: 300, aloneWarmupS: 3, aloneDurationS: 20, memorySampleMs: 1000 },
    }
/** autocannon connections (the server's pool holds 10). */
export const connections = 16
/** Concurrent wallets of the gateway flow. */
export const wallets = 16
/** Big enough that every measured page is full (51 rows) in the small table too. */
export const smallRows = 50_000
/** The wallet core's budget, min+gzip: 15 kB = 15,000 bytes. */
export const coreBudgetBytes = 15_000
/** Mixed workload: wallets polling an open payment, merchant clients and paying wallets (closed loops). */
export const mixedClients = { wallets: 1000, merchants: 4, flows: 8 }
/**
 * The server's resident memory during the mixed run stays within this. Measured 2026-11-23: 130 MB
 * idle, peaks of 270 MB before V8's major collections, back to 150 MB after them over 5 minutes.
 */
export const rssBoundMb = 384

export const root = fileURLToPath(new URL('..', import.meta.url))

export interface ResultRow {
  name: string
  value: number
  unit: string
  ceiling: number | null
  ratio: number | null
  /** The same figure for the server built in-process by the bench (no logger), where measured. */
  inProcess?: number
}
export const rows: ResultRow[] = []
export const notes: string[] = []
export const targets: { what: string; met: boolean; detail: string }[] = []
export const profiles: string[] = []

export function record(
  name: string,
  value: number,
  unit: string,
  ceiling: number | null = null,
  inProcess?: number,
): void {
  rows.push({
    name,
    value: round(value),
    unit,
    ceiling: ceiling === null ? null : round(ceiling),
    ratio: ceiling ? Number((value / ceiling).toFixed(3)) : null,
    ...(inProcess === undefined ? {} : { inProcess: round(inProcess) }),
  })
}

export function round(n: number): number {
  if (!Number.isFinite(n)) return n
  return Number(n.toFixed(Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2))
}

export const log = (message: string) => console.log(message)
export const pct = (x: number) => `${(x * 100).toFixed(1)}%`
export const fmt = (r: LoadResult & { cpu?: CpuBreakdown }) =>
  `${r.rps.toFixed(0)} req/s, p50 ${round(r.p50)} ms, p99 ${round(r.p99)} ms` +
  (r.sendLagP99 === undefined ? '' : ` (generator send lag p99 ${round(r.sendLagP99)} ms)`) +
  (r.cpu ? `\n${' '.repeat(49)}${cpuText(r.cpu)}` : '')

export function machine() {
  const cpus = os.cpus()
  return {
    cores: cpus.length,
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    /** 1-minute load average at the start: other work on the machine shows here. */
    load: os.loadavg()[0]!,
  }
}

export type Scenario = Omit<LoadSpec, 'url' | 'connections' | 'durationS' | 'warmupS'>
/** Seconds of a measured run and of the unmeasured run before it. */
export interface RunLength {
  warmupS: number
  durationS: number
}

/** CPU microseconds per request, by process. */
export interface CpuBreakdown {
  server: number
  postgres: number
  loadgen: number
}

/** Measured in the server phase, for the ratios of later phases. */
export const ceilingCpu: { select?: CpuBreakdown; insert?: CpuBreakdown } = {}
/** What one case leaves for another: the cluster's postmaster, the flow's rate alone, the profile directory. */
export const state: { postmasterPid?: number; isolatedFlowRate?: number; profileDir?: string } = {}

/**
 * Warm-up run, then the measured run (profiled with --cpu-prof), with the CPU each process spent on it.
 * Any non-2xx answer fails the bench.
 */
export async function measure(
  target: Target,
  label: string,
  scenario: Scenario,
  overallRate?: number,
  length: RunLength = settings,
): Promise<LoadResult & { cpu?: CpuBreakdown }> {
  const spec: LoadSpec = { url: target.url, connections, durationS: length.durationS, ...scenario }
  // The paced generator warms up at the measured pace on the measured sockets; autocannon in a run of its own.
  if (overallRate) Object.assign(spec, { overallRate, warmupS: length.warmupS })
  else await runLoad({ ...spec, durationS: length.warmupS })
  const profile = flags['cpu-prof'] && !overallRate && target.kind !== 'cli'
  const file = path.join(state.profileDir ?? '', `${label.replace(/\W+/g, '_')}.cpuprofile`)
  const before = {
    server: processCpuMs(target.pid),
    postgres: state.postmasterPid && treeCpuMs(state.postmasterPid),
  }
  const result = profile ? await target.profile(file, () => runLoad(spec)) : await runLoad(spec)
  const after = {
    server: processCpuMs(target.pid),
    postgres: state.postmasterPid && treeCpuMs(state.postmasterPid),
  }
  if (result.non2xx > 0 || result.errors > 0 || result.rps === 0) {
    throw new Error(
      `${label}: ${result.non2xx} non-2xx and ${result.errors} errors in ${result.requests} requests`,
    )
  }
  // A paced run warms up inside the same job, so its CPU window holds the warm-up requests too.
  const sent = result.requests + (overallRate ? Math.round(overallRate * length.warmupS) : 0)
  const perRequest = (ms: number) => (ms * 1000) / sent
  const cpu =
    before.server !== undefined && after.server !== undefined && before.postgres && after.postgres
      ? {
          server: perRequest(after.server - before.server),
          postgres: perRequest(after.postgres - before.postgres),
          loadgen: perRequest(result.cpuMs),
        }
      : undefined
  if (profile) {
    const s = summariseProfile(file, 8)
    profiles.push(
      `${label}: profiler busy ${pct(s.totalMs / s.wallMs)} of the run; by package: ` +
        `${s.byModule.map((m) => `${m.name} ${pct(m.share)}`).join(', ')}; top functions: ` +
        `${s.byFunction.map((f) => `${f.name.split(' ')[0]} ${pct(f.share)}`).join(', ')}`,
    )
  }
  return { ...result, ...(cpu ? { cpu } : {}) }
}

export type Measured = Awaited<ReturnType<typeof measure>>

/**
 * Rounds of one case as one figure: the best throughput, and the least CPU per request each process
 * needed in any round. A moment when the shared machine is busy lowers one run and only ever adds CPU,
 * alike for a ceiling and the server measured in turn with it.
 */
export function combineRounds(runs: readonly Measured[]): Measured {
  const best = runs.reduce((a, b) => (b.rps > a.rps ? b : a))
  const cpus = runs.flatMap((r) => (r.cpu ? [r.cpu] : []))
  if (!cpus.length) return best
  const least = (part: keyof CpuBreakdown) => Math.min(...cpus.map((cpu) => cpu[part]))
  return { ...best, cpu: { server: least('server'), postgres: least('postgres'), loadgen: least('loadgen') } }
}

/**
 * A case's CPU per request against its ceiling's, round by round. Each round's ratio pairs two runs of
 * the same round, a minute or two apart, so a slow drift of the shared machine cancels out (in one run
 * every figure of the last round was a quarter lower than in the first two, the ceilings' more than the
 * cases'; the least of each side across rounds then paired moments that were never measured together).
 * The figure is the round with the median ratio. `ceilingsPerRun`: how many ceiling requests one of the
 * case's stands for (the gateway flow's payment is that many requests).
 */
export function pairedCpu(
  runs: readonly { cpu?: Pick<CpuBreakdown, 'server' | 'postgres'> }[],
  ceilingRuns: readonly Measured[],
  part: 'server' | 'postgres',
  ceilingsPerRun = 1,
) {
  const pairs = runs.flatMap((run, i) => {
    const [value, ceiling] = [run.cpu?.[part], ceilingRuns[i]?.cpu?.[part]]
    return value !== undefined && ceiling ? [{ value, ceiling: ceiling * ceilingsPerRun }] : []
  })
  return pairs.length ? medianRatio(pairs) : undefined
}

/** The pair (a round's figure and its ceiling's) whose ratio is the median, with every pair's ratio. */
export function medianRatio(pairs: readonly { value: number; ceiling: number }[]) {
  const withRatio = pairs.map((pair) => ({ ...pair, ratio: pair.value / pair.ceiling }))
  const median = [...withRatio].sort((a, b) => a.ratio - b.ratio)[(withRatio.length - 1) >> 1]!
  return { ...median, ratios: withRatio.map((pair) => pair.ratio) }
}

/**
 * A case's throughput as a share of its ceiling's in the same round, median of the rounds: the machine's
 * speed drifts between rounds (in one run the burst's reads and their ceiling all ran a quarter faster in
 * one round than in the next), and a ceiling measured in turn with the case drifts with it.
 */
export function medianShare(runs: readonly Measured[], ceilingRuns: readonly Measured[]) {
  return medianRatio(runs.map((run, i) => ({ value: run.rps, ceiling: ceilingRuns[i]!.rps })))
}

export const ratiosText = (ratios: readonly number[]) => ratios.map((r) => `${r.toFixed(2)}x`).join(' / ')

/**
 * `count` rounds of the cases, each round every case in turn (so a ceiling and the server it is compared
 * with share the machine's moments): every run of each case, by name, for combineRounds and roundsText.
 */
export async function measureRounds(
  cases: readonly {
    name: string
    target: Target
    label: string
    scenario: Scenario
    log?: (r: Measured, round: number) => void
  }[],
  count: number,
  length: RunLength = settings,
): Promise<Map<string, Measured[]>> {
  const runs = new Map<string, Measured[]>()
  for (let round = 1; round <= count; round++) {
    for (const c of cases) {
      const r = await measure(c.target, c.label, c.scenario, undefined, length)
      c.log?.(r, round)
      runs.set(c.name, [...(runs.get(c.name) ?? []), r])
    }
  }
  return runs
}

/** Every round of every case, for the notes: req/s, then µs of CPU per request (server + PostgreSQL). */
export function roundsText(rounds: ReadonlyMap<string, readonly Measured[]>): string {
  const each = (f: (r: Measured) => string) =>
    [...rounds].map(([name, runs]) => `${name} ${runs.map(f).join(' / ')}`).join(', ')
  return (
    `all runs in req/s: ${each((r) => r.rps.toFixed(0))}; in µs of CPU per request, server + PostgreSQL: ` +
    each((r) => (r.cpu ? `${r.cpu.server.toFixed(0)}+${r.cpu.postgres.toFixed(0)}` : '-'))
  )
}

export const cpuText = (cpu: CpuBreakdown | undefined) =>
  cpu
    ? `CPU per request: ${cpu.server.toFixed(0)} µs server process, ${cpu.postgres.toFixed(0)} µs PostgreSQL, ` +
      `${cpu.loadgen.toFixed(0)} µs load generator`
    : ''

let largeData: Promise<ScaleData> | undefined
/** The big database of the scale and mixed phases, populated once (the scale phase reads it first). */
export function largeTable(cluster: BenchCluster): Promise<ScaleData> {
  largeData ??= (async () => {
    const rows = settings.scaleRows.toLocaleString('en')
    log(`scale    populating ${rows} payments ...`)
    const big = await populate(await cluster.createDatabase('caipay_scale_large'), settings.scaleRows)
    log(`scale    ${rows} rows inserted, indexed and analysed in ${big.loadSeconds.toFixed(0)} s`)
    return big
  })()
  return largeData
}

/**
 * One bench case: a file of bench/cases/ whose default export this is. bench/run.ts runs every case in
 * `order` (or those named by --only), each on the one PostgreSQL cluster of the run.
 */
export interface BenchCase {
  name: string
  order: number
  run(cluster: BenchCluster): Promise<void>
}
