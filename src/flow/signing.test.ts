import { describe, expect, it } from 'vitest'
import { PayError } from '../errors/PayError.js'
import { attest, code, coversTransitions, paymentId, ready, setup, solTx } from './flowHarness.js'
import { amount, evmAccount, evmSigner, option, rpc, solanaSigner, solChain, usdcBase } from './testkit.js'

describe('actions', () => {
  it('signs a mixed EVM + Solana option in order and confirms one result per resolved action', async () => {
    const { flow, gateway, evm, sol } = setup()
    await ready(flow, 'opt_mixed')
    await flow.execute()
    expect(gateway.callsTo('fetchActions')).toEqual([
      [paymentId, { optionId: 'opt_mixed', data: 'bld_1' }, { signal: expect.any(AbortSignal) }],
    ])
    expect(evm.requests.map((r) => [r.method, r.followedByMore])).toEqual([['personal_sign', true]])
    expect(sol.requests.map((r) => [r.method, r.params, r.followedByMore])).toEqual([
      ['solana_signTransaction', [{ transaction: 'AQID' }], false],
    ])
    expect(gateway.callsTo('confirm')[0]![1]).toEqual({
      optionId: 'opt_mixed',
      results: ['personal_sign#1', 'solana_signTransaction#1'],
    })
  })

  it('keeps results in action order when one build expands into several actions', async () => {
    const solTx2 = rpc(solChain, 'solana_signTransaction', [{ transaction: 'BAUG' }])
    const { flow, gateway } = setup({
      gateway: { fetchActions: async () => ({ actions: [attest, solTx, solTx2] }) },
    })
    await ready(flow, 'opt_mixed')
    await flow.execute()
    expect(gateway.callsTo('confirm')[0]![1]).toEqual({
      optionId: 'opt_mixed',
      results: ['personal_sign#1', 'solana_signTransaction#1', 'solana_signTransaction#2'],
    })
  })

  it.each([
    ['unsupported_namespace', rpc('cosmos:cosmoshub-4', 'cosmos_signDirect'), undefined],
    ['unsupported_method', rpc('eip155:8453', 'eth_sign'), undefined],
    ['missing_signer', solTx, 'evm-only'],
    [
      'invalid_action',
      { type: 'walletRpc' as const, walletRpc: { ...attest.walletRpc, params: '{"a":1}' } },
      undefined,
    ],
  ] as const)('fails with %s before signing anything and never confirms', async (errorCode, bad, signers) => {
    const evm = evmSigner()
    const opt = option({ id: 'opt_bad', actions: [attest, bad] })
    const { flow, gateway, of } = setup({
      options: [opt],
      ...(signers && { signers: [evm] }),
      ...(!signers && { signers: [evm, solanaSigner()] }),
    })
    await ready(flow, 'opt_bad')
    await expect(flow.execute()).rejects.toThrowError(code(errorCode, { index: 1 }))
    expect(flow.state).toBe('failed')
    expect(evm.requests).toEqual([])
    expect(gateway.callsTo('confirm')).toEqual([])
    expect(of('error').map((e) => e.code)).toEqual([errorCode])
  })

  it('fails with signer_failed when a signer throws or returns nothing', async () => {
    for (const answer of [
      () => {
        throw new Error('insufficient funds')
      },
      () => '',
    ]) {
      const { flow, gateway } = setup({ signers: [evmSigner({ answer })] })
      await ready(flow, 'opt_evm')
      await expect(flow.execute()).rejects.toThrowError(code('signer_failed', { index: 0 }))
      expect(gateway.callsTo('confirm')).toEqual([])
    }
  })

  it('fails (fetchingActions -> failed) when fetch fails, and ends expired on payment_expired', async () => {
    const broken = new PayError({ code: 'network_error', message: 'offline' })
    const a = setup({ gateway: { fetchActions: () => Promise.reject(broken) } })
    await ready(a.flow, 'opt_mixed')
    await expect(a.flow.execute()).rejects.toBe(broken)
    expect(a.states().slice(-2)).toEqual(['fetchingActions', 'failed'])

    const expired = new PayError({ code: 'payment_expired', message: 'late' })
    const b = setup({ gateway: { fetchActions: () => Promise.reject(expired) } })
    await ready(b.flow, 'opt_mixed')
    await expect(b.flow.execute()).resolves.toEqual({ paymentId, status: 'expired' })
    expect(b.states().slice(-2)).toEqual(['fetchingActions', 'expired'])
  })
})

