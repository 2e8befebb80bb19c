import { Keypair } from '@solana/web3.js'
import { describe, expect, it } from 'vitest'
import { resolveConfig } from '../../config.js'
import type { Db } from '../../store/db.js'
import { createSolanaRuntime } from './index.js'
import { encodeBase58, parseSolanaSecretKey } from './keys.js'

describe('Solana service key', () => {
  const key = Keypair.generate()

  it('reads a base58 secret key and a solana-keygen JSON array', () => {
    expect(parseSolanaSecretKey(encodeBase58(key.secretKey)).publicKey.equals(key.publicKey)).toBe(true)
    expect(parseSolanaSecretKey(JSON.stringify([...key.secretKey])).publicKey.equals(key.publicKey)).toBe(
      true,
    )
  })

  it('encodes base58 like web3.js, leading zero bytes included', () => {
    expect(encodeBase58(key.publicKey.toBytes())).toBe(key.publicKey.toBase58())
    expect(encodeBase58(new Uint8Array([0, 0, 1]))).toBe('112')
    expect(encodeBase58(new Uint8Array(32))).toBe('11111111111111111111111111111111')
  })

  it('refuses a public key, a short key and a secret key whose halves do not match', () => {
    expect(() => parseSolanaSecretKey(key.publicKey.toBase58())).toThrow(/64 bytes/)
    expect(() => parseSolanaSecretKey('not base58 0OIl')).toThrow(/64 bytes/)
    const mismatched = Uint8Array.from([
      ...key.secretKey.subarray(0, 32),
      ...Keypair.generate().publicKey.toBytes(),
    ])
    expect(() => parseSolanaSecretKey(encodeBase58(mismatched))).toThrow(/64 bytes/)
  })

  it('names the config entry of a bad key when the runtime is built', () => {
    const caip2 = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1'
    const config = resolveConfig({ chains: { [caip2]: { rpcUrl: 'http://127.0.0.1:1', signerKey: 'abc' } } })
    // Building a runtime opens nothing: the database is first used by a job.
    const db = {} as Db
    expect(() => createSolanaRuntime({ config, db })).toThrow(`chains.${caip2}.signerKey`)
    const good = resolveConfig({
      chains: { [caip2]: { rpcUrl: 'http://127.0.0.1:1', signerKey: encodeBase58(key.secretKey) } },
    })
    const runtime = createSolanaRuntime({ config: good, db })
    expect(runtime.drivers.map((d) => d.caip2)).toEqual([caip2])
    expect(runtime.chains[0]!.service.publicKey.equals(key.publicKey)).toBe(true)
    expect(Object.keys(runtime.jobHandlers).sort()).toEqual([
      'solana.broadcast',
      'solana.deposit_refund',
      'solana.mandate_charge',
      'solana.refund',
      'solana.settle',
    ])
  })
})
