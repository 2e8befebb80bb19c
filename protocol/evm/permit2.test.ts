import { hashTypedData, recoverAddress } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { describe, expect, it } from 'vitest'
import { expectPayError } from '../../test/expectPayError.js'
import { decodeEvmRequest } from './decodeEvmAction.js'
import type { TypedDataPayload } from './params.js'
import {
  decodePermit2TypedData,
  isPermit2TypedData,
  type Permit2Allowance,
  type Permit2Transfer,
  permit2Address,
  permit2AllowanceHash,
  permit2AllowanceTypedData,
  permit2Hash,
  permit2TypedData,
  permit2WitnessTypes,
} from './permit2.js'

const payee = privateKeyToAccount(generatePrivateKey()).address
const transfer: Permit2Transfer = {
  chainId: 8453,
  token: '0xdAC17F958D2ee523a2206206994597C13D831ec7',
  amount: 10_000_000n,
  spender: payee,
  nonce: 2n ** 200n + 7n,
  deadline: 1_900_000_000n,
  to: payee,
  validAfter: 0n,
}
const typed = permit2TypedData(transfer)
const json = (t: TypedDataPayload) => JSON.parse(JSON.stringify(t)) as TypedDataPayload
const refused =
  (t: unknown, chainId = 8453) =>
  () =>
    decodePermit2TypedData(chainId, t as TypedDataPayload)

describe('Permit2 witness transfers', () => {
  it('reads back what the service offers, and hashes it as viem does', () => {
    const decoded = decodePermit2TypedData(8453, json(typed))
    expect(decoded.transfer).toEqual(transfer)
    expect(decoded.typedData).toEqual(typed)
    expect(isPermit2TypedData(typed)).toBe(true)
    const { EIP712Domain: _, ...types } = typed.types
    expect(permit2Hash(transfer)).toBe(
      hashTypedData({
        domain: { name: 'Permit2', chainId: 8453, verifyingContract: permit2Address },
        types,
        primaryType: 'PermitWitnessTransferFrom',
        message: {
          ...typed.message,
          permitted: { token: transfer.token, amount: transfer.amount },
          nonce: transfer.nonce,
          deadline: transfer.deadline,
          witness: { to: payee, validAfter: 0n },
        },
      } as never),
    )
  })

  it('refuses batch, witness-less and allowance permits by name', async () => {
    for (const primaryType of [
      'PermitBatchWitnessTransferFrom',
      'PermitTransferFrom',
      'PermitSingle',
      'PermitBatch',
    ]) {
      await expectPayError(Promise.resolve().then(refused({ ...typed, primaryType })), 'action_rejected')
    }
  })

  it('refuses another spender than the payee, another chain, another Permit2, extra fields or types', () => {
    const other = privateKeyToAccount(generatePrivateKey()).address
    expect(refused({ ...typed, message: { ...typed.message, spender: other } })).toThrow(
      /spender is not the payee/,
    )
    expect(refused(typed, 1)).toThrow(/not bound to the action chain/)
    expect(refused({ ...typed, domain: { ...typed.domain, verifyingContract: other } })).toThrow(/canonical/)
    expect(refused({ ...typed, domain: { ...typed.domain, version: '1' } })).toThrow(/not Permit2's/)
    expect(refused({ ...typed, message: { ...typed.message, extra: '0x' } })).toThrow(/other fields/)
    expect(
      refused({
        ...typed,
        types: {
          ...typed.types,
          Witness: [...permit2WitnessTypes.Witness, { name: 'extra', type: 'bytes' }],
        },
      }),
    ).toThrow(/payee-witness transfer struct/)
    expect(
      refused({
        ...typed,
        message: { ...typed.message, permitted: { token: transfer.token, amount: '-1' } },
      }),
    ).toThrow(/not an integer/)
  })

  it('the wallet decoder reads it as a transfer to the payee pulled through Permit2, and signs only the rebuilt data', () => {
    const signer = privateKeyToAccount(generatePrivateKey()).address
    const request = (t: unknown) => ({
      chainId: 'eip155:8453',
      method: 'eth_signTypedData_v4',
      params: [signer, JSON.stringify(t)],
    })
    const decoded = decodeEvmRequest(request({ ...typed, types: { ...typed.types } }))
    expect(decoded.inspection).toEqual({
      account: `eip155:8453:${signer}`,
      transfers: [
        {
          asset: `eip155:8453/erc20:${transfer.token}`,
          amount: transfer.amount,
          to: `eip155:8453:${payee}`,
          through: `eip155:8453:${permit2Address}`,
        },
      ],
      validUntil: 1_900_000_000,
    })
    expect(decoded.signable).toEqual({ kind: 'typedData', address: signer, typedData: typed })
    const allowance = { ...typed, primaryType: 'PermitSingle', types: { ...typed.types, PermitSingle: [] } }
    expect(() => decodeEvmRequest(request(allowance))).toThrow(/allowance is not signed/)
  })
})

describe('Permit2 allowance grants (subscription mandates)', () => {
  it('a wallet signing the JSON typed data signs the hash the service verifies', async () => {
    const owner = privateKeyToAccount(generatePrivateKey())
    const grant: Permit2Allowance = {
      chainId: 8453,
      token: transfer.token,
      amount: 12n * 10_000_000n,
      expiration: 1_900_000_000n,
      nonce: 3n,
      spender: payee,
      sigDeadline: 1_800_000_000n,
    }
    const { EIP712Domain: _, ...types } = json(permit2AllowanceTypedData(grant)).types
    const payload = json(permit2AllowanceTypedData(grant))
    const signature = await owner.signTypedData({
      domain: payload.domain,
      types,
      primaryType: 'PermitSingle',
      message: payload.message,
    } as never)
    expect(await recoverAddress({ hash: permit2AllowanceHash(grant), signature })).toBe(owner.address)
    const other = await owner.signTypedData({
      domain: payload.domain,
      types,
      primaryType: 'PermitSingle',
      message: { ...payload.message, spender: owner.address },
    } as never)
    expect(await recoverAddress({ hash: permit2AllowanceHash(grant), signature: other })).not.toBe(
      owner.address,
    )
  })
})
