import { Keypair } from '@solana/web3.js'
import { describe, expect, it } from 'vitest'
import { chargeVerdict, type Delegation } from './mandates.js'

const mint = Keypair.generate().publicKey
const service = Keypair.generate().publicKey
const price = 1_000_000n
const expected = { mint, delegate: service, amount: price }
const granted: Delegation = {
  exists: true,
  mint: mint.toBase58(),
  delegate: service.toBase58(),
  delegatedAmount: price * 12n,
  balance: price * 3n,
  frozen: false,
}

describe('chargeVerdict: what the buyer token account says of the next charge', () => {
  it('goes when the service is the delegate of at least the price and the balance covers it', () => {
    expect(chargeVerdict(granted, expected)).toBe('ready')
    expect(chargeVerdict({ ...granted, delegatedAmount: price, balance: price }, expected)).toBe('ready')
  })

  it.each<[string, Partial<Delegation>]>([
    ['the account closed', { exists: false }],
    ['another delegate (a new approval)', { delegate: Keypair.generate().publicKey.toBase58() }],
    ['no delegate (Revoke)', { delegate: null, delegatedAmount: 0n }],
    ['a delegation below the price', { delegatedAmount: price - 1n }],
    ['another mint', { mint: Keypair.generate().publicKey.toBase58() }],
  ])('%s: revoked, whatever the balance', (_name, change) => {
    expect(chargeVerdict({ ...granted, ...change }, expected)).toBe('revoked')
  })

  it('a balance below the price or a frozen account: insufficient (dunning), the mandate intact', () => {
    expect(chargeVerdict({ ...granted, balance: price - 1n }, expected)).toBe('insufficient')
    expect(chargeVerdict({ ...granted, frozen: true }, expected)).toBe('insufficient')
  })
})