// --- the signing guard ---------------------------------------------------------------------------------

describe('signing guard', () => {
  const usdc = `caip19/${usdcBase}`
  const transfer = (asset: string, value: bigint) => ({ asset, amount: value })

  it.each([
    ['wrong chain', rpc('eip155:1', 'eth_sendTransaction'), evmAccount, [transfer(usdcBase, 1n)]],
    [
      'wrong account',
      rpc('eip155:8453', 'eth_sendTransaction'),
      'eip155:8453:0x9999999999999999999999999999999999999999',
      [],
    ],
    [
      'wrong asset',
      rpc('eip155:8453', 'eth_sendTransaction'),
      evmAccount,
      [transfer('eip155:8453/erc20:0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb', 1n)],
    ],
    [
      'amount over the option amount',
      rpc('eip155:8453', 'eth_sendTransaction'),
      evmAccount,
      [transfer(usdcBase, 1_000_001n)],
    ],
  ] as const)(
    'rejects %s with action_rejected; nothing is signed or confirmed',
    async (_, action, account, transfers) => {
      const evm = evmSigner({ inspect: () => ({ account, transfers }) })
      // A harmless action first: the guard checks the whole option before the first signature.
      const opt = option({ id: 'opt_g', amount: amount(usdc, '1000000'), actions: [attest, action] })
      const { flow, gateway, states } = setup({ options: [opt], signers: [evm] })
      await ready(flow, 'opt_g')
      await expect(flow.execute()).rejects.toThrowError(code('action_rejected'))
      expect(evm.requests).toEqual([])
      expect(gateway.callsTo('confirm')).toEqual([])
      expect(states().slice(-2)).toEqual(['signing', 'failed'])
    },
  )

  it("accepts the option's own transfer (EVM hex in any case)", async () => {
    const evm = evmSigner({
      inspect: () => ({ account: evmAccount, transfers: [transfer(usdcBase.toLowerCase(), 1_000_000n)] }),
    })
    const { flow } = setup({ signers: [evm] })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it("guard: 'off' signs what it is given", async () => {
    const evm = evmSigner({
      inspect: () => ({ account: evmAccount, transfers: [transfer(usdcBase, 5_000_000n)] }),
    })
    const { flow } = setup({ signers: [evm], flow: { guard: 'off' } })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(evm.requests).toHaveLength(1)
  })
})

// --- data collection -----------------------------------------------------------------------------------

describe('user rejection', () => {
  it('an EIP-1193 4001 from the signer cancels the payment at the gateway and ends cancelled', async () => {
    const evm = evmSigner({
      answer: () => {
        throw Object.assign(new Error('User rejected the request.'), { code: 4001 })
      },
    })
    const { flow, gateway, of, states } = setup({ signers: [evm] })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(gateway.callsTo('cancel')).toEqual([
      [paymentId, { idempotencyKey: `caipay-${flow.flowId}-cancel` }],
    ])
    expect(gateway.callsTo('confirm')).toEqual([])
    expect(of('error')).toEqual([code('user_rejected', { index: 0 })])
    expect(states().slice(-2)).toEqual(['signing', 'cancelled'])
  })

  it('a PayError user_rejected on the Solana action of a mixed option does the same', async () => {
    const sol = solanaSigner({
      answer: () => Promise.reject(new PayError({ code: 'user_rejected', message: 'declined' })),
    })
    const evm = evmSigner()
    const { flow, gateway } = setup({ signers: [evm, sol] })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(evm.requests).toHaveLength(1)
    expect(gateway.callsTo('cancel')).toHaveLength(1)
    expect(gateway.callsTo('confirm')).toEqual([])
  })

  it('when the gateway refuses that cancel: ends cancelled locally, rejects, no final', async () => {
    const evm = evmSigner({ answer: () => Promise.reject({ code: 4001 }) })
    const { flow, errorCodes, of } = setup({
      signers: [evm],
      gateway: { cancel: () => Promise.reject(new PayError({ code: 'network_error', message: 'offline' })) },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).rejects.toThrowError(code('user_rejected'))
    expect(flow.state).toBe('cancelled')
    expect(errorCodes()).toEqual(['user_rejected', 'network_error'])
    expect(of('final')).toEqual([])
    expect(flow.result).toBeUndefined()
  })
})

coversTransitions('signing')
