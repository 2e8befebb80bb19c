import { describe, expect, it } from 'vitest'
import { isPayError } from '../errors/PayError.js'
import { decodeBase58, isBase58PublicKey } from './base58.js'
import {
  isAccountId,
  isAssetId,
  isChainId,
  namespaceOf,
  parseAccountId,
  parseAssetId,
  parseChainId,
  sameCaip,
} from './caip.js'

const evm = '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'
const sol = 'EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'

describe('CAIP-2', () => {
  it.each([
    'eip155:1',
    'eip155:8453',
    'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp',
    'cosmos:cosmoshub-4',
    'abc:x',
    `abcdefgh:${'a'.repeat(32)}`,
  ])('accepts %s', (id) => {
    expect(isChainId(id)).toBe(true)
    expect(parseChainId(id).namespace).toBe(id.split(':')[0])
  })
  it.each([
    '',
    'eip155',
    'ab:1',
    'abcdefghi:1',
    `eip155:${'a'.repeat(33)}`,
    'EIP155:1',
    'eip155:1:2',
    'eip155:',
    'eip 155:1',
    'eip155:1/x',
  ])('rejects %j', (id) => {
    expect(isChainId(id)).toBe(false)
    expect(() => parseChainId(id)).toThrowError(/CAIP-2/)
  })
})

describe('CAIP-10', () => {
  it('parses EVM accounts in any case', () => {
    for (const address of [evm, evm.toLowerCase(), `0x${evm.slice(2).toUpperCase()}`]) {
      expect(parseAccountId(`eip155:1:${address}`)).toEqual({
        chainId: 'eip155:1',
        namespace: 'eip155',
        reference: '1',
        address,
      })
    }
  })
  it('parses Solana accounts', () => {
    expect(parseAccountId(`solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:${sol}`).address).toBe(sol)
  })
  it.each([
    'eip155:1:0x123',
    `eip155:1:${evm}00`,
    `eip155:1:${evm.replace('A', 'G')}`,
    'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:0OIl',
    `solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:${sol}x`,
    'eip155:1',
    `eip155:1:${'a'.repeat(129)}`,
    `eip155::${evm}`,
  ])('rejects %s', (id) => {
    expect(isAccountId(id)).toBe(false)
    try {
      parseAccountId(id)
      expect.unreachable()
    } catch (error) {
      expect(isPayError(error, 'invalid_caip')).toBe(true)
    }
  })
  it('accepts other namespaces by form only, up to 128 address characters', () => {
    expect(isAccountId(`cosmos:cosmoshub-4:${'a'.repeat(128)}`)).toBe(true)
  })
})

describe('CAIP-19', () => {
  it('parses tokens with and without token id', () => {
    expect(parseAssetId(`eip155:1/erc20:${evm}`)).toMatchObject({
      chainId: 'eip155:1',
      assetNamespace: 'erc20',
      assetReference: evm,
      tokenId: undefined,
    })
    expect(parseAssetId('eip155:1/erc721:0x06012c8cf97BEaD5deAe237070F9587f8E7A266d/771769')).toMatchObject({
      tokenId: '771769',
    })
    expect(parseAssetId(`solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:${sol}`).assetNamespace).toBe('token')
    expect(parseAssetId('eip155:1/slip44:60').assetReference).toBe('60')
  })
  it.each(['eip155:1', 'eip155:1/erc20', 'eip155:1/e:0x1', 'eip155:1//erc20:0x', `eip155:1/erc20:${evm}/`])(
    'rejects %s',
    (id) => {
      expect(isAssetId(id)).toBe(false)
    },
  )
})

describe('helpers', () => {
  it('namespace is the text before the first colon', () => {
    expect(namespaceOf('solana:abc:def')).toBe('solana')
    expect(namespaceOf('nocolon')).toBe('')
  })
  it('compares EVM ids case-insensitively, others exactly', () => {
    expect(sameCaip(`eip155:1:${evm}`, `eip155:1:${evm.toLowerCase()}`)).toBe(true)
    expect(sameCaip(`solana:x:${sol}`, `solana:x:${sol.toLowerCase()}`)).toBe(false)
  })
  it('decodes base58 32-byte keys', () => {
    expect(decodeBase58(sol)?.length).toBe(32)
    expect(isBase58PublicKey('11111111111111111111111111111111')).toBe(true)
    expect(isBase58PublicKey('1111111111111111111111111111111')).toBe(false)
    expect(decodeBase58('0')).toBeUndefined()
  })
})
