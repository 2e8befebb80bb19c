import type { ChainDriver } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import type { Db } from '../store/db.js'
import { cancelUnactivated, chargeDueSubscriptions } from './lifecycle.js'

export interface SubscriptionSweep {
  /** Runs one sweep now (also what the timer calls): the attempts made and the subscriptions given up. */
  sweep(): Promise<{ attempts: number; unactivated: number }>
  stop(): Promise<void>
}

/**
 * Every `intervalMs`: charges the periods (and retries) due on real time, and cancels the subscriptions
 * whose first payment ended unpaid. Subscriptions on a test clock wait for their clock to advance.
 */
export function startSubscriptionSweep(options: {
  db: Db
  config: ServerConfig
  now: () => Date
  /** Live mode's drivers: their live subscriptions are charged too (attemptCharge). */
  drivers?: readonly ChainDriver[]
  intervalMs?: number
  onError?: (error: unknown) => void
}): SubscriptionSweep {
  let running: Promise<{ attempts: number; unactivated: number }> | undefined
  let stopped = false
  const sweep = () => {
    running ??= (async () => {
      const now = options.now()
      const attempts = await chargeDueSubscriptions(options.db, options.config, {
        clockId: null,
        until: now,
        ...(options.drivers ? { drivers: options.drivers } : {}),
      })
      const unactivated = await cancelUnactivated(options.db, now)
      return { attempts, unactivated }
    })().finally(() => {
      running = undefined
    })
    return running
  }
  const timer = setInterval(() => {
    if (!stopped) sweep().catch((error) => options.onError?.(error))
  }, options.intervalMs ?? 30_000)
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
