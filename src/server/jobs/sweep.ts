/** A sweep run on a timer (jobs/expiry.ts, subscriptions/sweep.ts, ledger/reconcile.ts, push scans). */
export interface Sweep<T> {
  /** Runs one sweep now (also what the timer calls); joins the one in progress, if any. */
  sweep(): Promise<T>
  /** Stops the timer and waits for a sweep in progress. */
  stop(): Promise<void>
}

/**
 * Runs `run` every `intervalMs`, one at a time: a tick while a sweep is in progress joins it, so a slow
 * sweep is never run twice at once. A failure goes to `onError` and the next tick tries again. The timer
 * does not keep a CLI or test process alive.
 */
export function startSweep<T>(options: {
  run: () => Promise<T>
  intervalMs: number
  onError?: ((error: unknown) => void) | undefined
}): Sweep<T> {
  let running: Promise<T> | undefined
  let stopped = false
  const sweep = () => {
    running ??= options.run().finally(() => {
      running = undefined
    })
    return running
  }
  const timer = setInterval(() => {
    if (!stopped) sweep().catch((error: unknown) => options.onError?.(error))
  }, options.intervalMs)
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
