/**
 * The benchmark runner (not tests): `npm run bench [-- --quick] [-- --only=server,flow] [-- --skip-scale]`.
 *
 * Runs every case of bench/cases/ (one file each, its default export a BenchCase: `server`, `flow`,
 * `burst`, `scale`, `mixed`, `library`, `bundle`, ...) in order, on one PostgreSQL cluster (embedded in a
 * temporary directory unless DATABASE_URL is set), prints every figure and target, and writes
 * bench/results.json. A new case is a new file in bench/cases/. What is measured and how to read it:
 * docs/performance.md; nothing here edits the README or the docs.
 *
 * Flags: --quick (short runs), --only=<names> (a subset; writes nothing), --skip-scale, --cpu-prof (a CPU
 * profile of the server during each measured run), --no-write.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { pathToFileURL } from 'node:url'
import { killChildren } from './child.js'
import {
  type BenchCase,
  command,
  flags,
  log,
  machine,
  notes,
  partial,
  phases,
  profiles,
  quick,
  root,
  round,
  rows,
  state,
  targets,
} from './harness.js'
import { type BenchCluster, openBenchCluster } from './postgres.js'
import { removeTargetFiles } from './target.js'

/** --skip-scale leaves out the scale comparison (the mixed case still populates the big table). */
const skipped = new Set(flags['skip-scale'] ? ['scale'] : [])

function printTable(minutes: number): void {
  const header = ['name', 'value', 'unit', 'ceiling', 'ratio', 'in-process']
  const lines = rows.map((r) => [
    r.name,
    String(r.value),
    r.unit,
    r.ceiling === null ? '' : String(r.ceiling),
    r.ratio === null ? '' : r.ratio.toFixed(3),
    r.inProcess === undefined ? '' : String(r.inProcess),
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)))
  const line = (cells: string[]) =>
    cells.map((c, i) => (i === 0 || i === 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  ')
  log(`\n${line(header)}`)
  for (const l of lines) log(line(l))
  log('')
  for (const t of targets) log(`${t.met ? 'met   ' : 'MISSED'}  ${t.what}: ${t.detail}`)
  for (const note of notes) log(`note: ${note}`)
  if (profiles.length) {
    log('\nCPU profiles (server process, measured runs only):')
    for (const p of profiles) log(`  ${p}`)
    log(`  files: ${state.profileDir}`)
  }
  log(`\n${command}: ${minutes.toFixed(1)} min`)
}

async function writeResults(host: ReturnType<typeof machine>, pgVersion: string, minutes: number) {
  const results = {
    measured: new Date().toISOString(),
    command,
    minutes: round(minutes),
    machine: { ...host, postgres: pgVersion },
    rows,
    targets,
  }
  await fs.writeFile(path.join(root, 'bench/results.json'), `${JSON.stringify(results, null, 2)}\n`)
}

/** Every case of bench/cases/ (a file whose default export is a BenchCase), in order. */
async function loadCases(): Promise<BenchCase[]> {
  const dir = path.join(root, 'bench/cases')
  const cases: BenchCase[] = []
  for (const file of (await fs.readdir(dir)).filter((f) => f.endsWith('.ts')).sort()) {
    const module = (await import(pathToFileURL(path.join(dir, file)).href)) as {
      default?: Partial<BenchCase>
    }
    const c = module.default
    // A file without one runs on its own (say `npm run bench:live`).
    if (typeof c?.run === 'function' && typeof c.name === 'string') cases.push(c as BenchCase)
  }
  return cases.sort((a, b) => a.order - b.order)
}

async function main(): Promise<void> {
  const started = Date.now()
  const host = machine()
  log(`caipay benchmarks (${quick ? 'quick' : 'full'}): ${command}`)
  log(
    `machine: ${host.cores} cores (${host.cpu}), ${host.memoryGb} GB, Node ${host.node}, ` +
      `load average ${host.load.toFixed(1)} at start`,
  )
  if (flags['cpu-prof']) state.profileDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-prof-'))
  const cluster = await openBenchCluster()
  openCluster = cluster
  state.postmasterPid = cluster.postmasterPid
  log(`database: ${cluster.description}`)
  const cases = await loadCases()
  const unknown = [...phases].filter((name) => !cases.some((c) => c.name === name))
  if (partial && unknown.length) throw new Error(`No bench case named ${unknown.join(', ')}`)
  try {
    for (const c of cases) if (!partial ? !skipped.has(c.name) : phases.has(c.name)) await c.run(cluster)
  } finally {
    killChildren()
    removeTargetFiles()
    await cluster.close()
  }
  const minutes = (Date.now() - started) / 60_000
  printTable(minutes)
  if (!partial && !flags['no-write']) {
    await writeResults(host, cluster.version, minutes)
    log('written: bench/results.json (docs/performance.md and the README are edited by hand)')
  }
}

let openCluster: BenchCluster | undefined
// Interrupted: no server, load generator or PostgreSQL outlives the run.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    killChildren()
    removeTargetFiles()
    void (openCluster?.close() ?? Promise.resolve()).finally(() => process.exit(130))
  })
}

let exitCode = 0
try {
  await main()
} catch (error) {
  console.error(error)
  exitCode = 1
} finally {
  killChildren()
}
process.exit(exitCode)
