import { type JobListener, listenOn } from '../jobs/notify.js'

/**
 * Status reads held until their payment's status changes (`Prefer: wait=<seconds>`, RFC 7240): a wallet
 * learns `succeeded` the moment it is committed, with one request instead of one per `pollInMs`.
 *
 * The database tells every instance of every change of a payment's status, whoever made it (migration
 * 017's trigger; server.ts LISTENs and calls `changed`). Reads wait only while that connection is up: a
 * change nobody hears would hold a read to its timeout, so without it a read answers at once, as a
 * server that does not offer waiting would. On every (re)connect, reads already waiting are woken to read
 * again (changes made while disconnected were not heard).
 */
export class StatusChanges {
  readonly #waiting = new Map<string, Set<() => void>>()
  #listening = false
  #closed = false

  /** `maxWaitMs`: the longest a read is held (config `statusWaitMaxMs`); 0 offers no waiting. */
  constructor(readonly maxWaitMs: number) {}

  /** close() was called: the server is shutting down. */
  get closed(): boolean {
    return this.#closed
  }

  /** Whether a read may wait now. */
  get available(): boolean {
    return this.#listening && !this.#closed && this.maxWaitMs > 0
  }

  /** The change feed is connected (true) or lost (false); either way, every waiting read reads again. */
  setListening(listening: boolean): void {
    this.#listening = listening
    this.#wakeAll()
  }

  /** A payment's status changed and the change is committed. */
  changed(paymentId: string): void {
    const wakers = this.#waiting.get(paymentId)
    if (!wakers) return
    this.#waiting.delete(paymentId)
    for (const wake of wakers) wake()
  }

  /** Shutting down: every waiting read answers now, and no read waits from here on. */
  close(): void {
    this.#closed = true
    this.#wakeAll()
  }

  /**
   * Starts watching `paymentId` before its status is read (a change between the read and the wait is
   * then not missed). `until` resolves on a change, after `ms`, or when `signal` aborts; `stop` releases
   * the watch (call it in a finally).
   */
  watch(paymentId: string): { until(ms: number, signal: AbortSignal): Promise<void>; stop(): void } {
    let woken = false
    let resolve: (() => void) | undefined
    const wake = () => {
      woken = true
      resolve?.()
    }
    const wakers = this.#waiting.get(paymentId) ?? new Set()
    this.#waiting.set(paymentId, wakers)
    wakers.add(wake)
    const stop = () => {
      const current = this.#waiting.get(paymentId)
      if (!current?.delete(wake)) return
      if (current.size === 0) this.#waiting.delete(paymentId)
    }
    return {
      until: (ms, signal) =>
        new Promise<void>((done) => {
          if (woken || signal.aborted) return done()
          const timer = setTimeout(finish, ms)
          function finish() {
            clearTimeout(timer)
            signal.removeEventListener('abort', finish)
            done()
          }
          resolve = finish
          signal.addEventListener('abort', finish, { once: true })
        }),
      stop,
    }
  }

  /** How many reads wait now (for tests and metrics). */
  get waiting(): number {
    let n = 0
    for (const wakers of this.#waiting.values()) n += wakers.size
    return n
  }

  #wakeAll(): void {
    const all = [...this.#waiting.values()]
    this.#waiting.clear()
    for (const wakers of all) for (const wake of wakers) wake()
  }
}

export const paymentStatusChannel = 'caipay_payment_status'

/** Feeds `changes` from the database's notifications (migration 017) on a dedicated connection. */
export function listenForStatusChanges(options: {
  connectionString: string
  changes: StatusChanges
  onError?: (error: unknown) => void
}): JobListener {
  const { changes } = options
  const listener = listenOn({
    connectionString: options.connectionString,
    channel: paymentStatusChannel,
    onMessage: (paymentId) => changes.changed(paymentId),
    onListening: () => changes.setListening(true),
    onError: (error) => {
      changes.setListening(false)
      options.onError?.(error)
    },
  })
  return {
    async close() {
      changes.setListening(false)
      await listener.close()
    },
  }
}
