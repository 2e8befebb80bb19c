import { type Hex, keccak256, recoverAddress, toHex } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { describe, expect, it } from 'vitest'
import { seededRandom } from '../../../../test/differential/random.js'
import { recoverSigner } from './recovery.js'

const outcome = (p: Promise<string>) =>
  p.then(
    (address) => ({ address }),
    (error: Error) => ({ error: error.message.split('\n')[0] }),
  )

describe('recoverSigner (off the event loop)', () => {
  it('answers as viem’s recoverAddress for valid, tampered and malformed signatures alike', async () => {
    const random = seededRandom(29)
    const byte = () => random.int(256)
    const account = privateKeyToAccount(generatePrivateKey())
    const cases: { hash: Hex; signature: Hex }[] = []
    for (let i = 0; i < 120; i++) {
      const hash = keccak256(toHex(i))
      const signature = await account.sign({ hash })
      const bytes = Buffer.from(signature.slice(2), 'hex')
      const kind = i % 4
      // 0: as signed; 1: one byte of r or s flipped; 2: v replaced by any byte; 3: random bytes.
      if (kind === 1) bytes[random.int(64)]! ^= 1 + random.int(255)
      if (kind === 2) bytes[64] = byte()
      if (kind === 3) for (let j = 0; j < 65; j++) bytes[j] = byte()
      cases.push({ hash, signature: `0x${bytes.toString('hex')}` })
    }
    const offThread = await Promise.all(cases.map((c) => outcome(recoverSigner(c.hash, c.signature))))
    const inline = await Promise.all(cases.map((c) => outcome(recoverAddress(c))))
    expect(offThread).toEqual(inline)
    expect(
      offThread.filter((o, i) => i % 4 === 0 && 'address' in o && o.address === account.address),
    ).toHaveLength(30)
    expect(offThread.some((o) => 'error' in o)).toBe(true)
  })
})
