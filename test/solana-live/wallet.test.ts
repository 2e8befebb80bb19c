import { Keypair } from '@solana/web3.js'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/evmSigner.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { createPayClient } from '../../src/pay/createPayClient.js'
import { buyerSigner, type SolanaLive, startSolanaLive } from './live.js'

const amount = 12_500_000n

let live: SolanaLive
let baseUrl: string

beforeAll(async () => {
  live = await startSolanaLive()
  baseUrl = await live.t.app.listen({ port: 0, host: '127.0.0.1' })
  live.startRunner()
})

afterAll(async () => {
  await live?.close()
})

describe('the wallet library on live Solana', () => {
  it('pays without any RPC of its own: every sendTransaction is the server’s (collection account, payment, settlement)', async () => {
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const { gatewayUrl, paymentId } = await live.createPayment(merchantId)
    const sends = live.proxy.calls('sendTransaction')
    const executed = live.executed()
    const before = await live.balance(buyer.publicKey)

    // The signer is built from a key alone: there is no Connection on the wallet side to send with.
    const wallet = createPayClient({
      baseUrl,
      apiKey: live.liveKey,
      trustedHosts: ['127.0.0.1'],
      signers: [buyerSigner(live, buyer)],
      poll: { intervalMs: 50 },
    })
    const result = await wallet.pay(gatewayUrl)
    expect(result).toMatchObject({ paymentId, status: 'succeeded', txId: expect.any(String) })
    expect(result.optionAmount).toMatchObject({ unit: `caip19/${live.asset}`, value: amount.toString() })

    const settled = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    expect(settled.info.txId).toBe(result.txId)
    // Payment and settlement, and before them the collection token account the first push option
    // needs (docs/push-payments.md): the server creates it at this cluster's first options call.
    expect(live.proxy.calls('sendTransaction') - sends).toBe(3)
    expect(live.executed() - executed).toBe(3)
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)
    expect(await live.balance(merchantOwner.publicKey)).toBe(amount)
  })

  it('does not sign again when the blockhash expired before confirm: another fee payer’s id proves nothing', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const { gatewayUrl } = await live.createPayment(merchantId)
    const before = await live.balance(buyer.publicKey)
    // The wallet reads its own node, but the service pays the fee and could land the same message
    // under another signature of its own: a first transaction not found by its id may still land
    // or have landed, so it counts and nothing more is signed (docs/exposure.md).
    const signer = solanaSigner({
      keypair: buyer,
      chains: [live.caip2],
      connection: live.validator.connection,
    })
    let signed = 0
    // The first signature arrives too late: the cluster moves past its blockhash before confirm.
    const slow = {
      ...signer,
      request: async (request: Parameters<typeof signer.request>[0]) => {
        const result = await signer.request(request)
        if (++signed === 1) await live.validator.expireBlockhash()
        return result
      },
    }
    const wallet = createPayClient({
      baseUrl,
      apiKey: live.liveKey,
      trustedHosts: ['127.0.0.1'],
      signers: [slow],
      poll: { intervalMs: 50 },
    })
    await expect(wallet.pay(gatewayUrl)).rejects.toMatchObject({ code: 'quote_expired' })
    expect(signed).toBe(1)
    expect(await live.balance(buyer.publicKey)).toBe(before)
  })

  it('pays the mixed-chain option with an EVM and a Solana signer, results in action order', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const { gatewayUrl, paymentId } = await live.createPayment(merchantId)
    const before = await live.balance(buyer.publicKey)
    const evm = evmSigner({
      account: privateKeyToAccount(generatePrivateKey()),
      chains: { 'eip155:1': { rpcUrl: 'http://127.0.0.1:9' } },
    })
    const wallet = createPayClient({
      baseUrl,
      apiKey: live.liveKey,
      trustedHosts: ['127.0.0.1'],
      signers: [evm, buyerSigner(live, buyer)],
      poll: { intervalMs: 50 },
    })
    const methods: string[] = []
    const result = await wallet.pay(gatewayUrl, {
      selectOption: (options) => options.find((o) => o.actions.length === 2)!.id,
      onFlow: (flow) => flow.on('action', (e) => e.phase === 'signed' && methods.push(e.method)),
    })
    expect(result).toMatchObject({ paymentId, status: 'succeeded' })
    expect(methods).toEqual(['personal_sign', 'solana_signTransaction'])
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)
  })
})
