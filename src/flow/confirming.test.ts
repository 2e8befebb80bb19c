import { describe, expect, it } from 'vitest'
import { PayError } from '../errors/PayError.js'
import { code, coversTransitions, paymentId, ready, setup } from './flowHarness.js'
import { statusSequence } from './testkit.js'

describe('confirm and poll', () => {
  it('ends at once when confirm is already final, reading the txId from status', async () => {
    const { flow, states } = setup({
      gateway: {
        confirm: async () => ({ status: 'succeeded', isFinal: true, pollInMs: null }),
        getStatus: statusSequence('succeeded'),
      },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded', txId: 'test:pay_abc' })
    expect(states().slice(-2)).toEqual(['confirming', 'succeeded'])
  })

  it.each(['failed', 'expired', 'cancelled'] as const)(
    'resolves with a %s payment reported by polling',
    async (status) => {
      const { flow, of } = setup({ gateway: { getStatus: statusSequence('processing', status) } })
      await ready(flow, 'opt_evm')
      await expect(flow.execute()).resolves.toEqual({ paymentId, status })
      expect(flow.state).toBe(status)
      expect(of('final')).toEqual([{ paymentId, status }])
    },
  )

  it('resolves with a failed payment reported by confirm', async () => {
    const { flow } = setup({
      gateway: { confirm: async () => ({ status: 'failed', isFinal: true, pollInMs: null }) },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toEqual({ paymentId, status: 'failed' })
  })

  it('carries on from the actual status when confirm says the payment already moved (invalid_state)', async () => {
    const conflict = new PayError({ code: 'invalid_state', message: 'not requires_action', status: 409 })
    const { flow } = setup({
      gateway: {
        confirm: () => Promise.reject(conflict),
        getStatus: statusSequence('processing', 'succeeded'),
      },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it('fails on invalid_state when the payment still awaits action', async () => {
    const conflict = new PayError({ code: 'invalid_state', message: 'x', status: 409 })
    const { flow } = setup({
      gateway: { confirm: () => Promise.reject(conflict), getStatus: statusSequence('requires_action') },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).rejects.toBe(conflict)
    expect(flow.state).toBe('failed')
  })

  it('fails when confirm is refused, and ends expired when the payment expired meanwhile', async () => {
    const refused = new PayError({ code: 'params_validation', message: 'bad', status: 400 })
    const a = setup({ gateway: { confirm: () => Promise.reject(refused) } })
    await ready(a.flow, 'opt_evm')
    await expect(a.flow.execute()).rejects.toBe(refused)
    expect(a.states().slice(-2)).toEqual(['confirming', 'failed'])

    const expired = new PayError({ code: 'payment_expired', message: 'late', status: 410 })
    const b = setup({ gateway: { confirm: () => Promise.reject(expired) } })
    await ready(b.flow, 'opt_evm')
    await expect(b.flow.execute()).resolves.toEqual({ paymentId, status: 'expired' })
    expect(b.states().slice(-2)).toEqual(['confirming', 'expired'])
  })

  it('fails on poll_timeout at the deadline (injected clock)', async () => {
    let now = 0
    const sleep = async (ms: number) => {
      now += ms
    }
    // Plain polling (no held reads), as against a service without `Prefer: wait`.
    const poll = { now: () => now, sleep, deadlineMs: 95, jitter: 0, waitSeconds: 0 }
    const { flow, of, states } = setup({
      gateway: { getStatus: statusSequence('processing') },
      flow: { poll },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).rejects.toThrowError(code('poll_timeout', { deadlineMs: 95 }))
    expect(states().slice(-2)).toEqual(['polling', 'failed'])
    // confirm's status, then one read at the deadline (95): the first read waits at least 250 ms
    expect(of('status')).toHaveLength(2)
  })
})

coversTransitions('confirming')
