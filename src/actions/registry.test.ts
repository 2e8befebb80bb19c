import { describe, expect, it } from 'vitest'
import { isPayError } from '../errors/PayError.js'
import { evmAccount, evmSigner, solAccount, solanaSigner, testSigner } from '../flow/testkit.js'
import { createSignerRegistry } from './registry.js'
import type { Signer } from './types.js'

describe('createSignerRegistry', () => {
  it('keys signers by namespace', () => {
    const evm = evmSigner()
    const sol = solanaSigner()
    const registry = createSignerRegistry([evm, sol])
    expect(registry.get('eip155')).toBe(evm)
    expect(registry.get('solana')).toBe(sol)
    expect(registry.get('cosmos')).toBeUndefined()
    expect(registry.namespaces).toEqual(['eip155', 'solana'])
  })

  it('refuses two signers for one namespace', () => {
    expect(() => createSignerRegistry([evmSigner(), evmSigner()])).toThrowError(
      expect.objectContaining({ code: 'invalid_signer', context: { namespace: 'eip155' } }),
    )
  })

  it('refuses objects that are not signers', () => {
    const noNamespace = { ...evmSigner(), namespace: '' }
    const noRequest = { namespace: 'eip155', accounts: () => [], methods: [] } as unknown as Signer
    for (const bad of [noNamespace, noRequest]) {
      try {
        createSignerRegistry([bad])
        expect.unreachable()
      } catch (error) {
        expect(isPayError(error, 'invalid_signer')).toBe(true)
      }
    }
  })

  it('advertises only valid accounts of registered signers, in their own namespace', () => {
    const evm = testSigner({
      namespace: 'eip155',
      accounts: [evmAccount, evmAccount, solAccount, 'eip155:1:not-an-address'],
    })
    expect(createSignerRegistry([evm]).accounts()).toEqual([evmAccount])
    expect(createSignerRegistry([evm, solanaSigner()]).accounts()).toEqual([evmAccount, solAccount])
  })

  it('advertises nothing without signers (a wallet without keys still loads options)', () => {
    expect(createSignerRegistry([]).accounts()).toEqual([])
  })
})
