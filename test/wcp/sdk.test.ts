import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createBuyer } from '../gateway/support.js'
import { type SdkEnv, signAll, startSdkEnv } from './support.js'

// The published @walletconnect/pay SDK (its WASM provider, unmodified) pays against caipay's /wcp mount.

let sdk: SdkEnv
beforeAll(async () => {
  sdk = await startSdkEnv()
})
afterAll(() => sdk.close())

describe('test mode through the WalletConnect Pay SDK', () => {
  it('pays an EVM option: EIP-3009 typed data signed, confirmed, info with txId', async () => {
    const { env } = sdk
    const paymentId = await env.pay('1250')
    const buyer = createBuyer()
    const pay = sdk.client()
    const options = await pay.getPaymentOptions({
      paymentLink: paymentId,
      accounts: [buyer.accounts.base],
      includePaymentInfo: true,
    })
    expect(options.paymentId).toBe(paymentId)
    expect(options.info).toMatchObject({ status: 'requires_action', merchant: { name: 'Coffee Shop' } })
    expect(options.info?.amount).toMatchObject({ unit: 'iso4217/USD', value: '1250' })
    const option = options.options.find((o) => o.account === buyer.accounts.base)
    expect(option?.amount).toMatchObject({ value: '12500000', display: { assetSymbol: 'USDC', decimals: 6 } })

    const actions = await pay.getRequiredPaymentActions({ paymentId, optionId: option!.id })
    expect(actions.map((a) => [a.walletRpc.chainId, a.walletRpc.method])).toEqual([
      ['eip155:8453', 'eth_signTypedData_v4'],
    ])
    const [from, typedData] = JSON.parse(actions[0]!.walletRpc.params) as [string, string]
    expect(from).toBe(buyer.evm.address)
    expect(JSON.parse(typedData).primaryType).toBe('TransferWithAuthorization')

    const result = await pay.confirmPayment({
      paymentId,
      optionId: option!.id,
      signatures: await signAll(buyer, actions),
    })
    expect(result).toMatchObject({
      status: 'succeeded',
      isFinal: true,
      info: { txId: `test:${paymentId}`, optionAmount: { value: '12500000' } },
    })
    const native = await env.gw('GET', paymentId, '/status')
    expect(native.json).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
    // Its telemetry went nowhere: every fetch off loopback was refused.
    expect(sdk.network.external.length).toBeGreaterThan(0)
    expect(sdk.network.external.every((url) => new URL(url).hostname.endsWith('walletconnect.org'))).toBe(
      true,
    )
  })
})
