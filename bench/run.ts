/**
 * The benchmark suite (not tests): `npm run bench [-- --quick] [-- --skip-scale]`.
 *
 * One run, one machine, side by side:
 *   1. ceiling: bare Fastify returning a small JSON, and bare Fastify doing one primary-key SELECT;
 *   2. server: status reads, payment creation (with and without Idempotency-Key) at full speed and at
 *      80 % of that, and the whole test-mode gateway flow as payments per second;
 *   3. scale: reads and lists with a 1M-row payments table against a small one, with EXPLAIN summaries;
 *   4. library: flow overhead per payment on an in-process gateway, and bundle sizes.
 * Every server runs in its own process, every load generator in another (bench/child.ts). PostgreSQL is
 * embedded in a temporary directory unless DATABASE_URL is set. Figures go to the terminal,
 * bench/results.json and the `## Benchmarks` section of README.md.
 *
 * Flags: --quick (short runs, 100k-row scale table), --skip-scale, --cpu-prof (profile the server
 * process during the server phase and print what dominates), --only=ceiling,server,flow,scale,library,bundle
 * (development; nothing is written), --no-write.
 */
import { readdirSync, statSync } from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { measureBundle } from './bundle.js'
import { killChildren } from './child.js'
import { runLibraryFlow } from './flow.js'
import { runGatewayFlow } from './gatewayFlow.js'
import { type LoadResult, type LoadSpec, runLoad, runProbe } from './load.js'
import { openBenchCluster } from './postgres.js'
import { summariseProfile } from './profile.js'
import { explainEndpoints, populate, type ScaleData, scaleEndpoints } from './scale.js'
import { createAccounts, createMerchant, createPayments } from './setup.js'
import { spawnTarget } from './target.js'

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'skip-scale': { type: 'boolean', default: false },
    'cpu-prof': { type: 'boolean', default: false },
    only: { type: 'string' },
    'no-write': { type: 'boolean', default: false },
  },
})
const quick = flags.quick
const phases = new Set(
  (flags.only ?? 'ceiling,server,flow,scale,library,bundle').split(',').map((p) => p.trim()),
)
if (flags['skip-scale']) phases.delete('scale')
const partial = flags.only !== undefined
const command = ['npm run bench', ...process.argv.slice(2)].join(' ').replace('bench --', 'bench -- --')

const settings = quick
  ? { warmupS: 1, durationS: 3, rateDurationS: 3, flowPayments: 300, flowWarmup: 50, scaleRows: 100_000 }
  : { warmupS: 2, durationS: 8, rateDurationS: 8, flowPayments: 1500, flowWarmup: 200, scaleRows: 1_000_000 }
const connections = 16
const wallets = 16
const smallRows = 1_000
const probeRequests = quick ? 100 : 300
const libraryPayments = quick ? 1000 : 2000
/** The wallet core's budget, min+gzip: 15 kB = 15,000 bytes. */
const coreBudgetBytes = 15_000
const p99TargetMs = 25

const root = fileURLToPath(new URL('..', import.meta.url))

export interface ResultRow {
  name: string
  value: number
  unit: string
  ceiling: number | null
  ratio: number | null
}
const rows: ResultRow[] = []
const notes: string[] = []
const targets: { what: string; met: boolean; detail: string }[] = []

function record(name: string, value: number, unit: string, ceiling: number | null = null): ResultRow {
  const row = {
    name,
    value: round(value),
    unit,
    ceiling: ceiling === null ? null : round(ceiling),
    ratio: ceiling ? round(value / ceiling, 3) : null,
  }
  rows.push(row)
  return row
}

function round(n: number, digits?: number): number {
  if (!Number.isFinite(n)) return n
  const d = digits ?? (Math.abs(n) >= 100 ? 0 : Math.abs(n) >= 10 ? 1 : 2)
  return Number(n.toFixed(d))
}

const log = (message: string) => console.log(message)
const fmt = (r: LoadResult) =>
  `${r.rps.toFixed(0)} req/s, p50 ${r.p50} ms, p99 ${r.p99} ms${r.non2xx || r.errors ? `, ${r.non2xx} non-2xx, ${r.errors} errors` : ''}`

function checkClean(label: string, r: LoadResult): void {
  if (r.non2xx > 0 || r.errors > 0 || r.rps === 0) {
    throw new Error(`${label}: ${r.non2xx} non-2xx answers and ${r.errors} errors in ${r.requests} requests`)
  }
}

