import { describe, expect, it } from 'vitest'
import { startSweep } from './sweep.js'

const tick = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

describe('startSweep', () => {
  it('runs on its timer one sweep at a time, reports failures and goes on, and stops after the one in progress', async () => {
    let runs = 0
    let active = 0
    let most = 0
    const errors: unknown[] = []
    let release: (() => void) | undefined
    const sweep = startSweep({
      async run() {
        runs += 1
        active += 1
        most = Math.max(most, active)
        try {
          if (runs === 2) throw new Error('second fails')
          if (runs === 3) await new Promise<void>((resolve) => (release = resolve))
          return runs
        } finally {
          active -= 1
        }
      },
      intervalMs: 5,
      onError: (error) => errors.push(error),
    })
    expect(await sweep.sweep()).toBe(1)
    await expect.poll(() => runs).toBe(3)
    // The third sweep hangs: ticks (and a sweep asked for now) join it rather than start another.
    const joined = sweep.sweep()
    await tick(30)
    expect([runs, most]).toEqual([3, 1])
    expect(errors.map(String)).toEqual(['Error: second fails'])
    const stopped = sweep.stop()
    let done = false
    void stopped.then(() => (done = true))
    await tick(10)
    expect(done).toBe(false)
    release!()
    await stopped
    expect(await joined).toBe(3)
    await tick(30)
    expect(runs).toBe(3)
  })
})
