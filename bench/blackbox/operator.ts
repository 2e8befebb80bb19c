/**
 * caipay as an operator runs it, from the outside: a config file naming the live chain (executor key
 * from the environment), `caipay keys create` for a merchant key and a wallet key, `caipay serve` in
 * its own process (embedded PostgreSQL in a data directory), and HTTP calls per the published API.
 * Nothing here imports caipay's code.
 */
import { spawn } from 'node:child_process'
import { randomUUID } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort, sleep } from './chain.js'

const cliPath = fileURLToPath(new URL('../../bin/caipay.js', import.meta.url))

export interface Operator {
  baseUrl: string
  merchantKey: string
  walletKey: string
  /** The server's process id (its CPU time is read from /proc). */
  pid: number
  /** A merchant API call with the merchant key; throws on any answer but 2xx. */
  merchant<T = Record<string, unknown>>(
    method: 'GET' | 'POST',
    url: string,
    options?: { body?: unknown; merchantId?: string },
  ): Promise<T>
  stop(): Promise<void>
}

export interface OperatorSetup {
  /** The config file's content. */
  config: Record<string, unknown>
  /** Environment the server reads `env:NAME` values from. */
  env: Record<string, string>
  /** Where the embedded PostgreSQL and the log go; created and removed by the caller. */
  dir: string
}

/** Runs `caipay <args>` to completion and returns its standard output. */
function caipay(args: readonly string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    const out: Buffer[] = []
    const err: Buffer[] = []
    child.stdout.on('data', (chunk: Buffer) => out.push(chunk))
    child.stderr.on('data', (chunk: Buffer) => err.push(chunk))
    child.once('error', reject)
    child.once('exit', (code) =>
      code === 0
        ? resolve(Buffer.concat(out).toString())
        : reject(new Error(`caipay ${args.join(' ')} exited ${code}: ${Buffer.concat(err)}`)),
    )
  })
}

export async function startOperator({ config, env, dir }: OperatorSetup): Promise<Operator> {
  // The embedded PostgreSQL runs as its own OS user under root: it must be able to enter the directory.
  await fs.chmod(dir, 0o755)
  const port = await freePort()
  const baseUrl = `http://127.0.0.1:${port}`
  const configPath = path.join(dir, 'caipay.config.json')
  await fs.writeFile(configPath, JSON.stringify({ publicBaseUrl: baseUrl, ...config }, null, 2))
  const database = ['--data-dir', path.join(dir, 'pg')]
  const keyOf = async (role: string) => {
    const created = await caipay(['keys', 'create', '--mode', 'live', '--role', role, '--json', ...database])
    return (JSON.parse(created) as { apiKey: string }).apiKey
  }
  const merchantKey = await keyOf('partner')
  const walletKey = await keyOf('wallet')

  // Request lines go to a file, as a service manager keeps them; a pipe drained late would stall the server.
  const logPath = path.join(dir, 'serve.log')
  const log = await fs.open(logPath, 'w')
  const child = spawn(
    process.execPath,
    [cliPath, 'serve', '--port', String(port), '--config', configPath, ...database],
    { stdio: ['ignore', log.fd, log.fd], env: { ...process.env, ...env } },
  )
  await log.close()
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise((resolve) => child.once('exit', resolve))
    child.kill('SIGTERM')
    const timer = setTimeout(() => child.kill('SIGKILL'), 15_000)
    await exited
    clearTimeout(timer)
  }
  try {
    for (let waited = 0; ; waited += 200) {
      if (child.exitCode !== null) throw new Error(`caipay serve exited:\n${readFileSync(logPath, 'utf8')}`)
      const healthy = await fetch(`${baseUrl}/healthz`).then(
        (r) => r.ok,
        () => false,
      )
      if (healthy) break
      if (waited > 90_000) throw new Error('caipay serve did not answer /healthz within 90 s.')
      await sleep(200)
    }
  } catch (error) {
    await stop()
    throw error
  }

  const merchant: Operator['merchant'] = async (method, url, { body, merchantId } = {}) => {
    const response = await fetch(`${baseUrl}${url}`, {
      method,
      headers: {
        'api-key': merchantKey,
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...(method === 'POST' && { 'idempotency-key': randomUUID() }),
        ...(merchantId && { 'merchant-id': merchantId }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    })
    const text = await response.text()
    if (!response.ok) throw new Error(`${method} ${url} answered ${response.status}: ${text}`)
    return JSON.parse(text)
  }
  return { baseUrl, merchantKey, walletKey, pid: child.pid ?? 0, merchant, stop }
}

/**
 * CPU seconds (user + system) used so far by a process and, separately, by every process below it
 * (the embedded PostgreSQL and its backends), from /proc; zeros where there is no /proc.
 */
export function cpuSeconds(pid: number): { server: number; below: number } {
  const stats = new Map<number, { parent: number; seconds: number }>()
  let entries: string[] = []
  try {
    entries = readdirSync('/proc').filter((name) => /^\d+$/.test(name))
  } catch {
    return { server: 0, below: 0 }
  }
  for (const entry of entries) {
    try {
      // Fields after the command name: state, ppid, ..., utime (14th of stat), stime (15th).
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1]!.split(' ')
      stats.set(Number(entry), {
        parent: Number(fields[1]),
        seconds: (Number(fields[11]) + Number(fields[12])) / 100,
      })
    } catch {
      // The process ended meanwhile.
    }
  }
  let below = 0
  const queue = [pid]
  while (queue.length > 0) {
    const parent = queue.pop()!
    for (const [child, stat] of stats) {
      if (stat.parent !== parent) continue
      below += stat.seconds
      queue.push(child)
    }
  }
  return { server: stats.get(pid)?.seconds ?? 0, below }
}
