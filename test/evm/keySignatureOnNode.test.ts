import { concat, type Hex, keccak256, numberToHex, pad, slice, toHex } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createEvmChain, type EvmChain } from '../../src/server/chains/evm/chain.js'
import { verifyKeySignature, verifyKeySignatureOnNode } from '../../src/server/chains/evm/payerSignature.js'
import type { ChainConfig } from '../../src/server/config.js'
import { type AnvilInstance, anvilPrivateKeys, startAnvil } from '../anvil.js'

/**
 * A key's signature at confirm, recovered by the node's ecrecover precompile (the FastPath) or here in
 * JavaScript (the plain path): the same verdict, reason included, for every form a wallet or an attacker
 * can send.
 */
const silent = { info() {}, warn() {}, error() {} }
const n = 0xfffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141n

let anvil: AnvilInstance
let chain: EvmChain
beforeAll(async () => {
  anvil = await startAnvil()
  chain = createEvmChain({
    caip2: anvil.caip2,
    chain: { rpcUrl: anvil.rpcUrl, signerKey: anvilPrivateKeys[0], assets: {} } as ChainConfig,
    assets: [],
    log: silent,
  })
})
afterAll(() => anvil?.stop())

describe('a key signature verified on the node', () => {
  it('gives the verdicts of the local recovery', async () => {
    const payer = privateKeyToAccount(generatePrivateKey())
    const other = privateKeyToAccount(generatePrivateKey())
    const hash = keccak256(toHex('an authorization'))
    const good = await payer.sign({ hash })
    const r = slice(good, 0, 32)
    const s = BigInt(slice(good, 32, 64))
    const v = Number.parseInt(good.slice(130), 16)
    const withV = (value: number) => concat([r, pad(numberToHex(s), { size: 32 }), toHex(value, { size: 1 })])
    const cases: Record<string, Hex> = {
      valid: good,
      'v as 0/1': withV(v - 27),
      'another key': await other.sign({ hash }),
      'v of 29': withV(29),
      'high s, v flipped': concat([
        r,
        pad(numberToHex(n - s), { size: 32 }),
        toHex(v === 27 ? 28 : 27, { size: 1 }),
      ]),
      's of 0': concat([r, pad('0x00', { size: 32 }), toHex(v, { size: 1 })]),
      'r of 0': concat([pad('0x00', { size: 32 }), pad(numberToHex(s), { size: 32 }), toHex(v, { size: 1 })]),
      'r past n': concat([
        numberToHex(n + 1n, { size: 32 }),
        pad(numberToHex(s), { size: 32 }),
        toHex(v, { size: 1 }),
      ]),
      'r off the curve': concat([
        pad('0x05', { size: 32 }),
        pad(numberToHex(s), { size: 32 }),
        toHex(v, { size: 1 }),
      ]),
      '64 bytes': slice(good, 0, 64),
      'another message': await payer.sign({ hash: keccak256(toHex('another')) }),
    }
    for (const [name, signature] of Object.entries(cases)) {
      const local = await verifyKeySignature(payer.address, hash, signature)
      const onNode = await verifyKeySignatureOnNode(chain, payer.address, hash, signature)
      expect([name, onNode]).toEqual([name, local])
    }
    expect(await verifyKeySignatureOnNode(chain, payer.address, hash, good)).toEqual({ valid: true })
    expect(await verifyKeySignatureOnNode(chain, payer.address, hash, cases['another key']!)).toEqual({
      valid: false,
      reason: `it was signed by ${other.address}`,
    })
  })
})
