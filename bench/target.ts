/**
 * A server under test in its own process:
 * - `cli`: the server as it ships, `caipay serve` run by plain Node from src/server/cli.ts bundled the
 *   way `npm run build` bundles it (esbuild, dependencies left to node_modules; tsx would add its
 *   loader and some 70 MB of resident memory), with its own pino logger at the level of `LOG_LEVEL`
 *   (default info), its output appended to a file as an operator's log collector would take it, and a
 *   config file that only turns the rate limit off;
 * - `ceiling` (bench/ceiling.ts) and `server` (`startServer` in a bench child, rate limit off, no
 *   logger: the in-process figures kept alongside), which take IPC commands: the parent may ask for a
 *   CPU profile of a window (`profile(file, during)`: V8's profiler through node:inspector, so
 *   start-up is not in it), and sends `'stop'` to end it.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { openSync, rmSync } from 'node:fs'
import fs from 'node:fs/promises'
import { Session } from 'node:inspector/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { build } from 'esbuild'
import { forkBench, trackChild, waitExit } from './child.js'

export type TargetKind = 'ceiling' | 'server' | 'cli'

export interface Target {
  kind: TargetKind
  url: string
  pid: number
  /** Runs `during` with the target's CPU profiler on; the profile is written to `file`. */
  profile<T>(file: string, during: () => Promise<T>): Promise<T>
  stop(): Promise<void>
}

type Command = 'stop' | { profile: 'start' } | { profile: 'stop'; file: string }

export interface TargetOptions {
  databaseUrl: string
  /** `cli` only: LOG_LEVEL of the server (unset: the default, info). */
  logLevel?: string
}

export async function spawnTarget(kind: TargetKind, options: TargetOptions): Promise<Target> {
  if (kind === 'cli') return spawnCli(options)
  const child = forkBench('target.ts', ['--serve', kind, '--database-url', options.databaseUrl])
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url))
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code} before listening`)))
  })
  const ask = (command: Command) =>
    new Promise<void>((resolve) => {
      child.once('message', () => resolve())
      child.send(command)
    })
  return {
    kind,
    url,
    pid: child.pid!,
    async profile(file, during) {
      await ask({ profile: 'start' })
      try {
        return await during()
      } finally {
        await ask({ profile: 'stop', file })
      }
    },
    stop: () => stopChild(child),
  }
}

/** Bytes the CLI server has written to its log so far (its stdout and stderr). */
export interface CliTarget extends Target {
  logBytes(): Promise<number>
}

/** Directories to remove when the run ends, however it ends (`removeTargetFiles`). */
const leftovers = new Set<string>()

let builtCli: Promise<string> | undefined

/**
 * src/server/cli.ts as one ES module, built once per run inside node_modules/.cache (so its
 * dependencies and the package's package.json resolve from there, as from dist/). Its path.
 */
function cliBundle(): Promise<string> {
  builtCli ??= (async () => {
    const root = fileURLToPath(new URL('..', import.meta.url))
    const cache = path.join(root, 'node_modules', '.cache')
    await fs.mkdir(cache, { recursive: true })
    const dir = await fs.mkdtemp(path.join(cache, 'caipay-bench-cli-'))
    leftovers.add(dir)
    const outfile = path.join(dir, 'cli.js')
    await build({
      entryPoints: [path.join(root, 'src/server/cli.ts')],
      bundle: true,
      platform: 'node',
      format: 'esm',
      target: 'es2022',
      packages: 'external',
      outfile,
      logLevel: 'warning',
    })
    return outfile
  })()
  return builtCli
}

/** Removes the built CLI and the directories of CLI servers not stopped (an interrupted run). */
export function removeTargetFiles(): void {
  for (const dir of leftovers) rmSync(dir, { recursive: true, force: true })
  leftovers.clear()
}

/** The servers' config: no rate limit; CAIPAY_FAST_PATHS=0 measures them with every fast path off. */
const serverConfig = {
  rateLimit: false,
  ...(process.env.CAIPAY_FAST_PATHS === '0' ? { fastPaths: false } : {}),
}

async function spawnCli(options: TargetOptions): Promise<CliTarget> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-cli-'))
  leftovers.add(dir)
  const configFile = path.join(dir, 'config.json')
  const logFile = path.join(dir, 'server.log')
  await fs.writeFile(configFile, JSON.stringify(serverConfig))
  const out = openSync(logFile, 'a')
  const env = { ...process.env }
  delete env.LOG_LEVEL
  if (options.logLevel) env.LOG_LEVEL = options.logLevel
  const cli = await cliBundle()
  const args = ['serve', '--port', '0', '--database-url', options.databaseUrl, '--config', configFile]
  const child = trackChild(spawn(process.execPath, [cli, ...args], { env, stdio: ['ignore', out, out] }))
  const url = await listeningUrl(child, logFile)
  return {
    kind: 'cli',
    url,
    pid: child.pid!,
    profile: () => Promise.reject(new Error('cli target: no profiler (use the server target)')),
    logBytes: async () => (await fs.stat(logFile)).size,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      await waitExit(child, 15_000)
      await fs.rm(dir, { recursive: true, force: true })
      leftovers.delete(dir)
    },
  }
}

/** Waits for the CLI's `caipay listening on <url>` line in its log. */
async function listeningUrl(child: ChildProcess, logFile: string): Promise<string> {
  for (let waited = 0; waited < 60_000; waited += 50) {
    const text = await fs.readFile(logFile, 'utf8')
    const url = /caipay listening on (\S+)/.exec(text)?.[1]
    if (url) return url
    if (child.exitCode !== null) throw new Error(`caipay serve exited with ${child.exitCode}: ${text.trim()}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error('caipay serve did not listen within 60 s')
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.connected) child.send('stop' satisfies Command)
  await waitExit(child, 15_000)
}

async function serve(kind: TargetKind, databaseUrl: string): Promise<void> {
  // Imported here: the ceiling process loads Fastify and pg only, never the server's modules.
  const running =
    kind === 'ceiling'
      ? await (await import('./ceiling.js')).startCeiling({ databaseUrl })
      : await (await import('../src/server/server.js')).startServer({
          port: 0,
          host: '127.0.0.1',
          databaseUrl,
          config: (await import('../src/server/config.js')).resolveConfig(serverConfig),
          logger: false,
        })
  let closing: Promise<void> | undefined
  const close = () => {
    closing ??= 'close' in running ? running.close() : running.stop()
    return closing
  }
  let session: Session | undefined
  process.on('message', (message: Command) => {
    if (message === 'stop') {
      void close().finally(() => {
        process.disconnect()
        process.exit(0)
      })
      return
    }
    void (async () => {
      if (message.profile === 'start') {
        session = new Session()
        session.connect()
        await session.post('Profiler.enable')
        await session.post('Profiler.setSamplingInterval', { interval: 200 })
        await session.post('Profiler.start')
      } else if (session) {
        const { profile } = await session.post('Profiler.stop')
        await fs.writeFile(message.file, JSON.stringify(profile))
        session.disconnect()
        session = undefined
      }
      process.send!('ok')
    })()
  })
  // The parent went away without a word: do not outlive it.
  process.on('disconnect', () => void close().finally(() => process.exit(0)))
  process.send!({ url: running.url })
}

if (process.send && process.argv.includes('--serve')) {
  const { values } = parseArgs({
    options: { serve: { type: 'string' }, 'database-url': { type: 'string' } },
    allowPositionals: true,
  })
  await serve(values.serve as TargetKind, values['database-url']!)
}
