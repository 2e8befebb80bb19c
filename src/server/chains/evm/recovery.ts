import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import { type Address, type Hex, recoverAddress } from 'viem'
import type { JobLogger } from '../../jobs/runner.js'

/**
 * ECDSA public-key recovery of a payer's signature, off the event loop. A recovery is about 1.3 ms of CPU
 * in JavaScript, the costliest step of a gasless confirm: 100 confirms arriving together held the event
 * loop 130 ms for it alone, while their relays waited to be broadcast before the next block
 * (docs/performance.md). One worker thread does them in turn; the answer is the same function's, so
 * nothing but where it runs changes. Without a worker (it cannot start, or it died) recovery runs inline.
 *
 * Process-wide and stateless: the worker holds no key and no cache, and does not keep the process alive.
 */
export function recoverSigner(hash: Hex, signature: Hex): Promise<Address> {
  startRecoveryThread()
  return pool ? pool.recover(hash, signature) : recoverAddress({ hash, signature })
}

/**
 * Starts the worker ahead of the first confirm (it takes ~150 ms to load): once per process. `log` hears
 * when recovery falls back to the event loop (the worker could not start, or stopped).
 */
export function startRecoveryThread(log?: Pick<JobLogger, 'warn'>): void {
  if (log) warn ??= log.warn.bind(log)
  if (pool === undefined) pool = startPool() ?? null
}

let warn: JobLogger['warn'] | undefined
const fellBack = (error: unknown) =>
  warn?.(
    { error: String(error) },
    'Signature recovery runs on the event loop: its worker thread is not running',
  )

/** null: no worker (it could not start, or died); recovery runs inline from then on. */
let pool: Pool | null | undefined

interface Pool {
  recover(hash: Hex, signature: Hex): Promise<Address>
}

interface Pending {
  hash: Hex
  signature: Hex
  resolve(address: Address): void
  reject(error: Error): void
}

// CommonJS on purpose: an `eval` worker is a script, and viem's own CommonJS build is resolved from here.
const workerSource = (viem: string) => `
const { parentPort } = require('node:worker_threads')
const { recoverAddress } = require(${JSON.stringify(viem)})
parentPort.on('message', ({ id, hash, signature }) => {
  recoverAddress({ hash, signature }).then(
    (address) => parentPort.postMessage({ id, address }),
    (error) => parentPort.postMessage({ id, error: String((error && error.message) || error) }),
  )
})
`

function startPool(): Pool | undefined {
  let worker: Worker
  try {
    const viem = createRequire(import.meta.url).resolve('viem')
    worker = new Worker(workerSource(viem), { eval: true })
  } catch (error) {
    fellBack(error)
    return undefined
  }
  const pending = new Map<number, Pending>()
  let nextId = 0
  let alive = true
  worker.on('message', (message: { id: number; address?: Address; error?: string }) => {
    const request = pending.get(message.id)
    if (!request) return
    pending.delete(message.id)
    if (message.address) request.resolve(message.address)
    else request.reject(new Error(message.error ?? 'recovery failed'))
    if (pending.size === 0) worker.unref()
  })
  // A worker that dies leaves nothing unanswered: what it held is recovered inline, and so is what follows.
  const died = (reason: unknown) => {
    if (!alive) return
    alive = false
    pool = null
    fellBack(reason)
    for (const request of pending.values())
      recoverAddress({ hash: request.hash, signature: request.signature }).then(
        request.resolve,
        request.reject,
      )
    pending.clear()
  }
  worker.on('error', died)
  worker.on('exit', (code) => died(`exited with code ${code}`))
  // After the listeners: adding a 'message' listener refs the worker again, and an idle worker must not
  // keep a process alive (a CLI command that built a chain would never exit).
  worker.unref()
  const self: Pool = {
    recover(hash, signature) {
      if (!alive) return recoverAddress({ hash, signature })
      return new Promise<Address>((resolve, reject) => {
        const id = nextId++
        pending.set(id, { hash, signature, resolve, reject })
        // Referenced only while it owes an answer: an idle worker never keeps the process alive.
        if (pending.size === 1) worker.ref()
        worker.postMessage({ id, hash, signature })
      })
    },
  }
  return self
}
