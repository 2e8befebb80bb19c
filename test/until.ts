/**
 * Polls `check` until it holds (returns a truthy value), or fails after `timeoutMs` naming `what`.
 * Returns what it held with, so a probe can hand back the row it waited for.
 */
export async function until<T>(
  check: () => T | Promise<T>,
  what: string,
  timeoutMs = 10_000,
): Promise<Exclude<T, false | undefined | null | 0 | ''>> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await check()
    if (value) return value as Exclude<T, false | undefined | null | 0 | ''>
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}
