/**
 * Child processes of the benchmark: every server under test, every load generator and every client
 * script runs in its own Node process (TypeScript through tsx), so what is measured never shares an
 * event loop with what measures it. The parent keeps a list and kills what is left on exit.
 */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'

const children = new Set<ChildProcess>()

export interface ForkOptions {
  /** Extra Node flags (e.g. `--cpu-prof`). */
  execArgv?: string[]
  env?: NodeJS.ProcessEnv
}

/** Starts `bench/<file>` (a path relative to this folder) with tsx and an IPC channel. */
export function forkBench(file: string, args: string[], options: ForkOptions = {}): ChildProcess {
  const path = fileURLToPath(new URL(file, import.meta.url))
  const child = fork(path, args, {
    execArgv: ['--import', 'tsx', ...(options.execArgv ?? [])],
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  })
  return trackChild(child)
}

/** Adds a child started otherwise to the list killed on exit. */
export function trackChild(child: ChildProcess): ChildProcess {
  children.add(child)
  child.once('exit', () => children.delete(child))
  return child
}

interface Reply {
  ok: boolean
  result?: unknown
  error?: string
}

/** Forks a one-shot job: sends `input`, resolves with the child's answer once it has exited. */
export function runJob<T>(file: string, input: unknown, options: ForkOptions = {}): Promise<T> {
  const child = forkBench(file, ['--job'], options)
  return new Promise<T>((resolve, reject) => {
    let reply: Reply | undefined
    child.on('message', (message) => {
      reply = message as Reply
    })
    child.once('error', reject)
    child.once('exit', (code, signal) => {
      if (reply?.ok) resolve(reply.result as T)
      else reject(new Error(reply?.error ?? `${file} exited with ${signal ?? code} before answering`))
    })
    child.send(input as object)
  })
}

/** In a job child: answers the first message with `handler`'s result, then exits. */
export function serveJob<I, O>(handler: (input: I) => Promise<O>): void {
  process.once('message', (input) => {
    handler(input as I).then(
      (result) => finish({ ok: true, result }),
      (error: unknown) =>
        finish({ ok: false, error: error instanceof Error ? (error.stack ?? error.message) : String(error) }),
    )
  })
}

function finish(reply: Reply): void {
  process.send!(reply, () => {
    process.disconnect()
    process.exit(0)
  })
}

/** Whether the module at `moduleUrl` (its `import.meta.url`) is the entry of this job child. */
export function isJobChild(moduleUrl: string): boolean {
  return (
    process.send !== undefined &&
    process.argv.includes('--job') &&
    process.argv[1] === fileURLToPath(moduleUrl)
  )
}

/** Kills every child still running (the orchestrator's last step, and its exit path). */
export function killChildren(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  }
}

/** Waits for a child to exit, killing it after `ms`. */
export function waitExit(child: ChildProcess, ms = 10_000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve()
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), ms)
    child.once('exit', () => {
      clearTimeout(timer)
      resolve()
    })
  })
}
