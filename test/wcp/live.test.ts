import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { buyerSigner, type SolanaLive, sign, startSolanaLive } from '../solana-live/live.js'
import { guardNetwork, type NetworkGuard } from '../walletconnect/clients.js'
import { listenForSdk, type SdkServer } from './support.js'

// Live payments through the published WalletConnect Pay SDK: real chains, balances read on chain.

let network: NetworkGuard
beforeAll(() => {
  network = guardNetwork()
})
afterAll(() => network.restore())

describe('live EVM payment on Anvil through the SDK', () => {
  let env: EvmEnv
  let server: SdkServer
  beforeAll(async () => {
    env = await createEvmEnv()
    env.startRunner()
    server = await listenForSdk(env.t.app)
  })
  afterAll(() => env?.close())

  it('pays the gasless (EIP-3009) option: relayed, succeeded with the chain hash, settled', async () => {
    const buyer = await env.buyer(3)
    const { paymentId } = await env.pay('1250')
    const amount = usdc(12.5)
    const before = await Promise.all([env.balance(buyer.address), env.balance(env.merchant.destination)])
    const pay = server.client({ apiKey: env.walletKey })
    const { options } = await pay.getPaymentOptions({ paymentLink: paymentId, accounts: [buyer.account] })
    const option = options.find((o) => o.actions[0]?.walletRpc.method === 'eth_signTypedData_v4')!
    expect(option.amount).toMatchObject({ unit: `caip19/${env.asset}`, value: amount.toString() })
    const actions = await pay.getRequiredPaymentActions({ paymentId, optionId: option.id })
    const signatures = await Promise.all(actions.map((a) => buyer.sign({ type: 'walletRpc', ...a })))
    // The SDK polls /status until the payment is final.
    const result = await pay.confirmPayment({ paymentId, optionId: option.id, signatures })
    expect(result).toMatchObject({
      status: 'succeeded',
      isFinal: true,
      info: { txId: expect.stringMatching(/^0x[0-9a-f]{64}$/), optionAmount: { value: amount.toString() } },
    })
    const receipt = await env.publicClient.getTransactionReceipt({ hash: result.info!.txId as `0x${string}` })
    expect(receipt.status).toBe('success')
    const deadline = Date.now() + 20_000
    while (!(await env.merchantView(paymentId)).settlement?.successful) {
      if (Date.now() > deadline) throw new Error('settlement did not complete')
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    expect(await env.balance(buyer.address)).toBe(before[0] - amount)
    expect(await env.balance(env.merchant.destination)).toBe(before[1] + amount)
  })
})

describe('live Solana payment on the local cluster through the SDK', () => {
  let live: SolanaLive
  let server: SdkServer
  beforeAll(async () => {
    live = await startSolanaLive()
    live.startRunner()
    server = await listenForSdk(live.t.app)
  })
  afterAll(() => live?.close())

  it('builds, fetches, signs, confirms; the transfer lands and settles to the merchant', async () => {
    const amount = 12_500_000n
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const { paymentId } = await live.createPayment(merchantId)
    const account = `${live.caip2}:${buyer.publicKey.toBase58()}`
    const before = {
      buyer: await live.balance(buyer.publicKey),
      merchant: await live.balance(merchantOwner.publicKey),
    }
    const pay = server.client({ apiKey: live.liveKey })
    const { options } = await pay.getPaymentOptions({ paymentLink: paymentId, accounts: [account] })
    expect(options).toHaveLength(1)
    const actions = await pay.getRequiredPaymentActions({ paymentId, optionId: options[0]!.id })
    expect(actions.map((a) => a.walletRpc.method)).toEqual(['solana_signTransaction'])
    const signatures = await Promise.all(actions.map((a) => sign(buyerSigner(live, buyer), a)))
    const result = await pay.confirmPayment({ paymentId, optionId: options[0]!.id, signatures })
    expect(result).toMatchObject({
      status: 'succeeded',
      isFinal: true,
      info: { optionAmount: { value: '12500000' } },
    })
    const landed = await live.validator.connection.getTransaction(result.info!.txId, {
      maxSupportedTransactionVersion: 0,
    })
    expect(landed?.meta?.err).toBeNull()
    await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    expect(await live.balance(buyer.publicKey)).toBe(before.buyer - amount)
    expect(await live.balance(merchantOwner.publicKey)).toBe(before.merchant + amount)
  })
})
