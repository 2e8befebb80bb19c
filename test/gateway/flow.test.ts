import { decodeTransferCheckedInstruction, getAssociatedTokenAddressSync } from '@solana/spl-token'
import { PublicKey, Transaction } from '@solana/web3.js'
import { type Hex, verifyMessage, verifyTypedData } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testServiceKeys } from '../../src/server/chains/simulated.js'
import { idem } from '../server/helpers.js'
import {
  type Buyer,
  createBuyer,
  createGatewayEnv,
  type GatewayEnv,
  isBaseOption,
  isMixedOption,
  isSolanaOption,
  usdc,
} from './support.js'

let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv()
  buyer = createBuyer()
})
afterAll(() => env.t.close())

async function merchantView(paymentId: string) {
  const res = await env.t.request({
    method: 'GET',
    url: `/v1/payments/${paymentId}`,
    headers: { 'api-key': env.apiKey, 'merchant-id': env.merchantId },
  })
  expect(res.statusCode, res.body).toBe(200)
  return res.json
}

describe('test-mode flow, payment creation to succeeded', () => {
  it('EVM: EIP-3009 typed data signed by the buyer, confirmed, txId test:<id>', async () => {
    const paymentId = await env.pay('1250')
    const { option, actions, results } = await env.prepare(paymentId, buyer, isBaseOption)
    expect(option.amount).toMatchObject({ unit: `caip19/${usdc.base}`, value: '12500000' })
    expect(option.amount.display).toMatchObject({ assetSymbol: 'USDC', decimals: 6, networkName: 'Base' })
    expect(actions).toHaveLength(1)
    const { walletRpc } = actions[0]!
    expect(walletRpc).toMatchObject({ chainId: 'eip155:8453', method: 'eth_signTypedData_v4' })
    const [address, json] = JSON.parse(walletRpc.params) as [string, string]
    expect(address).toBe(buyer.evm.address)
    const typed = JSON.parse(json)
    expect(typed.primaryType).toBe('TransferWithAuthorization')
    expect(typed.domain).toEqual({
      name: 'USD Coin',
      version: '2',
      chainId: 8453,
      verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    })
    expect(typed.message).toMatchObject({
      from: buyer.evm.address,
      to: testServiceKeys.evmCollection,
      value: '12500000',
      validAfter: '0',
      validBefore: String(option.expiresAt),
    })
    expect(typed.message.nonce).toMatch(/^0x[0-9a-f]{64}$/)
    const { EIP712Domain: _, ...types } = typed.types
    const valid = await verifyTypedData({
      address: buyer.evm.address,
      domain: typed.domain,
      types,
      primaryType: typed.primaryType,
      message: { ...typed.message, value: 12500000n, validAfter: 0n, validBefore: BigInt(option.expiresAt) },
      signature: results[0] as Hex,
    })
    expect(valid).toBe(true)

    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect(confirm.statusCode, confirm.body).toBe(200)
    expect(confirm.json).toEqual({ status: 'succeeded', isFinal: true, pollInMs: null })

    const status = await env.gw('GET', paymentId, '/status')
    expect(status.json).toEqual({
      status: 'succeeded',
      isFinal: true,
      pollInMs: null,
      txId: `test:${paymentId}`,
    })
    const payment = await merchantView(paymentId)
    expect(payment.info).toEqual({ txId: `test:${paymentId}`, optionAmount: option.amount })
    expect(payment.settlement).toBeNull()
  })

  it('Solana: build resolved by fetch into a real transferChecked transaction, signed and confirmed', async () => {
    const paymentId = await env.pay('999')
    const { option, actions, results } = await env.prepare(paymentId, buyer, isSolanaOption)
    expect(option.actions[0].type).toBe('build')
    expect(actions).toHaveLength(1)
    expect(actions[0]!.walletRpc.method).toBe('solana_signTransaction')
    const [{ transaction }] = JSON.parse(actions[0]!.walletRpc.params)
    const tx = Transaction.from(Buffer.from(transaction, 'base64'))
    const service = testServiceKeys.solana.publicKey
    expect(tx.feePayer?.equals(service)).toBe(true)
    expect(tx.signatures.find((s) => s.publicKey.equals(service))?.signature).not.toBeNull()
    const mint = new PublicKey(usdc.solana.split('token:')[1]!)
    const decoded = decodeTransferCheckedInstruction(tx.instructions[0]!)
    expect(decoded.data.amount).toBe(9_990_000n)
    expect(decoded.data.decimals).toBe(6)
    expect(decoded.keys.mint.pubkey.equals(mint)).toBe(true)
    expect(decoded.keys.owner.pubkey.equals(buyer.solana.publicKey)).toBe(true)
    expect(
      decoded.keys.source.pubkey.equals(getAssociatedTokenAddressSync(mint, buyer.solana.publicKey)),
    ).toBe(true)
    expect(decoded.keys.destination.pubkey.equals(getAssociatedTokenAddressSync(mint, service))).toBe(true)
    // The buyer's signature completes it: every signature verifies.
    expect(Transaction.from(Buffer.from(results[0]!, 'base64')).verifySignatures()).toBe(true)

    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect(confirm.json.status, confirm.body).toBe('succeeded')
    expect((await merchantView(paymentId)).info.txId).toBe(`test:${paymentId}`)
  })

  it('mixed option: EVM personal_sign attestation, then the Solana payment; results in that order', async () => {
    const paymentId = await env.pay('500')
    const { option, actions, results } = await env.prepare(paymentId, buyer, isMixedOption)
    expect(option.actions.map((a: { type: string }) => a.type)).toEqual(['walletRpc', 'build'])
    expect(actions.map((a) => a.walletRpc.method)).toEqual(['personal_sign', 'solana_signTransaction'])
    const [message, address] = JSON.parse(actions[0]!.walletRpc.params) as [Hex, string]
    expect(address).toBe(buyer.evm.address)
    expect(
      await verifyMessage({
        address: buyer.evm.address,
        message: { raw: message },
        signature: results[0] as Hex,
      }),
    ).toBe(true)

    const swapped = await env.gw('POST', paymentId, '/confirm', {
      optionId: option.id,
      results: [results[1], results[0]],
    })
    expect(swapped.statusCode).toBe(400)
    expect(swapped.json.issues[0].path).toBe('results.0')

    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect(confirm.json.status, confirm.body).toBe('succeeded')
  })

  it('settlement is reported completed with a test: txId when the merchant settles that asset', async () => {
    const destination = `eip155:8453:0x${'ab'.repeat(20)}`
    const created = await env.t.request({
      method: 'POST',
      url: `/v1/merchants/${env.merchantId}/settlements/crypto`,
      headers: { 'api-key': env.apiKey, 'idempotency-key': idem() },
      payload: { settlements: [{ asset: usdc.base, destination }] },
    })
    expect(created.statusCode, created.body).toBe(201)
    const paymentId = await env.pay('2000')
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    const payment = await merchantView(paymentId)
    expect(payment.settlement).toEqual({
      successful: { txId: `test:${paymentId}:settlement`, amount: { unit: `caip19/${usdc.base}` } },
    })
  })

  it('works with App-Id + Client-Id as well as an API key', async () => {
    const { appId } = await env.t.createAppId('test')
    const paymentId = await env.pay('100')
    const headers = { 'app-id': appId, 'client-id': 'device-1' }
    const res = await env.t.request({
      method: 'POST',
      url: `/v1/gateway/payment/${paymentId}/options`,
      headers,
      payload: { accounts: [buyer.accounts.base] },
    })
    expect(res.statusCode, res.body).toBe(200)
    const option = res.json.options[0]
    const result = await buyer.sign(option.actions[0])
    const confirm = await env.t.request({
      method: 'POST',
      url: `/v1/gateway/payment/${paymentId}/confirm`,
      headers,
      payload: { optionId: option.id, results: [result] },
    })
    expect(confirm.json.status, confirm.body).toBe('succeeded')
  })
})