async function machine() {
  const cpus = os.cpus()
  return {
    cores: cpus.length,
    cpu: cpus[0]?.model.trim() ?? 'unknown',
    memoryGb: Math.round(os.totalmem() / 2 ** 30),
    node: process.version,
    loadAverage: os.loadavg()[0]!,
  }
}

async function main(): Promise<void> {
  const started = Date.now()
  const host = await machine()
  log(`caipay benchmarks (${quick ? 'quick' : 'full'}): ${command}`)
  log(
    `machine: ${host.cores} cores (${host.cpu}), ${host.memoryGb} GB, Node ${host.node}, load ${host.loadAverage.toFixed(1)}`,
  )
  const cluster = await openBenchCluster()
  log(`database: ${cluster.description}`)
  let profileDir: string | undefined
  try {
    const needsMain = ['ceiling', 'server', 'flow'].some((p) => phases.has(p))
    let selectCeiling: LoadResult | undefined
    if (needsMain) {
      const url = await cluster.createDatabase('caipay_bench')
      const accounts = await createAccounts(url)
      let server = await spawnTarget('server', { databaseUrl: url })
      const merchantId = await createMerchant(server.url, accounts.apiKey, 'Bench Shop')
      const ids = await createPayments(server.url, accounts.apiKey, merchantId, 1000)
      await server.stop()
      const merchantHeaders = { 'api-key': accounts.apiKey, 'merchant-id': merchantId }
      const load = (base: string, spec: Omit<LoadSpec, 'url' | 'connections' | 'durationS' | 'warmupS'>) =>
        runLoad({
          url: base,
          connections,
          durationS: settings.durationS,
          warmupS: settings.warmupS,
          headers: merchantHeaders,
          ...spec,
        })

      // 1. Ceiling.
      const ceiling = await spawnTarget('ceiling', { databaseUrl: url })
      const json = await load(ceiling.url, { method: 'GET', paths: ['/json'] })
      checkClean('ceiling json', json)
      log(`ceiling  GET /json                          ${fmt(json)}`)
      selectCeiling = await load(ceiling.url, { method: 'GET', paths: ids.map((id) => `/select/${id}`) })
      checkClean('ceiling select', selectCeiling)
      log(`ceiling  GET /select/:id (PK SELECT)        ${fmt(selectCeiling)}`)
      await ceiling.stop()
      record('ceiling.json', json.rps, 'req/s')
      record('ceiling.json.p50', json.p50, 'ms')
      record('ceiling.json.p99', json.p99, 'ms')
      record('ceiling.select', selectCeiling.rps, 'req/s')
      record('ceiling.select.p50', selectCeiling.p50, 'ms')
      record('ceiling.select.p99', selectCeiling.p99, 'ms')

      // 2. Server.
      if (flags['cpu-prof']) profileDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-prof-'))
      server = await spawnTarget('server', {
        databaseUrl: url,
        ...(profileDir ? { cpuProfDir: profileDir } : {}),
      })
      const createBody = JSON.stringify({
        referenceId: 'bench-order',
        amount: { unit: 'iso4217/USD', value: '1250' },
      })
      const scenarios: {
        name: string
        label: string
        spec: Omit<LoadSpec, 'url' | 'connections' | 'durationS' | 'warmupS'>
        target: number
      }[] = [
        {
          name: 'server.status',
          label: 'GET /v1/payments/{id}/status',
          spec: { method: 'GET', paths: ids.map((id) => `/v1/payments/${id}/status`) },
          target: 0.5,
        },
        {
          name: 'server.gateway_status',
          label: 'GET /v1/gateway/payment/{id}/status',
          spec: {
            method: 'GET',
            paths: ids.map((id) => `/v1/gateway/payment/${id}/status`),
            headers: { 'api-key': accounts.walletKey },
          },
          target: 0.5,
        },
        {
          name: 'server.create',
          label: 'POST /v1/payments',
          spec: { method: 'POST', paths: ['/v1/payments'], body: createBody },
          target: 0.3,
        },
        {
          name: 'server.create_idempotent',
          label: 'POST /v1/payments + Idempotency-Key',
          spec: { method: 'POST', paths: ['/v1/payments'], body: createBody, idempotencyKeys: true },
          target: 0.3,
        },
      ]
      if (phases.has('server')) {
        for (const s of scenarios) {
          const max = await load(server.url, s.spec)
          checkClean(s.label, max)
          log(`server   ${s.label.padEnd(36)} ${fmt(max)}`)
          const rate = Math.max(1, Math.round(max.rps * 0.8))
          const at80 = await runLoad({
            url: server.url,
            connections,
            durationS: settings.rateDurationS,
            headers: merchantHeaders,
            ...s.spec,
            overallRate: rate,
          })
          checkClean(`${s.label} at 80%`, at80)
          log(`         ${`  at 80% (${rate} req/s)`.padEnd(36)} ${fmt(at80)}`)
          const ratio = max.rps / selectCeiling.rps
          record(s.name, max.rps, 'req/s', selectCeiling.rps)
          record(`${s.name}.p50`, max.p50, 'ms', selectCeiling.p50 || null)
          record(`${s.name}.p99`, max.p99, 'ms', selectCeiling.p99 || null)
          record(`${s.name}.p99_at_80pct`, at80.p99, 'ms', p99TargetMs)
          targets.push({
            what: `${s.label} >= ${s.target * 100}% of the PK-SELECT ceiling`,
            met: ratio >= s.target,
            detail: `${(ratio * 100).toFixed(1)}%`,
          })
          targets.push({
            what: `${s.label} p99 < ${p99TargetMs} ms at 80% of max (${rate} req/s)`,
            met: at80.p99 < p99TargetMs,
            detail: `${at80.p99} ms`,
          })
        }
      }

      if (phases.has('flow')) {
        const flow = await runGatewayFlow({
          url: server.url,
          apiKey: accounts.apiKey,
          merchantId,
          walletKey: accounts.walletKey,
          wallets,
          payments: settings.flowPayments,
          warmup: settings.flowWarmup,
        })
        log(
          `server   gateway flow (${wallets} wallets)            ${flow.paymentsPerSecond.toFixed(0)} payments/s, ` +
            `p50 ${flow.p50.toFixed(1)} ms, p99 ${flow.p99.toFixed(1)} ms, ${flow.requestsPerPayment} requests/payment ` +
            `(median options ${flow.steps.options.toFixed(1)}, fetch ${flow.steps.fetch.toFixed(1)}, ` +
            `confirm ${flow.steps.confirm.toFixed(1)}, status ${flow.steps.status.toFixed(1)} ms)`,
        )
        // Ceiling of a flow: as many payments as PK-SELECT requests fit, divided by its requests.
        record(
          'flow.gateway',
          flow.paymentsPerSecond,
          'payments/s',
          selectCeiling.rps / flow.requestsPerPayment,
        )
        record('flow.gateway.p50', flow.p50, 'ms')
        record('flow.gateway.p99', flow.p99, 'ms')
        notes.push(
          `flow.gateway: ${wallets} concurrent wallets, options -> fetch -> confirm -> status, ` +
            `${flow.requestsPerPayment} HTTP requests per payment; its ceiling is the PK-SELECT ceiling / ${flow.requestsPerPayment}.`,
        )
      }
      await server.stop()
    }

    // 3. Scale.
    if (phases.has('scale')) await scale(cluster)

    // 4. Library.
    if (phases.has('library')) {
      const lib = await runLibraryFlow(libraryPayments)
      log(
        `library  createPayClient, in-process gateway   ${lib.microsecondsPerPayment.toFixed(0)} µs/payment, ` +
          `${lib.paymentsPerSecond.toFixed(0)} payments/s (${lib.payments} payments)`,
      )
      record('library.flow', lib.microsecondsPerPayment, 'µs/payment')
      record('library.flow.rate', lib.paymentsPerSecond, 'payments/s')
    }
    if (phases.has('bundle')) {
      const entries: [string, string][] = [
        ['caipay', 'src/index.ts'],
        ['caipay/adapters/evm', 'adapters/evm/index.ts'],
        ['caipay/adapters/solana', 'adapters/solana/index.ts'],
        ['caipay/adapters/walletconnect', 'adapters/walletconnect/index.ts'],
      ]
      for (const [name, entry] of entries) {
        const b = await measureBundle(path.join(root, entry))
        const core = name === 'caipay'
        log(
          `bundle   ${name.padEnd(36)} ${(b.minBytes / 1000).toFixed(1)} kB min, ${(b.gzipBytes / 1000).toFixed(1)} kB min+gzip` +
            (b.externals.length ? ` (peers left out: ${[...new Set(b.externals)].join(', ')})` : ''),
        )
        const key = name.replace('caipay/adapters/', 'adapter_')
        record(`bundle.${key}.min`, b.minBytes, 'bytes')
        record(`bundle.${key}.gzip`, b.gzipBytes, 'bytes', core ? coreBudgetBytes : null)
        if (core) {
          targets.push({
            what: 'caipay core < 15 kB min+gzip',
            met: b.gzipBytes < coreBudgetBytes,
            detail: `${b.gzipBytes} bytes`,
          })
        }
      }
    }
  } finally {
    killChildren()
    await cluster.close()
  }

  if (profileDir) printProfile(profileDir)
  const minutes = (Date.now() - started) / 60_000
  printTable(minutes)
  if (!partial && !flags['no-write']) {
    await fs.writeFile(path.join(root, 'bench/results.json'), `${JSON.stringify(rows, null, 2)}\n`)
    await writeReadme(host, cluster.version, minutes)
    log('written: bench/results.json, README.md (## Benchmarks)')
  }
}

