import { Keypair } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buyerSigner, type SolanaLive, sign, startSolanaLive } from './live.js'

const amount = 12_500_000n // USD 12.50 at 1:1, 6 decimals

let live: SolanaLive

beforeAll(async () => {
  live = await startSolanaLive()
  live.startRunner()
})

afterAll(async () => {
  await live?.close()
})

describe('live Solana payment', () => {
  it('pays through the gateway, broadcasts once and settles to the merchant', async () => {
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const { paymentId } = await live.createPayment(merchantId)
    const account = `${live.caip2}:${buyer.publicKey.toBase58()}`
    const before = {
      buyer: await live.balance(buyer.publicKey),
      collection: await live.balance(live.service.publicKey),
      merchant: await live.balance(merchantOwner.publicKey),
    }

    const options = await live.gateway(paymentId, 'options', { accounts: [account] })
    expect(options.statusCode, options.body).toBe(200)
    expect(options.json.options).toHaveLength(1)
    const option = options.json.options[0]
    expect(option).toMatchObject({ account, amount: { unit: `caip19/${live.asset}`, value: amount.toString() } })
    expect(option.actions).toEqual([{ type: 'build', build: { data: expect.any(String) } }])

    const fetched = await live.gateway(paymentId, 'fetch', { optionId: option.id, data: option.actions[0].build.data })
    expect(fetched.statusCode, fetched.body).toBe(200)
    const [action] = fetched.json.actions
    expect(action.walletRpc).toMatchObject({ chainId: live.caip2, method: 'solana_signTransaction' })
    expect(JSON.parse(action.walletRpc.params)).toEqual([{ transaction: expect.any(String) }])

    const signed = await sign(buyerSigner(live, buyer), action)
    const confirmed = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
    expect(confirmed.statusCode, confirmed.body).toBe(200)
    expect(confirmed.json).toMatchObject({ status: 'processing', isFinal: false })

    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    expect(paid.status).toBe('succeeded')
    expect(paid.info.optionAmount).toMatchObject({ unit: `caip19/${live.asset}`, value: amount.toString() })
    expect(paid.settlement.successful.amount).toEqual({ unit: `caip19/${live.asset}` })

    const { connection } = live.validator
    const payment = await connection.getTransaction(paid.info.txId, { maxSupportedTransactionVersion: 0 })
    expect(payment?.meta?.err).toBeNull()
    const settlement = await connection.getTransaction(paid.settlement.successful.txId, {
      maxSupportedTransactionVersion: 0,
    })
    expect(settlement?.meta?.err).toBeNull()

    expect(await live.balance(buyer.publicKey)).toBe(before.buyer - amount)
    expect(await live.balance(live.service.publicKey)).toBe(before.collection)
    expect(await live.balance(merchantOwner.publicKey)).toBe(before.merchant + amount)
    expect(live.proxy.calls('sendTransaction')).toBe(2)
  })
})
