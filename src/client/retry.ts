export interface RetryPolicy {
  /** Total attempts including the first; 1 disables retries. */
  attempts: number
  /** First back-off delay; doubles each attempt. */
  baseDelayMs: number
  /** Upper bound for one back-off delay (also caps Retry-After). */
  maxDelayMs: number
  /**
   * One attempt (answer and body) gives up after this long, plus whatever a held status read asked the
   * service to wait: a service that accepts the connection and never answers cannot hold the flow.
   */
  timeoutMs: number
}

export const defaultRetryPolicy: RetryPolicy = {
  attempts: 3,
  baseDelayMs: 200,
  maxDelayMs: 5_000,
  timeoutMs: 30_000,
}

/** Exponential back-off with full jitter; a server's Retry-After wins when present. */
export function retryDelay(
  policy: Pick<RetryPolicy, 'baseDelayMs' | 'maxDelayMs'>,
  attempt: number,
  retryAfterMs: number | undefined,
  random = Math.random,
): number {
  if (retryAfterMs !== undefined) return Math.min(retryAfterMs, policy.maxDelayMs)
  const ceiling = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** (attempt - 1))
  return Math.round(ceiling / 2 + (random() * ceiling) / 2)
}

/** `Retry-After` as delta-seconds or an HTTP date. */
export function parseRetryAfter(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000
  const date = Date.parse(value)
  return Number.isNaN(date) ? undefined : Math.max(0, date - now)
}

export function isRetryableStatus(status: number): boolean {
  return status === 429 || status >= 500
}
