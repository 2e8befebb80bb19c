import { createHash, randomBytes } from 'node:crypto'
import { getAssociatedTokenAddressSync, TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID } from '@solana/spl-token'
import { Keypair, PublicKey } from '@solana/web3.js'
import { describe, expect, it } from 'vitest'
import { seededRandom } from '../../test/differential/random.js'
import { associatedTokenAddress, isOnCurve, sha256 } from './address.js'

// The guard derives associated token accounts without web3.js (a kit-only wallet has none): the same
// answers as web3.js and spl-token, which the server and the chain use.
describe('Solana addresses without web3.js', () => {
  it('sha256 is Node’s for every length around the block boundaries', () => {
    for (const length of [0, 1, 55, 56, 63, 64, 65, 119, 120, 128, 1000]) {
      const input = randomBytes(length)
      expect(Buffer.from(sha256(input)).toString('hex')).toBe(
        createHash('sha256').update(input).digest('hex'),
      )
    }
  })

  it('isOnCurve agrees with web3.js on keys, hashes and edge encodings', () => {
    const random = seededRandom(43)
    const samples = [
      ...Array.from({ length: 40 }, () => Keypair.generate().publicKey.toBytes()),
      ...Array.from({ length: 200 }, () => Uint8Array.from({ length: 32 }, () => random.int(256))),
      new Uint8Array(32),
      Uint8Array.from({ length: 32 }, (_, i) => (i === 31 ? 0x80 : i === 0 ? 1 : 0)),
      Uint8Array.from({ length: 32 }, (_, i) => (i === 31 ? 0x7f : 0xff)),
      Uint8Array.from({ length: 32 }, (_, i) => (i === 0 ? 0xec : i === 31 ? 0x7f : 0xff)),
    ]
    let onCurve = 0
    for (const bytes of samples) {
      expect(isOnCurve(bytes), Buffer.from(bytes).toString('hex')).toBe(PublicKey.isOnCurve(bytes))
      if (isOnCurve(bytes)) onCurve++
    }
    expect(onCurve).toBeGreaterThan(40)
    expect(onCurve).toBeLessThan(samples.length)
  })

  it('associatedTokenAddress is spl-token’s under both token programs', () => {
    for (let i = 0; i < 30; i++) {
      const owner = Keypair.generate().publicKey
      const mint = Keypair.generate().publicKey
      for (const program of [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID])
        expect(associatedTokenAddress(owner.toBase58(), mint.toBase58(), program.toBase58())).toBe(
          getAssociatedTokenAddressSync(mint, owner, true, program).toBase58(),
        )
    }
  })
})