async function scale(cluster: Awaited<ReturnType<typeof openBenchCluster>>): Promise<void> {
  const large = settings.scaleRows
  log(`scale    populating ${smallRows.toLocaleString('en')} and ${large.toLocaleString('en')} payments ...`)
  const small = await populate(await cluster.createDatabase('caipay_scale_small'), smallRows)
  const big = await populate(await cluster.createDatabase('caipay_scale_large'), large)
  log(`scale    ${large.toLocaleString('en')} rows inserted and indexed in ${big.loadSeconds.toFixed(0)} s`)

  const plans = await explainEndpoints(big.url, scaleEndpoints(big))
  log(
    `scale    EXPLAIN (ANALYZE, BUFFERS) with ${large.toLocaleString('en')} payments (SQL captured from the endpoints):`,
  )
  const seen = new Set<string>()
  let suspicious = 0
  for (const { endpoint, plans: list } of plans) {
    log(`  ${endpoint}`)
    for (const p of list) {
      const repeat = seen.has(p.sql)
      seen.add(p.sql)
      if (p.suspicious) suspicious++
      log(
        `    ${p.suspicious ? '!! ' : ''}${p.nodes}; rows ${p.rows}, buffers hit ${p.sharedHit} read ${p.sharedRead}, ${p.executionMs.toFixed(3)} ms` +
          (repeat ? '' : `\n       ${p.sql.length > 400 ? `${p.sql.slice(0, 400)} ...` : p.sql}`),
      )
    }
  }
  targets.push({
    what: 'every payments query of the measured endpoints is an index scan (no Seq Scan, no Sort)',
    met: suspicious === 0,
    detail: `${suspicious} suspicious plan${suspicious === 1 ? '' : 's'}`,
  })

  const measure = async (data: ScaleData) => {
    const server = await spawnTarget('server', { databaseUrl: data.url })
    const out = new Map<string, Awaited<ReturnType<typeof runProbe>>>()
    try {
      for (const e of scaleEndpoints(data)) {
        const r = await runProbe({
          url: server.url,
          paths: e.paths,
          headers: e.headers,
          concurrency: 2,
          requests: probeRequests,
          warmup: 50,
        })
        if (r.failures) throw new Error(`${e.label}: ${r.failures} failed requests`)
        out.set(e.name, r)
      }
    } finally {
      await server.stop()
    }
    return out
  }
  const smallResults = await measure(small)
  const bigResults = await measure(big)
  let worst = 0
  log(
    `scale    latency (2 connections, ${probeRequests} requests each): ${smallRows.toLocaleString('en')} rows vs ${large.toLocaleString('en')} rows`,
  )
  for (const e of scaleEndpoints(big)) {
    const s = smallResults.get(e.name)!
    const b = bigResults.get(e.name)!
    log(
      `  ${e.label.padEnd(58)} p50 ${s.p50.toFixed(2)} -> ${b.p50.toFixed(2)} ms, p99 ${s.p99.toFixed(2)} -> ${b.p99.toFixed(2)} ms`,
    )
    record(`scale.${e.name}.p50`, b.p50, 'ms', s.p50)
    record(`scale.${e.name}.p99`, b.p99, 'ms', s.p99)
    worst = Math.max(worst, b.p50 / s.p50)
  }
  notes.push(
    `scale.*: latency with ${large.toLocaleString('en')} payments; the ceiling column is the same request with ${smallRows.toLocaleString('en')} payments (ratio 1.0 = flat).`,
  )
  targets.push({
    what: `scale: p50 latency flat from ${smallRows.toLocaleString('en')} to ${large.toLocaleString('en')} payments (within 1.5x)`,
    met: worst <= 1.5,
    detail: `worst p50 ratio ${worst.toFixed(2)}`,
  })
}

