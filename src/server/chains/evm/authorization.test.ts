import { type Hex, toHex } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { describe, expect, it } from 'vitest'
import { signAuthorization } from '../../../../test/anvil.js'
import {
  type Authorization,
  authorizationFromJson,
  authorizationFromParams,
  authorizationHash,
  authorizationHashOfKnownShape,
  authorizationKind,
  authorizationToJson,
  authorizationTypedData,
} from './authorization.js'
import { verifyKeySignature } from './payerSignature.js'

const payer = privateKeyToAccount(generatePrivateKey())
const relayer = privateKeyToAccount(generatePrivateKey()).address
const authorization: Authorization = {
  kind: 'ReceiveWithAuthorization',
  chainId: 31337,
  token: '0x5FbDB2315678afecb367f032d93F642f64180aa3',
  domain: { name: 'USD Coin', version: '2' },
  from: payer.address,
  to: relayer,
  value: 12_500_000n,
  validAfter: 0n,
  validBefore: 1_900_000_000n,
  nonce: toHex(new Uint8Array(32).fill(7)),
}

const isSignedByPayer = async (a: Authorization, signature: Hex) =>
  (await verifyKeySignature(a.from, authorizationHash(a), signature)).valid

const sign = (typed: ReturnType<typeof authorizationTypedData>, key = payer) => signAuthorization(key, typed)

describe('EIP-3009 authorizations', () => {
  it('receive when the relayer is the payee (no front-running), transfer otherwise', () => {
    expect(authorizationKind(relayer, relayer.toLowerCase() as Hex)).toBe('ReceiveWithAuthorization')
    expect(authorizationKind(relayer, payer.address)).toBe('TransferWithAuthorization')
  })

  it('reads back exactly what was offered in eth_signTypedData_v4 params, and survives JSON', () => {
    const params = JSON.stringify([payer.address, JSON.stringify(authorizationTypedData(authorization))])
    expect(authorizationFromParams(params)).toEqual(authorization)
    expect(authorizationFromJson(JSON.parse(JSON.stringify(authorizationToJson(authorization))))).toEqual(
      authorization,
    )
  })

  it('accepts only the payer key signature of that very message', async () => {
    const typed = authorizationTypedData(authorization)
    expect(await isSignedByPayer(authorization, await sign(typed))).toBe(true)
    expect(
      await isSignedByPayer(authorization, await sign(typed, privateKeyToAccount(generatePrivateKey()))),
    ).toBe(false)
    const cheaper = authorizationTypedData({ ...authorization, value: 1n })
    expect(await isSignedByPayer(authorization, await sign(cheaper))).toBe(false)
    const otherKind = authorizationTypedData({ ...authorization, kind: 'TransferWithAuthorization' })
    expect(await isSignedByPayer(authorization, await sign(otherKind))).toBe(false)
    expect(await isSignedByPayer(authorization, `0x${'00'.repeat(65)}`)).toBe(false)
  })

  it('refuses params that are not a service-built authorization', () => {
    const permit = { ...authorizationTypedData(authorization), primaryType: 'Permit' }
    expect(() => authorizationFromParams(JSON.stringify([payer.address, JSON.stringify(permit)]))).toThrow(
      /Not an EIP-3009/,
    )
  })

  it('refuses params that are not typed data, or whose addresses or nonce are malformed', () => {
    const typed = authorizationTypedData(authorization)
    const params = (data: unknown) => JSON.stringify([payer.address, JSON.stringify(data)])
    expect(() => authorizationFromParams(JSON.stringify([payer.address, typed]))).toThrow(/Not typed-data/)
    expect(() =>
      authorizationFromParams(params({ ...typed, message: { ...typed.message, to: '0x12' } })),
    ).toThrow(/addresses are malformed/)
    expect(() =>
      authorizationFromParams(params({ ...typed, domain: { ...typed.domain, verifyingContract: 'usdc' } })),
    ).toThrow(/addresses are malformed/)
    expect(() =>
      authorizationFromParams(params({ ...typed, message: { ...typed.message, nonce: '0x07' } })),
    ).toThrow(/nonce is malformed/)
  })

  it('the hash of the known shape (a FastPath) is viem hashTypedData of the same authorization, whatever its fields', () => {
    const variants: Authorization[] = [
      authorization,
      { ...authorization, kind: 'TransferWithAuthorization' },
      { ...authorization, value: 0n, validBefore: 2n ** 256n - 1n },
      { ...authorization, value: 2n ** 256n - 1n, validAfter: 1n },
      { ...authorization, chainId: 8453, domain: { name: 'USDC', version: '2' } },
      { ...authorization, token: '0x036CbD53842c5426634e7929541eC2318f3dCF7e' },
      { ...authorization, domain: { name: 'USD Coin', version: '3' } },
      { ...authorization, nonce: toHex(new Uint8Array(32).fill(255)), from: relayer, to: payer.address },
    ]
    // Twice: the second time from the domain separators kept.
    for (const round of [1, 2])
      for (const a of variants)
        expect([round, authorizationHashOfKnownShape(a)]).toEqual([round, authorizationHash(a)])
    expect(new Set(variants.map(authorizationHashOfKnownShape)).size).toBe(variants.length)
  })
})
