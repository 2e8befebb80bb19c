import { expireDuePayments } from '../payments/lifecycle.js'
import type { Db } from '../store/db.js'
import { type Sweep, startSweep } from './sweep.js'

/** `sweep()` returns the ids it expired. */
export type ExpiryJob = Sweep<string[]>

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
  return startSweep({
    run: () => expireDuePayments(options.db, { now: now() }),
    intervalMs: options.intervalMs ?? 5000,
    onError: options.onError,
  })
}
