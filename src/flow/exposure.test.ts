import { describe, expect, it } from 'vitest'
import { PayError } from '../errors/PayError.js'
import { attest, code, coversTransitions, processing, ready, setup } from './flowHarness.js'
import { evmAddress, option, rpc, solChain } from './testkit.js'

describe('rebuilds after quote_expired', () => {
  it('builds and signs again when the quote expired before confirm, then confirms the new results', async () => {
    let confirms = 0
    let builds = 0
    const { flow, gateway, states } = setup({
      gateway: {
        fetchActions: async () => {
          builds += 1
          return {
            actions: [attest, rpc(solChain, 'solana_signTransaction', [{ transaction: `AQI${builds}` }])],
          }
        },
        confirm: async () => {
          confirms += 1
          if (confirms === 1)
            throw new PayError({ code: 'quote_expired', message: 'Blockhash expired.', status: 422 })
          return processing
        },
      },
    })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(gateway.callsTo('fetchActions')).toHaveLength(2)
    const [first, second] = gateway.callsTo('confirm')
    expect(first![1]).not.toEqual(second![1])
    // A different body needs a different idempotency key, or the service would refuse it as a conflict.
    expect((first![2] as { idempotencyKey: string }).idempotencyKey).not.toBe(
      (second![2] as { idempotencyKey: string }).idempotencyKey,
    )
    expect(states()).toContain('fetchingActions')
  })

  it('does not rebuild an option whose wallet already broadcast, nor loop forever', async () => {
    const expired = async () => {
      throw new PayError({ code: 'quote_expired', message: 'Quote expired.', status: 422 })
    }
    const { flow, gateway } = setup({ gateway: { confirm: expired } })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).rejects.toThrowError(code('quote_expired'))
    expect(gateway.callsTo('fetchActions')).toHaveLength(3)
    const sent = option({
      id: 'opt_send',
      actions: [
        rpc('eip155:8453', 'eth_sendTransaction', [{ from: evmAddress, to: evmAddress, value: '0x0' }]),
      ],
    })
    const other = setup({ options: [sent], gateway: { confirm: expired } })
    await ready(other.flow, 'opt_send')
    await expect(other.flow.execute()).rejects.toThrowError(code('quote_expired'))
    expect(other.gateway.callsTo('confirm')).toHaveLength(1)
  })
})

coversTransitions('exposure')
