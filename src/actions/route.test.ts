import { describe, expect, it } from 'vitest'
import type { WalletRpcAction } from '../contract/gateway.js'
import { evmSigner, rpc, solanaSigner, solChain, testSigner } from '../flow/testkit.js'
import { createSignerRegistry } from './registry.js'
import { parseActionParams, routeAction, routeActions } from './route.js'

const registry = createSignerRegistry([evmSigner(), solanaSigner()])

describe('parseActionParams', () => {
  it('parses the JSON array carried as a string', () => {
    expect(parseActionParams('["0xabc", {"a": 1}]')).toEqual(['0xabc', { a: 1 }])
  })

  it.each([
    ['malformed JSON', '[1,'],
    ['an object', '{"transaction":"AA=="}'],
    ['a string', '"x"'],
    ['null', 'null'],
  ])('rejects %s as invalid_action', (_, params) => {
    expect(() => parseActionParams(params, 2)).toThrowError(
      expect.objectContaining({ code: 'invalid_action', context: { index: 2 } }),
    )
  })
})

describe('routeAction', () => {
  it('routes by the text before the first colon of the chain id', () => {
    const evm = routeAction(registry, rpc('eip155:8453', 'personal_sign', ['0x00', '0x11']), 0)
    expect(evm.signer.namespace).toBe('eip155')
    expect(evm.request).toEqual({ chainId: 'eip155:8453', method: 'personal_sign', params: ['0x00', '0x11'] })
    const sol = routeAction(registry, rpc(solChain, 'solana_signTransaction', [{ transaction: 'AA==' }]), 1)
    expect(sol.signer.namespace).toBe('solana')
    expect(sol.index).toBe(1)
  })

  it('routes a namespace of a registered third signer without any code naming it', () => {
    const cosmos = testSigner({ namespace: 'cosmos', accounts: [], methods: ['cosmos_signDirect'] })
    const routed = routeAction(
      createSignerRegistry([cosmos]),
      rpc('cosmos:cosmoshub-4', 'cosmos_signDirect'),
      0,
    )
    expect(routed.signer).toBe(cosmos)
  })

  const raw = (chainId: string, method: string, params: string): WalletRpcAction => ({
    type: 'walletRpc',
    walletRpc: { chainId, method, params },
  })
  const evmOnly = createSignerRegistry([evmSigner()])

  it.each([
    ['unsupported_namespace', raw('cosmos:cosmoshub-4', 'cosmos_signDirect', '[]'), registry],
    ['missing_signer', raw(solChain, 'solana_signTransaction', '[]'), evmOnly],
    ['unsupported_method', raw('eip155:1', 'eth_sign', '[]'), registry],
    ['unsupported_method', raw(solChain, 'solana_signAndSendTransaction', '[]'), registry],
    ['invalid_action', raw('eip155:1', 'personal_sign', 'not json'), registry],
    ['invalid_action', raw('nocolon', 'personal_sign', '[]'), registry],
  ] as const)('throws %s', (code, action, reg) => {
    expect(() => routeAction(reg, action, 3)).toThrowError(
      expect.objectContaining({ code, context: expect.objectContaining({ index: 3 }) }),
    )
  })

  it('routes a whole list up front, failing on the first unroutable action', () => {
    const actions = [rpc('eip155:8453', 'personal_sign'), rpc('bip122:000000000019d6689c085ae165831e93', 'x')]
    expect(() => routeActions(registry, actions)).toThrowError(
      expect.objectContaining({
        code: 'unsupported_namespace',
        context: expect.objectContaining({ index: 1 }),
      }),
    )
  })
})
