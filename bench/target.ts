/**
 * A server under test in its own process: the ceiling (bench/ceiling.ts) or the caipay server
 * (`startServer`, rate limit off, no logger) on an existing database. The parent gets `{ url }` once it
 * listens, may ask for a CPU profile of a window (`profile(file, during)`: V8's profiler through
 * node:inspector, so start-up is not in it), and sends `'stop'` to end it.
 */
import type { ChildProcess } from 'node:child_process'
import fs from 'node:fs/promises'
import { Session } from 'node:inspector/promises'
import { parseArgs } from 'node:util'
import { forkBench, waitExit } from './child.js'

export type TargetKind = 'ceiling' | 'server'

export interface Target {
  kind: TargetKind
  url: string
  pid: number
  /** Runs `during` with the target's CPU profiler on; the profile is written to `file`. */
  profile<T>(file: string, during: () => Promise<T>): Promise<T>
  stop(): Promise<void>
}

type Command = 'stop' | { profile: 'start' } | { profile: 'stop'; file: string }

export async function spawnTarget(kind: TargetKind, options: { databaseUrl: string }): Promise<Target> {
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
          config: (await import('../src/server/config.js')).resolveConfig({ rateLimit: false }),
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
