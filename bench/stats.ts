/** Timing, median and printing shared by the live payment benchmarks (evm-live.ts, solana-live.ts). */

/** The benchmark's HTTP helper: JSON in, parsed JSON out, throwing on a non-2xx status. */
export type BenchCall = (method: string, url: string, body?: unknown) => Promise<unknown>

/** The middle sample (the mean of the two middle ones for an even count). */
export function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b)
  const mid = sorted.length >> 1
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2
}

/**
 * Confirms the payment through the gateway, then polls its status every 5 ms: the milliseconds from the
 * confirm call to the status reporting `succeeded` (any other final state throws).
 */
export async function timeConfirmToSucceeded(
  call: BenchCall,
  paymentId: string,
  confirmBody: { optionId: string; results: unknown[] },
): Promise<number> {
  const gw = `/v1/gateway/payment/${paymentId}`
  const started = performance.now()
  await call('POST', `${gw}/confirm`, confirmBody)
  for (;;) {
    const status = (await call('GET', `${gw}/status`)) as { isFinal: boolean; status: string }
    if (status.isFinal) {
      if (status.status !== 'succeeded') throw new Error(`payment ${paymentId} ended ${status.status}`)
      return performance.now() - started
    }
    await new Promise((resolve) => setTimeout(resolve, 5))
  }
}

/**
 * Runs `measure(-1)` once as a warm-up, then `measure(0 .. runs - 1)`, and prints
 * `  <label>: median N ms (min N, max N, n=runs)`.
 */
export async function printMedianOfRuns(
  label: string,
  runs: number,
  measure: (i: number) => Promise<number>,
): Promise<void> {
  await measure(-1)
  const times: number[] = []
  for (let i = 0; i < runs; i++) times.push(await measure(i))
  console.log(
    `  ${label}: median ${median(times).toFixed(0)} ms (min ${Math.min(...times).toFixed(0)}, max ${Math.max(...times).toFixed(0)}, n=${runs})`,
  )
}
