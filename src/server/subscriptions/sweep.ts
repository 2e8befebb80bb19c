import type { ChainDriver } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { type Sweep, startSweep } from '../jobs/sweep.js'
import type { Db } from '../store/db.js'
import { cancelUnactivated, chargeDueSubscriptions } from './lifecycle.js'

/** `sweep()` returns the attempts made and the subscriptions given up. */
export type SubscriptionSweep = Sweep<{ attempts: number; unactivated: number }>

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
  return startSweep({
    async run() {
      const now = options.now()
      const attempts = await chargeDueSubscriptions(options.db, options.config, {
        clockId: null,
        until: now,
        ...(options.drivers ? { drivers: options.drivers } : {}),
      })
      const unactivated = await cancelUnactivated(options.db, now)
      return { attempts, unactivated }
    },
    intervalMs: options.intervalMs ?? 30_000,
    onError: options.onError,
  })
}
