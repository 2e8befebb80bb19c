import type { StatusResponse } from '../contract/payment.js'
import { abortable, sleep as defaultSleep, throwIfAborted } from '../errors/abort.js'
import { isPayError, PayError } from '../errors/PayError.js'

export interface PollOptions {
  /** Give up after this long (PayError `poll_timeout`). Default 10 minutes. */
  deadlineMs?: number
  /** Wait used when the service gives no `pollInMs`. Default 1000. */
  intervalMs?: number
  /** Extra wait as a fraction of the interval, drawn at random, so wallets do not poll in step. Default 0.1. */
  jitter?: number
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>
  now?: () => number
  random?: () => number
}

export interface PollParameters {
  getStatus(signal: AbortSignal): Promise<StatusResponse>
  /** The `pollInMs` of the last answer (confirm's, or the snapshot's when resuming). */
  firstDelayMs: number | null
  signal: AbortSignal
  onStatus(status: StatusResponse): void
  options?: PollOptions
}

const defaultPollOptions = {
  deadlineMs: 10 * 60_000,
  intervalMs: 1_000,
  jitter: 0.1,
} as const

/** Codes worth another poll: the status read failed, the payment did not. */
const transientCodes: readonly string[] = ['network_error', 'rate_limited', 'internal_error']

/** Waits `pollInMs` (plus jitter) between status reads until the status is final or the deadline passes. */
export async function pollUntilFinal(parameters: PollParameters): Promise<StatusResponse> {
  const { signal, options = {} } = parameters
  const now = options.now ?? Date.now
  const random = options.random ?? Math.random
  const sleep = options.sleep ?? defaultSleep
  const deadlineMs = options.deadlineMs ?? defaultPollOptions.deadlineMs
  const intervalMs = options.intervalMs ?? defaultPollOptions.intervalMs
  const jitter = options.jitter ?? defaultPollOptions.jitter
  const deadline = now() + deadlineMs
  let nextDelay = parameters.firstDelayMs
  let last: StatusResponse | undefined

  for (;;) {
    const remaining = deadline - now()
    if (remaining <= 0) {
      throw new PayError({
        code: 'poll_timeout',
        message: 'The payment did not reach a final status in time.',
        context: { deadlineMs, lastStatus: last?.status },
      })
    }
    const base = nextDelay ?? intervalMs
    await abortable(sleep(Math.min(remaining, base + Math.floor(base * jitter * random())), signal), signal)
    throwIfAborted(signal)
    try {
      last = await parameters.getStatus(signal)
    } catch (error) {
      if (isPayError(error) && transientCodes.includes(error.code)) {
        nextDelay = null
        continue
      }
      throw error
    }
    parameters.onStatus(last)
    if (last.isFinal) return last
    nextDelay = last.pollInMs
  }
}
