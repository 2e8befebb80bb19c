import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { StatusResponse } from '../contract/payment.js'
import { PayError } from '../errors/PayError.js'
import { type PollOptions, pollUntilFinal } from './poll.js'

const processing: StatusResponse = { status: 'processing', isFinal: false, pollInMs: 1000 }
const succeeded: StatusResponse = { status: 'succeeded', isFinal: true, pollInMs: null, txId: '0xabc' }

describe('pollUntilFinal', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })

  it('waits pollInMs plus jitter between reads and stops at the final status', async () => {
    const answers = [processing, { ...processing, pollInMs: 2000 }, succeeded]
    const getStatus = vi.fn(async () => answers.shift()!)
    const seen: StatusResponse[] = []
    const done = pollUntilFinal({
      getStatus,
      firstDelayMs: 500,
      signal: new AbortController().signal,
      onStatus: (s) => seen.push(s),
      options: { random: () => 0.5, jitter: 0.1, waitSeconds: 0 },
    })
    await vi.advanceTimersByTimeAsync(524)
    expect(getStatus).toHaveBeenCalledTimes(0)
    await vi.advanceTimersByTimeAsync(1) // 500 + 25 jitter
    expect(getStatus).toHaveBeenCalledTimes(1)
    await vi.advanceTimersByTimeAsync(1050) // 1000 + 50
    expect(getStatus).toHaveBeenCalledTimes(2)
    await vi.advanceTimersByTimeAsync(2099)
    expect(getStatus).toHaveBeenCalledTimes(2)
    await vi.advanceTimersByTimeAsync(1)
    await expect(done).resolves.toEqual(succeeded)
    expect(seen.map((s) => s.status)).toEqual(['processing', 'processing', 'succeeded'])
  })

  it('uses the default interval when the service gives no pollInMs', async () => {
    const getStatus = vi.fn(async () => succeeded)
    const done = pollUntilFinal({
      getStatus,
      firstDelayMs: null,
      signal: new AbortController().signal,
      onStatus: () => undefined,
      options: { intervalMs: 300, jitter: 0, waitSeconds: 0 },
    })
    await vi.advanceTimersByTimeAsync(299)
    expect(getStatus).not.toHaveBeenCalled()
    await vi.advanceTimersByTimeAsync(1)
    await expect(done).resolves.toEqual(succeeded)
  })

  it('ends with poll_timeout at the deadline', async () => {
    const getStatus = vi.fn(async () => processing)
    const done = pollUntilFinal({
      getStatus,
      firstDelayMs: 1000,
      signal: new AbortController().signal,
      onStatus: () => undefined,
      options: { deadlineMs: 3500, jitter: 0, waitSeconds: 0 },
    })
    const outcome = expect(done).rejects.toThrowError(
      expect.objectContaining({
        code: 'poll_timeout',
        context: { deadlineMs: 3500, lastStatus: 'processing' },
      }),
    )
    await vi.advanceTimersByTimeAsync(4000)
    await outcome
    // Reads at 1000, 2000, 3000 and a last one at the deadline (3500).
    expect(getStatus).toHaveBeenCalledTimes(4)
  })

  it('keeps polling through transient read failures, but not through others', async () => {
    const answers: Array<StatusResponse | PayError> = [
      new PayError({ code: 'network_error', message: 'down' }),
      new PayError({ code: 'rate_limited', message: 'slow down' }),
      succeeded,
    ]
    const getStatus = async () => {
      const next = answers.shift()!
      if (next instanceof PayError) throw next
      return next
    }
    const options = { jitter: 0, intervalMs: 100, waitSeconds: 0 }
    const signal = new AbortController().signal
    const done = pollUntilFinal({ getStatus, firstDelayMs: 100, signal, onStatus: () => undefined, options })
    // Reads at 250, 500 and 750: never sooner than 250 ms after the previous one began.
    await vi.advanceTimersByTimeAsync(750)
    await expect(done).resolves.toEqual(succeeded)

    const fatal = pollUntilFinal({
      getStatus: async () => {
        throw new PayError({ code: 'payment_not_found', message: 'gone' })
      },
      firstDelayMs: 0,
      signal,
      onStatus: () => undefined,
      options,
    })
    const check = expect(fatal).rejects.toThrowError(expect.objectContaining({ code: 'payment_not_found' }))
    await vi.advanceTimersByTimeAsync(250)
    await check
  })

  it('stops at once on abort, mid-wait', async () => {
    const controller = new AbortController()
    const getStatus = vi.fn(async () => processing)
    const done = pollUntilFinal({
      getStatus,
      firstDelayMs: 60_000,
      signal: controller.signal,
      onStatus: () => undefined,
      options: { waitSeconds: 0 },
    })
    const check = expect(done).rejects.toThrowError(expect.objectContaining({ code: 'aborted' }))
    await vi.advanceTimersByTimeAsync(10)
    controller.abort()
    await check
    expect(getStatus).not.toHaveBeenCalled()
  })

  it('takes an injected sleep and clock (no timers at all)', async () => {
    const service = scripted([processing, succeeded])
    const result = await service.poll({ random: () => 0, waitSeconds: 0 }, 250)
    expect(result).toEqual(succeeded)
    expect(service.sleeps).toEqual([250, 1000])
  })

  describe('with reads held by the service (Prefer: wait)', () => {
    it('reads at once, asks for the wait, and follows a held answer (pollInMs 0) with the next read', async () => {
      // The service holds each read 5 s (the clock moves while it does), then answers pollInMs 0.
      const held = { status: 'processing', isFinal: false, pollInMs: 0 } as const
      const service = scripted([held, held, succeeded], { holdMs: 5000 })
      const result = await service.poll({ random: () => 0.5, waitSeconds: 15 }, 1000)
      expect(result).toEqual(succeeded)
      // 250 ms after the confirm's answer, then each read right after the held one before it.
      expect(service.sleeps).toEqual([250])
      expect(service.reads.map((r) => r.waitSeconds)).toEqual([15, 15, 15])
    })

    it('never reads more often than every 250 ms, whatever a service answers at once', async () => {
      const atOnce = { status: 'processing', isFinal: false, pollInMs: 0 } as const
      const service = scripted([atOnce, atOnce, atOnce, atOnce, succeeded])
      expect(await service.poll()).toEqual(succeeded)
      expect(service.reads.map((r) => r.at)).toEqual([250, 500, 750, 1000, 1250])
    })

    it('reads plainly after a held read failed on the way (a proxy cutting it, a CORS preflight refusing Prefer)', async () => {
      const service = scripted([
        new PayError({ code: 'network_error', message: 'cut' }),
        processing,
        succeeded,
      ])
      expect(await service.poll()).toEqual(succeeded)
      expect(service.reads.map((r) => r.waitSeconds)).toEqual([20, 0, 0])
    })

    it('asks for no longer than the deadline leaves, and polls as before when the service does not hold', async () => {
      const service = scripted([], { afterwards: processing })
      const done = service.poll({ random: () => 0, deadlineMs: 2500, waitSeconds: 20 })
      await expect(done).rejects.toThrowError(expect.objectContaining({ code: 'poll_timeout' }))
      // 250 ms after the start, then every pollInMs (1000): this service answered without holding.
      expect(service.reads.map((r) => r.at)).toEqual([250, 1250, 2250, 2500])
      // What the deadline left before each read's gap, rounded up.
      expect(service.reads.map((r) => r.waitSeconds)).toEqual([3, 3, 2, 1])
    })
  })
})

/**
 * A service on an injected clock (no timers): answers `answers` in order (a PayError is thrown), then
 * `afterwards`; each read is held `holdMs`. Records every read (its time and the wait it asked for) and sleep.
 */
function scripted(
  answers: Array<StatusResponse | PayError>,
  options: { holdMs?: number; afterwards?: StatusResponse } = {},
) {
  let now = 0
  const reads: { at: number; waitSeconds: number }[] = []
  const sleeps: number[] = []
  return {
    reads,
    sleeps,
    poll(pollOptions: PollOptions = {}, firstDelayMs: number | null = null) {
      return pollUntilFinal({
        getStatus: async (_signal, waitSeconds) => {
          reads.push({ at: now, waitSeconds })
          now += options.holdMs ?? 0
          const next = answers.shift() ?? options.afterwards ?? succeeded
          if (next instanceof PayError) throw next
          return next
        },
        firstDelayMs,
        signal: new AbortController().signal,
        onStatus: () => undefined,
        options: {
          now: () => now,
          sleep: async (ms) => {
            sleeps.push(ms)
            now += ms
          },
          ...pollOptions,
        },
      })
    },
  }
}
