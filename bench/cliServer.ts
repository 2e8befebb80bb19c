/**
 * `caipay serve` as an operator starts it, for the live benchmarks (bench/cases/liveRelay*.ts): the CLI
 * through bin/caipay.js with default settings, embedded PostgreSQL in a temporary directory, a live API
 * key created with `caipay keys create`, and a JSON helper authenticated with it.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import fs from 'node:fs/promises'
import { createServer } from 'node:net'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { pollUntilFinal } from '../src/flow/poll.js'
import { processCpuMs, treeCpuMs } from './cpu.js'
import { loadStatementStats } from './statements.js'

export const root = fileURLToPath(new URL('..', import.meta.url))
export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies of a benchmark, read field by field
export type Json = any

export interface CliServer {
  call(method: string, url: string, body?: unknown, extra?: Record<string, string>): Promise<Json>
  /** The `--data-dir` of its embedded PostgreSQL (bench/statements.ts reads its counts there). */
  dbDir: string
  /** CPU milliseconds used so far by the server process and by its embedded PostgreSQL; Linux only. */
  cpuMs(): { server: number; postgres: number } | undefined
  stop(): Promise<void>
}

/**
 * Starts the server with `config` (a config file's content) in `dataDir`, which the caller removes.
 * `statementStats`: its PostgreSQL loads pg_stat_statements (bench/statements.ts).
 */
export async function startCliServer(
  config: Record<string, unknown>,
  dataDir: string,
  options: { statementStats?: boolean } = {},
): Promise<CliServer> {
  // Embedded PostgreSQL may run as another OS user (under root), which must reach its data directory.
  await fs.chmod(dataDir, 0o755)
  const port = await freePort()
  const configFile = path.join(dataDir, 'caipay.json')
  await fs.writeFile(configFile, JSON.stringify(config))
  const dbDir = path.join(dataDir, 'db')
  const dbArgs = ['--data-dir', dbDir]
  const key = JSON.parse(await cli(['keys', 'create', '--mode', 'live', '--json', ...dbArgs])).apiKey
  // `keys create` initialised the cluster and stopped it; the server starts it with the module.
  if (options.statementStats) await loadStatementStats(dbDir)
  // The server logs a line per request: to a file, as an operator's service manager would keep it (a
  // pipe this busy process drains late would block the server's synchronous log writes).
  const logFile = path.join(dataDir, 'server.log')
  const logHandle = await fs.open(logFile, 'w')
  const server = spawn(
    process.execPath,
    [
      ...(process.env.CAIPAY_BENCH_PROFILE_DIR
        ? ['--cpu-prof', `--cpu-prof-dir=${process.env.CAIPAY_BENCH_PROFILE_DIR}`]
        : []),
      path.join(root, 'bin/caipay.js'),
      'serve',
      '--port',
      String(port),
      '--config',
      configFile,
      ...dbArgs,
    ],
    { stdio: ['ignore', logHandle.fd, logHandle.fd] },
  )
  await logHandle.close()
  const stop = async () => {
    if (server.exitCode !== null) return
    server.kill('SIGTERM')
    await new Promise((resolve) => {
      const timer = setTimeout(() => server.kill('SIGKILL'), 10_000)
      server.once('exit', () => resolve(clearTimeout(timer)))
    })
  }
  const base = `http://127.0.0.1:${port}`
  try {
    await waitForServer(base, server, () => readFileSync(logFile, 'utf8').slice(-8_000))
  } catch (error) {
    await stop()
    throw error
  }
  const cpuMs = () => {
    const own = server.pid === undefined ? undefined : processCpuMs(server.pid)
    const tree = server.pid === undefined ? undefined : treeCpuMs(server.pid)
    return own === undefined || tree === undefined ? undefined : { server: own, postgres: tree - own }
  }
  return { call: api(base, key), dbDir, cpuMs, stop }
}

export async function inParallel<T, R>(
  items: readonly T[],
  width: number,
  fn: (item: T, index: number) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length)
  let next = 0
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < items.length) {
        const i = next++
        results[i] = await fn(items[i]!, i)
      }
    }),
  )
  return results
}

