import { type ChildProcess, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'

/**
 * `caipay serve --api-only` or `--worker-only` as a real child process (through bin/caipay.js, as an
 * operator starts it), that a test can SIGKILL and start again on the same port and database.
 */
export type Role = 'api' | 'worker'

const bin = fileURLToPath(new URL('../../bin/caipay.js', import.meta.url))
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export class CaipayProcess {
  child: ChildProcess | undefined
  /** The last lines it printed (all starts), for failure messages. */
  log = ''
  starts = 0
  #exited: Promise<void> = Promise.resolve()

  constructor(
    readonly name: string,
    readonly role: Role,
    /** `serve` arguments besides the role (and `--port` of an API instance). */
    readonly args: readonly string[],
    readonly env: NodeJS.ProcessEnv,
    /** API instances keep their port across restarts, so clients find them again. */
    readonly port?: number,
  ) {}

  /** `http://127.0.0.1:<port>` of an API instance; empty for a worker. */
  get url(): string {
    return this.port === undefined ? '' : `http://127.0.0.1:${this.port}`
  }

  get alive(): boolean {
    const child = this.child
    return !!child && child.exitCode === null && child.signalCode === null
  }

  /** Starts it and resolves once it serves (API: `/healthz` answers) or runs jobs (worker: says so). */
  async start(timeoutMs = 60_000): Promise<void> {
    this.starts += 1
    const roleArgs = this.role === 'api' ? ['--api-only', '--port', String(this.port)] : ['--worker-only']
    const child = spawn(process.execPath, [bin, 'serve', ...roleArgs, ...this.args], {
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.child = child
    let ready = false
    const keep = (chunk: Buffer) => {
      const text = chunk.toString()
      if (text.includes('caipay worker running jobs')) ready = true
      this.log = (this.log + text).slice(-20_000)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    this.#exited = new Promise((resolve) => child.once('exit', () => resolve()))
    const deadline = Date.now() + timeoutMs
    for (;;) {
      // SIGKILLed while starting: the killer did it, and starts it again itself.
      if (child.signalCode === 'SIGKILL') return
      if (child.exitCode !== null) throw new Error(`${this.name} exited (${child.exitCode}):\n${this.log}`)
      if (this.role === 'worker' && ready) return
      if (this.role === 'api') {
        try {
          if ((await fetch(`${this.url}/healthz`)).ok) return
        } catch {
          // Not listening yet.
        }
      }
      if (Date.now() > deadline) throw new Error(`${this.name} did not come up:\n${this.log}`)
      await sleep(50)
    }
  }

  async kill(): Promise<void> {
    if (!this.alive) return
    this.child!.kill('SIGKILL')
    await this.#exited
  }

  /**
   * SIGSTOP: the process freezes where it is (a long GC pause, a VM freeze); its leases run out while
   * its sockets and half-done steps wait for `resume()`.
   */
  pause(): void {
    if (this.alive) this.child!.kill('SIGSTOP')
  }

  /** SIGCONT: a paused process carries on from where it froze. */
  resume(): void {
    if (this.alive) this.child!.kill('SIGCONT')
  }

  /** SIGTERM (a clean stop), SIGKILL when that takes more than a few seconds. */
  async stop(): Promise<void> {
    if (!this.alive) return
    // A paused process never handles SIGTERM.
    this.resume()
    this.child!.kill('SIGTERM')
    const timer = setTimeout(() => this.child?.kill('SIGKILL'), 5_000)
    await this.#exited
    clearTimeout(timer)
  }
}
