import { encodeFunctionData, erc20Abi, getAddress, toHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { describe, expect, it } from 'vitest'
import { isPayError } from '../../src/errors/PayError.js'
import { anvilPrivateKeys, authorizationTypedData } from '../../test/anvil.js'
import { decodeEvmAction, evmSigner } from './index.js'

const payer = privateKeyToAccount(anvilPrivateKeys[1]).address
const merchant = privateKeyToAccount(anvilPrivateKeys[2]).address
const token = getAddress('0x833589fcd6edb6e08f4c7c32d4f71b54bda02913')
const chain = 'eip155:8453'
const usdc = `eip155:8453/erc20:${token}`

const authorization = (overrides: Partial<Parameters<typeof authorizationTypedData>[0]> = {}) =>
  authorizationTypedData({ token, chainId: 8453, from: payer, to: merchant, value: 4_990_000n, ...overrides })

const permit = {
  types: {
    Permit: [
      { name: 'owner', type: 'address' },
      { name: 'spender', type: 'address' },
      { name: 'value', type: 'uint256' },
      { name: 'nonce', type: 'uint256' },
      { name: 'deadline', type: 'uint256' },
    ],
  },
  primaryType: 'Permit',
  domain: { name: 'USD Coin', version: '2', chainId: '0x2105', verifyingContract: token.toLowerCase() },
  message: { owner: payer, spender: merchant, value: '0xf4240', nonce: 0, deadline: '1900000000' },
}

function codeOf(run: () => unknown): string | undefined {
  try {
    run()
  } catch (error) {
    return isPayError(error) ? error.code : `not a PayError: ${error}`
  }
  return undefined
}

const v4 = (data: object, address: string = payer) => ({
  chainId: chain,
  method: 'eth_signTypedData_v4',
  params: [address, JSON.stringify(data)],
})
const send = (tx: object) => ({
  chainId: chain,
  method: 'eth_sendTransaction',
  params: [{ from: payer, ...tx }],
})

describe('decodeEvmAction', () => {
  it.each(['TransferWithAuthorization', 'ReceiveWithAuthorization'] as const)(
    'reads an EIP-3009 %s: token from the domain, amount, payee',
    (kind) => {
      expect(decodeEvmAction(v4(authorization({ kind, validBefore: 1_900_000_000n })))).toEqual({
        account: `${chain}:${payer}`,
        transfers: [{ asset: usdc, amount: 4_990_000n, to: `${chain}:${merchant}` }],
        validUntil: 1_900_000_000,
      })
    },
  )

  it('reads typed data given as an object (v3) or with the address second', () => {
    const expected = decodeEvmAction(v4(authorization()))
    const data = authorization()
    expect(
      decodeEvmAction({ chainId: chain, method: 'eth_signTypedData_v3', params: [payer, data] }),
    ).toEqual(expected)
    expect(decodeEvmAction({ chainId: chain, method: 'eth_signTypedData', params: [data, payer] })).toEqual(
      expected,
    )
  })

  it('reads an EIP-2612 permit to an allow-listed spender as the spender being able to take the value', () => {
    const spenders = [`${chain}:${merchant.toLowerCase()}`]
    expect(decodeEvmAction(v4(permit), { spenders })).toEqual({
      account: `${chain}:${payer}`,
      transfers: [{ asset: usdc, amount: 1_000_000n, to: `${chain}:${merchant}`, approval: true }],
      validUntil: 1_900_000_000,
    })
    expect(codeOf(() => decodeEvmAction(v4(permit)))).toBe('action_rejected')
    expect(codeOf(() => decodeEvmAction(v4(permit), { spenders: [`eip155:1:${merchant}`] }))).toBe(
      'action_rejected',
    )
  })

  it('reads ERC-20 transfer, and approve only to an allow-listed spender; the asset is the called contract', () => {
    const call = (data: `0x${string}`, spenders?: string[]) =>
      decodeEvmAction(send({ to: token, data }), spenders ? { spenders } : {}).transfers
    expect(
      call(encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [merchant, 25n] })),
    ).toEqual([{ asset: usdc, amount: 25n, to: `${chain}:${merchant}` }])
    const approve = encodeFunctionData({ abi: erc20Abi, functionName: 'approve', args: [merchant, 27n] })
    expect(call(approve, [`${chain}:${merchant}`])).toEqual([
      { asset: usdc, amount: 27n, to: `${chain}:${merchant}`, approval: true },
    ])
    expect(codeOf(() => call(approve))).toBe('action_rejected')
  })

  it('refuses transferFrom (cause 3): another account’s allowance, or an NFT under the same selector', () => {
    const transferFrom = encodeFunctionData({
      abi: erc20Abi,
      functionName: 'transferFrom',
      args: [merchant, payer, 26n],
    })
    expect(codeOf(() => decodeEvmAction(send({ to: token, data: transferFrom })))).toBe('action_rejected')
  })

  it('refuses calldata that is not the exact ABI encoding: trailing, short, dirty address words', () => {
    const transfer = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [merchant, 25n] })
    const dirty = `${transfer.slice(0, 10)}${'ff'.repeat(12)}${transfer.slice(34)}` as const
    for (const data of [`${transfer}00`, transfer.slice(0, -2), transfer.slice(0, 10), dirty] as const) {
      expect(codeOf(() => decodeEvmAction(send({ to: token, data: data as `0x${string}` })))).toBe(
        'action_rejected',
      )
    }
  })

  it('reads native value alone; a token call with value, or a transaction that pays nothing, is refused', () => {
    expect(decodeEvmAction(send({ to: merchant, value: toHex(10n ** 18n) }))).toEqual({
      account: `${chain}:${payer}`,
      transfers: [{ asset: 'eip155:8453/slip44:60', amount: 10n ** 18n, to: `${chain}:${merchant}` }],
    })
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [merchant, 5n] })
    expect(codeOf(() => decodeEvmAction(send({ to: token, data, value: '0x1' })))).toBe('action_rejected')
    expect(codeOf(() => decodeEvmAction(send({ to: merchant, value: '0x0' })))).toBe('action_rejected')
    expect(codeOf(() => decodeEvmAction(send({ to: merchant })))).toBe('action_rejected')
  })

  it('reads personal_sign as an attestation that moves nothing', () => {
    expect(
      decodeEvmAction({
        chainId: chain,
        method: 'personal_sign',
        params: [toHex('I agree'), payer.toLowerCase()],
      }),
    ).toEqual({ account: `${chain}:${payer}`, transfers: [] })
  })

  it('refuses what it cannot bound or what names another chain or payer', () => {
    expect(codeOf(() => decodeEvmAction(v4(authorization({ chainId: 1 }))))).toBe('action_rejected')
    expect(codeOf(() => decodeEvmAction(v4(authorization(), merchant)))).toBe('action_rejected')
    const mail = { ...permit, primaryType: 'Mail', types: { Mail: [{ name: 'contents', type: 'string' }] } }
    expect(codeOf(() => decodeEvmAction(v4({ ...mail, message: { contents: 'hi' } })))).toBe(
      'action_rejected',
    )
    const renamed = { ...permit, types: { Permit: permit.types.Permit.slice(0, 3) } }
    expect(codeOf(() => decodeEvmAction(v4(renamed)))).toBe('action_rejected')
    const approveAll = encodeFunctionData({
      abi: [
        {
          type: 'function',
          name: 'setApprovalForAll',
          inputs: [
            { name: 'operator', type: 'address' },
            { name: 'approved', type: 'bool' },
          ],
          outputs: [],
          stateMutability: 'nonpayable',
        },
      ],
      args: [merchant, true],
    })
    expect(codeOf(() => decodeEvmAction(send({ to: token, data: approveAll })))).toBe('action_rejected')
    expect(codeOf(() => decodeEvmAction(send({ data: '0x6000' })))).toBe('action_rejected')
    expect(codeOf(() => decodeEvmAction(send({ to: merchant, value: '0x1', chainId: '0x1' })))).toBe(
      'action_rejected',
    )
    expect(codeOf(() => decodeEvmAction({ chainId: chain, method: 'eth_sign', params: [] }))).toBe(
      'unsupported_method',
    )
    expect(codeOf(() => decodeEvmAction({ ...v4(authorization()), chainId: 'eip155:0x2105' }))).toBe(
      'invalid_caip',
    )
    const noValue = { ...authorization(), message: { ...authorization().message, value: 'lots' } }
    expect(codeOf(() => decodeEvmAction(v4(noValue)))).toBe('invalid_action')
  })

  it('is what the signer uses for inspect', async () => {
    const signer = evmSigner({
      account: privateKeyToAccount(anvilPrivateKeys[1]),
      chains: { [chain]: { rpcUrl: 'http://127.0.0.1:1' } },
    })
    const request = v4(authorization())
    expect(await signer.inspect(request)).toEqual(decodeEvmAction(request))
  })
})
