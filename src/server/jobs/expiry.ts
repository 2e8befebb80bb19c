import { expireDuePayments } from '../payments/lifecycle.js'
import type { Db } from '../store/db.js'

export interface ExpiryJob {
  /** Runs one sweep now (also what the timer calls). Returns the ids it expired. */
  sweep(): Promise<string[]>
  /** Stops the timer and waits for a sweep in progress. */
  stop(): Promise<void>
}

/**
 * Marks payments still waiting past their expiry as expired, every `intervalMs`. Reads apply expiry
 * lazily as well, so the sweep only makes listings, webhooks-to-be and the checkout page timely. Each
 * row moves with a conditional UPDATE, so several instances sweeping at once and buyers confirming at
 * the last second never both win.
 */
export function startExpiryJob(options: {
  db: Db
  now?: () => Date
  intervalMs?: number
  onError?: (error: unknown) => void
}): ExpiryJob {
  const now = options.now ?? (() => new Date())
  let running: Promise<string[]> | undefined
  let stopped = false
  const sweep = () => {
    running ??= expireDuePayments(options.db, { now: now() }).finally(() => {
      running = undefined
    })
    return running
  }
  const timer = setInterval(() => {
    if (!stopped) sweep().catch((error) => options.onError?.(error))
  }, options.intervalMs ?? 5000)
  // A sweep timer alone must not keep a CLI or test process alive.
  timer.unref()
  return {
    sweep,
    async stop() {
      stopped = true
      clearInterval(timer)
      await running?.catch(() => {})
    },
  }
}
