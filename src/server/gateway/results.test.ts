import { Keypair, PublicKey, SystemProgram, Transaction } from '@solana/web3.js'
import { describe, expect, it } from 'vitest'
import type { WalletRpcAction } from '../../contract/gateway.js'
import { isPayError } from '../../errors/PayError.js'
import { checkResults } from './results.js'

const action = (method: string, chainId = 'eip155:1'): WalletRpcAction => ({
  type: 'walletRpc',
  walletRpc: { chainId, method, params: '[]' },
})
const sig = `0x${'1b'.repeat(65)}`
const hash = `0x${'ab'.repeat(32)}`

function signedTx(): string {
  const payer = Keypair.generate()
  const tx = new Transaction({
    feePayer: payer.publicKey,
    recentBlockhash: new PublicKey(new Uint8Array(32).fill(7)).toBase58(),
  })
  tx.add(
    SystemProgram.transfer({
      fromPubkey: payer.publicKey,
      toPubkey: Keypair.generate().publicKey,
      lamports: 1,
    }),
  )
  tx.sign(payer)
  return tx.serialize().toString('base64')
}

function issuePath(fn: () => void): string | undefined {
  try {
    fn()
    return undefined
  } catch (error) {
    if (!isPayError(error, 'params_validation')) throw error
    return (error.context.issues as { path: string }[])[0]!.path
  }
}

describe('checkResults', () => {
  it('accepts one well-formed result per action, in order', () => {
    const actions = [
      action('personal_sign'),
      action('eth_signTypedData_v4'),
      action('eth_sendTransaction'),
      action('solana_signTransaction', 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'),
    ]
    expect(() => checkResults(actions, [sig, sig, hash, signedTx()])).not.toThrow()
  })

  it('names the count mismatch on `results`', () => {
    expect(issuePath(() => checkResults([action('personal_sign')], [sig, sig]))).toBe('results')
    expect(issuePath(() => checkResults([action('personal_sign'), action('personal_sign')], [sig]))).toBe(
      'results',
    )
  })

  it('names the first result whose form does not fit its action', () => {
    const actions = [
      action('eth_sendTransaction'),
      action('eth_signTypedData_v4'),
      action('solana_signTransaction'),
    ]
    expect(issuePath(() => checkResults(actions, [sig, hash, 'x']))).toBe('results.0')
    // A signature is any whole-bytes hex (EOA, ERC-1271, ERC-6492): an odd nibble count is not one.
    expect(issuePath(() => checkResults(actions, [hash, '0xabc', 'x']))).toBe('results.1')
    expect(issuePath(() => checkResults(actions, [hash, sig, 'x']))).toBe('results.2')
    const detached = Buffer.from(new Uint8Array(64).fill(9)).toString('base64')
    expect(issuePath(() => checkResults(actions, [hash, sig, detached]))).toBe('results.2')
  })

  it('an unknown method has no acceptable result', () => {
    expect(issuePath(() => checkResults([action('eth_sign')], [sig]))).toBe('results.0')
  })
})
