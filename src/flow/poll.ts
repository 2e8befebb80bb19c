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
  /**
   * Asks the service to hold each status read until the status changes, up to this many seconds
   * (`Prefer: wait`): the flow then learns the outcome when it happens, with one read instead of one per
   * `pollInMs`. A service without it answers at once and the flow polls as before. Default 20; 0: never.
   */
  waitSeconds?: number
  sleep?: (ms: number, signal: AbortSignal) => Promise<void>
  now?: () => number
  random?: () => number
}

export interface PollParameters {
  getStatus(signal: AbortSignal, waitSeconds: number): Promise<StatusResponse>
  /** The `pollInMs` of the last answer (confirm's, or the snapshot's when resuming). */
  firstDelayMs: number | null
  signal: AbortSignal
  onStatus(status: StatusResponse): void
  options?: PollOptions
}

/** Codes worth another poll: the status read failed, the payment did not. */
const transientCodes: readonly string[] = ['network_error', 'rate_limited', 'internal_error']

/** The least time between two status reads, whatever the service answers. */
const minGapMs = 250

/**
 * Reads the status until it is final or the deadline passes, waiting `pollInMs` (plus jitter) between
 * reads, never sooner than `minGapMs` after the previous read began (a service answering 0 at once cannot
 * make the flow spin). With `waitSeconds` the reads ask to be held until the status changes: the first goes
 * `minGapMs` after the answer that started the polling, and a service that held one answers `pollInMs: 0`,
 * so the next follows it.
 */
export async function pollUntilFinal(parameters: PollParameters): Promise<StatusResponse> {
  const { signal } = parameters
  let {
    now = Date.now,
    random = Math.random,
    sleep = defaultSleep,
    deadlineMs = 10 * 60_000,
    intervalMs = 1_000,
    jitter = 0.1,
    waitSeconds = 20,
  } = parameters.options ?? {}
  const deadline = now() + deadlineMs
  let nextDelay = waitSeconds ? 0 : parameters.firstDelayMs
  // The answer that started the polling (confirm's, or a resumed snapshot's) counts as the last read.
  let lastReadAt = now()
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
    const delay = Math.max(base + Math.floor(base * jitter * random()), lastReadAt + minGapMs - now())
    if (delay > 0) await abortable(sleep(Math.min(remaining, delay), signal), signal)
    throwIfAborted(signal)
    try {
      lastReadAt = now()
      last = await parameters.getStatus(signal, Math.min(waitSeconds, Math.ceil(remaining / 1000)))
    } catch (error) {
      if (isPayError(error) && transientCodes.includes(error.code)) {
        nextDelay = null
        // A held read the way to the service cuts (a proxy's idle timeout, a CORS preflight without
        // `Prefer`): plain reads from here on.
        if (error.code === 'network_error') waitSeconds = 0
        continue
      }
      throw error
    }
    parameters.onStatus(last)
    if (last.isFinal) return last
    nextDelay = last.pollInMs
  }
}