function printProfile(dir: string): void {
  const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))
  // The biggest profile is the server's main thread (tsx's loader thread writes a small one too).
  const main = files
    .map((f) => ({ f, size: statSync(path.join(dir, f)).size }))
    .sort((a, b) => b.size - a.size)[0]
  if (!main) return
  const s = summariseProfile(path.join(dir, main.f), 12)
  log(`\nserver CPU profile (${path.join(dir, main.f)}), ${s.totalMs.toFixed(0)} ms busy:`)
  log(`  by package: ${s.byModule.map((m) => `${m.name} ${(m.share * 100).toFixed(1)}%`).join(', ')}`)
  log('  by function (self time):')
  for (const f of s.byFunction) log(`    ${(f.share * 100).toFixed(1).padStart(5)}%  ${f.name}`)
}

function printTable(minutes: number): void {
  const header = ['name', 'value', 'unit', 'ceiling', 'ratio']
  const lines = rows.map((r) => [
    r.name,
    String(r.value),
    r.unit,
    r.ceiling === null ? '' : String(r.ceiling),
    r.ratio === null ? '' : r.ratio.toFixed(3),
  ])
  const widths = header.map((h, i) => Math.max(h.length, ...lines.map((l) => l[i]!.length)))
  log('')
  log(header.map((h, i) => h.padEnd(widths[i]!)).join('  '))
  for (const l of lines)
    log(l.map((c, i) => (i === 0 || i === 2 ? c.padEnd(widths[i]!) : c.padStart(widths[i]!))).join('  '))
  log('')
  for (const t of targets) log(`${t.met ? 'met   ' : 'MISSED'}  ${t.what}: ${t.detail}`)
  for (const n of notes) log(`note: ${n}`)
  log(`\n${command}: ${minutes.toFixed(1)} min`)
}