/**
 * A payer's status reads after its confirm answered `confirmed`: the wallet library's own loop
 * (`pollUntilFinal`, src/flow/poll.ts), so each read is held by the server until the status changes
 * (`Prefer: wait`). With `everyMs`, one plain read every that many ms instead (how payers polled before
 * the server held reads; kept to compare).
 */
export async function readUntilFinal(
  call: CliServer['call'],
  paymentId: string,
  confirmed: Json,
  everyMs?: number,
): Promise<Json> {
  const url = `/v1/gateway/payment/${paymentId}/status`
  if (confirmed.isFinal) return confirmed
  if (everyMs === undefined) {
    return pollUntilFinal({
      getStatus: (_signal, waitSeconds) =>
        call('GET', url, undefined, waitSeconds ? { prefer: `wait=${waitSeconds}` } : {}),
      firstDelayMs: confirmed.pollInMs,
      signal: new AbortController().signal,
      onStatus: () => {},
    })
  }
  let status = confirmed
  while (!status.isFinal) {
    await sleep(everyMs)
    status = await call('GET', url)
  }
  return status
}

/**
 * The merchant's view of each payment once it is final and, when it succeeded, its settlement recorded
 * (or after a minute without one: the money check then tells).
 */
export function settledViews(
  call: CliServer['call'],
  merchantId: string,
  payments: readonly { paymentId: string }[],
): Promise<Json[]> {
  return inParallel(payments, 16, async ({ paymentId }) => {
    for (let waited = 0; ; waited += 250) {
      const view = await call('GET', `/v1/payments/${paymentId}`, undefined, { 'merchant-id': merchantId })
      if (view.status !== 'succeeded' || view.settlement?.successful || waited > 60_000) return view
      await sleep(250)
    }
  })
}

/** The p-th quantile (0..1) of ascending `sorted`; NaN when empty. */
export function quantile(sorted: readonly number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * p))] ?? Number.NaN
}

function api(base: string, apiKey: string) {
  let idempotency = 0
  return async (
    method: string,
    url: string,
    body?: unknown,
    extra: Record<string, string> = {},
  ): Promise<Json> => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: {
        'api-key': apiKey,
        'content-type': 'application/json',
        ...(method === 'POST' && url.startsWith('/v1/merchants')
          ? { 'idempotency-key': `relay-bench-${++idempotency}` }
          : {}),
        ...extra,
      },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    const json = await res.json()
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`)
    return json
  }
}

function cli(args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(root, 'bin/caipay.js'), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    let err = ''
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString()
    })
    child.stderr.on('data', (c: Buffer) => {
      err += c.toString()
    })
    child.once('exit', (code) => (code === 0 ? resolve(out) : reject(new Error(`caipay ${args[0]}: ${err}`))))
  })
}

async function waitForServer(base: string, child: ChildProcess, log: () => string): Promise<void> {
  const deadline = Date.now() + 60_000
  for (;;) {
    if (child.exitCode !== null) throw new Error(`caipay serve exited:\n${log()}`)
    try {
      if ((await fetch(`${base}/healthz`)).ok) return
    } catch {
      // Not listening yet.
    }
    if (Date.now() > deadline) throw new Error(`caipay serve did not come up:\n${log()}`)
    await sleep(100)
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer()
    probe.once('error', reject)
    probe.listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number }
      probe.close(() => resolve(port))
    })
  })
}

/**
 * With CAIPAY_BENCH_PROFILE_DIR (the server runs under `--cpu-prof`), the measured window in the
 * profile's clock (CLOCK_MONOTONIC, µs, shared by every process on Linux), written next to the profile
 * so `npx tsx bench/profile.ts <file> --window <dir>/window.json` summarises the burst alone.
 */
export function profileWindow() {
  const now = () => Number(process.hrtime.bigint() / 1000n)
  const from = now()
  return {
    async end() {
      const dir = process.env.CAIPAY_BENCH_PROFILE_DIR
      if (dir) await fs.writeFile(path.join(dir, 'window.json'), JSON.stringify({ from, to: now() }))
    },
  }
}
