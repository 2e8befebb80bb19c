/**
 * A server under test in its own process: the ceiling (bench/ceiling.ts) or the caipay server
 * (`startServer`, rate limit off, no logger) on an existing database. The parent gets `{ url }` once it
 * listens and sends `'stop'` to end it.
 */
import type { ChildProcess } from 'node:child_process'
import { parseArgs } from 'node:util'
import { forkBench, waitExit } from './child.js'

export type TargetKind = 'ceiling' | 'server'

export interface Target {
  kind: TargetKind
  url: string
  pid: number
  stop(): Promise<void>
}

export interface SpawnTargetOptions {
  databaseUrl: string
  /** Writes a V8 CPU profile of the server process into this directory when it stops. */
  cpuProfDir?: string
}

export async function spawnTarget(kind: TargetKind, options: SpawnTargetOptions): Promise<Target> {
  const child = forkBench('target.ts', ['--serve', kind, '--database-url', options.databaseUrl], {
    ...(options.cpuProfDir ? { execArgv: ['--cpu-prof', `--cpu-prof-dir=${options.cpuProfDir}`] } : {}),
  })
  const url = await new Promise<string>((resolve, reject) => {
    child.once('message', (message) => resolve((message as { url: string }).url))
    child.once('error', reject)
    child.once('exit', (code) => reject(new Error(`${kind} server exited with ${code} before listening`)))
  })
  return {
    kind,
    url,
    pid: child.pid!,
    stop: () => stopChild(child),
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.connected) child.send('stop')
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
          config: (await import('../src/server/config.js')).resolveConfig({ rateLimit: false }),
          logger: false,
        })
  let closing: Promise<void> | undefined
  const close = () => {
    closing ??= 'close' in running ? running.close() : running.stop()
    return closing
  }
  process.on('message', (message) => {
    if (message !== 'stop') return
    close().finally(() => {
      process.disconnect()
      process.exit(0)
    })
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
