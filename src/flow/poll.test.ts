import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import type { StatusResponse } from '../contract/payment.js'
import { PayError } from '../errors/PayError.js'
import { pollUntilFinal } from './poll.js'

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
    let now = 0
    const sleeps: number[] = []
    const answers = [processing, succeeded]
    const result = await pollUntilFinal({
      getStatus: async () => answers.shift()!,
      firstDelayMs: 250,
      signal: new AbortController().signal,
      onStatus: () => undefined,
      options: {
        now: () => now,
        sleep: async (ms) => {
          sleeps.push(ms)
          now += ms
        },
        random: () => 0,
        waitSeconds: 0,
      },
    })
    expect(result).toEqual(succeeded)
    expect(sleeps).toEqual([250, 1000])
  })

  describe('with reads held by the service (Prefer: wait)', () => {
    it('reads at once, asks for the wait, and follows a held answer (pollInMs 0) with the next read', async () => {
      let now = 0
      const sleeps: number[] = []
      const asked: number[] = []
      // The service holds each read 5 s (the clock moves while it does), then answers pollInMs 0.
      const answers = [
        { status: 'processing', isFinal: false, pollInMs: 0 },
        { status: 'processing', isFinal: false, pollInMs: 0 },
        succeeded,
      ] as StatusResponse[]
      const result = await pollUntilFinal({
        getStatus: async (_signal, waitSeconds) => {
          asked.push(waitSeconds)
          now += 5000
          return answers.shift()!
        },
        firstDelayMs: 1000,
        signal: new AbortController().signal,
        onStatus: () => undefined,
        options: {
          now: () => now,
          sleep: async (ms) => {
            sleeps.push(ms)
            now += ms
          },
          random: () => 0.5,
          waitSeconds: 15,
        },
      })
      expect(result).toEqual(succeeded)
      // minGapMs after the confirm's answer, then each read right after the held one before it.
      expect(sleeps).toEqual([250])
      expect(asked).toEqual([15, 15, 15])
    })

    it('never reads more often than minGapMs, whatever a service answers at once', async () => {
      let now = 0
      const reads: number[] = []
      const answers = Array.from({ length: 4 }, () => ({ status: 'processing', isFinal: false, pollInMs: 0 }))
      const result = await pollUntilFinal({
        getStatus: async () => {
          reads.push(now)
          return (answers.shift() ?? succeeded) as StatusResponse
        },
        firstDelayMs: null,
        signal: new AbortController().signal,
        onStatus: () => undefined,
        options: {
          now: () => now,
          sleep: async (ms) => {
            now += ms
          },
        },
      })
      expect(result).toEqual(succeeded)
      expect(reads).toEqual([250, 500, 750, 1000, 1250])
    })

    it('reads plainly after a held read failed on the way (a proxy cutting it, a CORS preflight refusing Prefer)', async () => {
      let now = 0
      const asked: number[] = []
      const answers: Array<StatusResponse | PayError> = [
        new PayError({ code: 'network_error', message: 'cut' }),
        processing,
        succeeded,
      ]
      const result = await pollUntilFinal({
        getStatus: async (_signal, waitSeconds) => {
          asked.push(waitSeconds)
          const next = answers.shift()!
          if (next instanceof PayError) throw next
          return next
        },
        firstDelayMs: null,
        signal: new AbortController().signal,
        onStatus: () => undefined,
        options: {
          now: () => now,
          sleep: async (ms) => {
            now += ms
          },
        },
      })
      expect(result).toEqual(succeeded)
      expect(asked).toEqual([20, 0, 0])
    })

    it('asks for no longer than the deadline leaves, and polls as before when the service does not hold', async () => {
      let now = 0
      const asked: number[] = []
      const reads: number[] = []
      const done = pollUntilFinal({
        getStatus: async (_signal, waitSeconds) => {
          asked.push(waitSeconds)
          reads.push(now)
          return processing
        },
        firstDelayMs: null,
        signal: new AbortController().signal,
        onStatus: () => undefined,
        options: {
          now: () => now,
          sleep: async (ms) => {
            now += ms
          },
          random: () => 0,
          deadlineMs: 2500,
          waitSeconds: 20,
        },
      })
      await expect(done).rejects.toThrowError(expect.objectContaining({ code: 'poll_timeout' }))
      // minGapMs after the start, then every pollInMs (1000): this service answered without holding.
      expect(reads).toEqual([250, 1250, 2250, 2500])
      // What the deadline left before each read's gap, rounded up.
      expect(asked).toEqual([3, 3, 2, 1])
    })
  })
})