async function writeReadme(
  host: Awaited<ReturnType<typeof machine>>,
  pgVersion: string,
  minutes: number,
): Promise<void> {
  const file = path.join(root, 'README.md')
  const text = await fs.readFile(file, 'utf8')
  const at = text.search(/^## Benchmarks\s*$/m)
  const before = at === -1 ? `${text.trimEnd()}\n\n` : text.slice(0, at)
  const cell = (n: number | null) => (n === null ? '' : String(n))
  const section = [
    '## Benchmarks',
    '',
    `Measured ${new Date().toISOString().slice(0, 10)} with \`${command}\` (${minutes.toFixed(1)} min) on ${host.cores} cores ` +
      `(${host.cpu}), ${host.memoryGb} GB memory, Node ${host.node}, PostgreSQL ${pgVersion} (embedded). Servers, load ` +
      'generators (autocannon, 16 connections) and PostgreSQL share the machine; each server runs in its own process. ' +
      'Figures are in `bench/results.json`; see `bench/run.ts` for what each one is.',
    '',
    '| name | value | unit | ceiling | ratio |',
    '| --- | ---: | --- | ---: | ---: |',
    ...rows.map(
      (r) =>
        `| ${r.name} | ${r.value} | ${r.unit} | ${cell(r.ceiling)} | ${r.ratio === null ? '' : r.ratio.toFixed(3)} |`,
    ),
    '',
    '- Ceilings: `ceiling.json` is bare Fastify answering a small JSON; `ceiling.select` is bare Fastify doing one ' +
      "primary-key SELECT through a pg pool of the server's size. Server throughput and latency are compared with `ceiling.select`; " +
      '`*.p99_at_80pct` is p99 at 80 % of the measured maximum (autocannon `overallRate`), compared with the 25 ms target.',
    ...notes.map((n) => `- ${n}`),
    '- `library.flow`: `createPayClient` on an in-process gateway that answers at once, a signer returning a fixed ' +
      'signature. `bundle.*`: esbuild, minified, browser ESM, peers (viem, @solana/web3.js, WalletConnect) left out; ' +
      'the `caipay` gzip ceiling is its 15 kB budget.',
    '',
    'Targets:',
    '',
    ...targets.map((t) => `- ${t.met ? 'met' : '**missed**'}: ${t.what} (${t.detail})`),
    '',
  ].join('\n')
  await fs.writeFile(file, `${before}${section}`)
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
