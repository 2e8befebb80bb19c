import type { Action } from '@walletconnect/pay'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createAppId } from '../../src/server/accounts/accounts.js'
import { type Buyer, chains, createBuyer } from '../gateway/support.js'
import { type PayClient, type SdkEnv, signAll, startSdkEnv } from './support.js'

// The published @walletconnect/pay SDK (its WASM provider, unmodified) pays against caipay's /wcp mount.

const sanctioned = `eip155:8453:0x${'5a'.repeat(20)}`
// Links are made with it; nothing is fetched from it (the SDK only encodes a link into the request path).
const publicBaseUrl = 'https://sandbox.example.test'
let sdk: SdkEnv
beforeAll(async () => {
  sdk = await startSdkEnv({
    config: { collectDataAtMinor: '100000', sanctioned: [sanctioned], publicBaseUrl },
  })
})
afterAll(() => sdk.close())

const methods = (actions: readonly Action[]) => actions.map((a) => [a.walletRpc.chainId, a.walletRpc.method])

async function optionsFor(pay: PayClient, paymentId: string, accounts: string[]) {
  return pay.getPaymentOptions({ paymentLink: paymentId, accounts, includePaymentInfo: true })
}

async function payOption(pay: PayClient, paymentId: string, optionId: string, buyer: Buyer) {
  const actions = await pay.getRequiredPaymentActions({ paymentId, optionId })
  const result = await pay.confirmPayment({ paymentId, optionId, signatures: await signAll(buyer, actions) })
  return { actions, result }
}

describe('test mode through the WalletConnect Pay SDK', () => {
  it('pays an EVM option: EIP-3009 typed data signed, confirmed, info with txId', async () => {
    const { env } = sdk
    const paymentId = await env.pay('1250')
    const buyer = createBuyer()
    const pay = sdk.client()
    const options = await optionsFor(pay, paymentId, [buyer.accounts.base])
    expect(options.paymentId).toBe(paymentId)
    expect(options.info).toMatchObject({ status: 'requires_action', merchant: { name: 'Coffee Shop' } })
    expect(options.info?.amount).toMatchObject({ unit: 'iso4217/USD', value: '1250' })
    const option = options.options.find((o) => o.account === buyer.accounts.base)
    expect(option?.amount).toMatchObject({ value: '12500000', display: { assetSymbol: 'USDC', decimals: 6 } })
    expect(option?.collectData).toBeNull()

    const { actions, result } = await payOption(pay, paymentId, option!.id, buyer)
    expect(methods(actions)).toEqual([[chains.base, 'eth_signTypedData_v4']])
    const [from, typedData] = JSON.parse(actions[0]!.walletRpc.params) as [string, string]
    expect(from).toBe(buyer.evm.address)
    expect(JSON.parse(typedData).primaryType).toBe('TransferWithAuthorization')
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

  it('pays a Solana option: build -> fetch -> solana_signTransaction', async () => {
    const paymentId = await sdk.env.pay('990')
    const buyer = createBuyer()
    const pay = sdk.client()
    const { options } = await optionsFor(pay, paymentId, [buyer.accounts.solana])
    const option = options.find((o) => o.account === buyer.accounts.solana)!
    // A build action has nothing to sign yet: the SDK lists none until fetch resolves it.
    expect(option.actions).toEqual([])
    const { actions, result } = await payOption(pay, paymentId, option.id, buyer)
    expect(methods(actions)).toEqual([[chains.solana, 'solana_signTransaction']])
    expect(result).toMatchObject({ status: 'succeeded', info: { txId: `test:${paymentId}` } })
  })

  it('pays the mixed EVM + Solana option: the EVM action kept, the build replaced in place', async () => {
    const paymentId = await sdk.env.pay('990')
    const buyer = createBuyer()
    const pay = sdk.client()
    const { options } = await optionsFor(pay, paymentId, [buyer.accounts.base, buyer.accounts.solana])
    const mixed = options.find((o) => o.account === buyer.accounts.solana && o.actions.length === 1)!
    expect(methods(mixed.actions)).toEqual([[chains.base, 'personal_sign']])
    // A second SDK instance holds no actions of the option: it fetches with empty data and gets them all.
    const fresh = await sdk.client().getRequiredPaymentActions({ paymentId, optionId: mixed.id })
    const { actions, result } = await payOption(pay, paymentId, mixed.id, buyer)
    const expected = [
      [chains.base, 'personal_sign'],
      [chains.solana, 'solana_signTransaction'],
    ]
    expect(methods(actions)).toEqual(expected)
    expect(methods(fresh)).toEqual(expected)
    expect(fresh[1]!.walletRpc.params).toBe(actions[1]!.walletRpc.params)
    expect(result).toMatchObject({ status: 'succeeded', info: { txId: `test:${paymentId}` } })
  })
})

describe('credentials', () => {
  it("pays with WalletKit's default app id (a 32-hex project id registered as an external test app)", async () => {
    const projectId = 'a1b2c3d4e5f60718293a4b5c6d7e8f90'
    await createAppId(sdk.env.t.db, {
      partnerId: await sdk.env.t.createPartner(),
      mode: 'test',
      externalId: projectId,
    })
    const paymentId = await sdk.env.pay('1250')
    const buyer = createBuyer()
    const pay = sdk.client({ appId: projectId })
    const { options } = await optionsFor(pay, paymentId, [buyer.accounts.base])
    const { result } = await payOption(pay, paymentId, options[0]!.id, buyer)
    expect(result).toMatchObject({ status: 'succeeded', info: { txId: `test:${paymentId}` } })
    await expect(
      optionsFor(sdk.client({ appId: 'f'.repeat(32) }), paymentId, [buyer.accounts.base]),
    ).rejects.toThrow('HTTP error: 401: Invalid App-Id.')
  })

  it('answers a payment link of its own public base URL, encoded whole by the SDK', async () => {
    const paymentId = await sdk.env.pay('1250')
    const buyer = createBuyer()
    const pay = sdk.client()
    const { options, paymentId: linked } = await optionsFor(pay, `${publicBaseUrl}/pay/${paymentId}`, [
      buyer.accounts.base,
    ])
    expect(options).toHaveLength(1)
    const { result } = await payOption(pay, linked, options[0]!.id, buyer)
    expect(result).toMatchObject({ status: 'succeeded', info: { txId: `test:${paymentId}` } })
    await expect(
      optionsFor(pay, `https://elsewhere.example/pay/${paymentId}`, [buyer.accounts.base]),
    ).rejects.toThrow(/^Payment not found: 404/)
  })
})

describe('an option behind the data form', () => {
  const identity = { fullName: 'Ada Lovelace', dateOfBirth: '1990-12-10', country: 'GB' }

  async function storedData(paymentId: string) {
    return sdk.env.t.db
      .selectFrom('collected_data')
      .select(['fields'])
      .where('payment_id', '=', paymentId)
      .executeTakeFirst()
  }

  it('lists the form fields by caipay field name, with the hosted form URL and its JSON Schema', async () => {
    const paymentId = await sdk.env.pay('100000')
    const buyer = createBuyer()
    const { options } = await optionsFor(sdk.client(), paymentId, [buyer.accounts.base])
    const collect = options[0]!.collectData!
    expect(collect.fields).toEqual([
      { id: 'fullName', name: 'Full name', required: true, fieldType: 'text' },
      { id: 'dateOfBirth', name: 'Date of birth', required: true, fieldType: 'date' },
      { id: 'country', name: 'Country of residence', required: true, fieldType: 'text' },
    ])
    expect(collect.url).toMatch(new RegExp(`/collect/${paymentId}\\?option=${options[0]!.id}$`))
    expect(JSON.parse(collect.schema!).required).toEqual(['fullName', 'dateOfBirth', 'country'])
  })

  it('pays after the hosted form was submitted', async () => {
    const paymentId = await sdk.env.pay('100000')
    const buyer = createBuyer()
    const pay = sdk.client()
    const { options } = await optionsFor(pay, paymentId, [buyer.accounts.base])
    const option = options[0]!
    const refused = pay.confirmPayment({
      paymentId,
      optionId: option.id,
      signatures: await signAll(buyer, option.actions),
    })
    await expect(refused).rejects.toThrow(/Invalid option: 400: Complete the data-collection form/)
    // What the hosted form posts (its optionId comes from the form URL).
    const optionId = new URL(option.collectData!.url!).searchParams.get('option')
    const form = await fetch(`${sdk.origin}/v1/gateway/payment/${paymentId}/collect-data`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ optionId, fields: identity }),
    })
    expect(form.status).toBe(200)
    const { result } = await payOption(pay, paymentId, option.id, buyer)
    expect(result).toMatchObject({ status: 'succeeded', info: { txId: `test:${paymentId}` } })
    expect((await storedData(paymentId))?.fields).toEqual(identity)
  })

  it('pays with collectedData sent in the confirm (a Solana option: fetched before the data came)', async () => {
    const paymentId = await sdk.env.pay('100000')
    const buyer = createBuyer()
    const pay = sdk.client()
    const { options } = await optionsFor(pay, paymentId, [buyer.accounts.solana])
    const option = options.find((o) => o.account === buyer.accounts.solana)!
    const actions = await pay.getRequiredPaymentActions({ paymentId, optionId: option.id })
    const signatures = await signAll(buyer, actions)
    const collectedData = Object.entries(identity).map(([id, value]) => ({ id, value }))
    const bad = pay.confirmPayment({
      paymentId,
      optionId: option.id,
      signatures,
      collectedData: collectedData.map((f) => (f.id === 'country' ? { ...f, value: 'Britain' } : f)),
    })
    await expect(bad).rejects.toThrow(
      'Invalid option: 400: Invalid request: fields.country: country must be a two-letter country code',
    )
    const result = await pay.confirmPayment({ paymentId, optionId: option.id, signatures, collectedData })
    expect(result).toMatchObject({ status: 'succeeded', info: { txId: `test:${paymentId}` } })
    expect((await storedData(paymentId))?.fields).toEqual(identity)
  })
})

describe('errors the SDK shows', () => {
  it('an unknown payment', async () => {
    const buyer = createBuyer()
    await expect(optionsFor(sdk.client(), 'pay_doesNotExist1', [buyer.accounts.base])).rejects.toThrow(
      'Payment not found: 404: Payment not found.',
    )
  })

  it('an expired payment', async () => {
    const { env } = sdk
    const paymentId = await env.pay('1250', 'iso4217/USD', { expiresAt: env.nowS() + 30 })
    const buyer = createBuyer()
    const pay = sdk.client()
    const { options } = await optionsFor(pay, paymentId, [buyer.accounts.base])
    env.t.advanceTime(31_000)
    const signatures = await signAll(buyer, options[0]!.actions)
    await expect(pay.confirmPayment({ paymentId, optionId: options[0]!.id, signatures })).rejects.toThrow(
      /^Payment expired: 410/,
    )
    await expect(optionsFor(pay, paymentId, [buyer.accounts.base])).rejects.toThrow(/^Payment expired: 410/)
  })

  it('a sanctioned account, with its message', async () => {
    const paymentId = await sdk.env.pay('1250')
    await expect(optionsFor(sdk.client(), paymentId, [sanctioned])).rejects.toThrow(
      'Invalid request: 400: This account cannot make payments.',
    )
  })

  it('a confirm whose answer was lost (503) is retried by the SDK and answered with the payment', async () => {
    const paymentId = await sdk.env.pay('1250')
    const buyer = createBuyer()
    const pay = sdk.client()
    const { options } = await optionsFor(pay, paymentId, [buyer.accounts.base])
    const option = options[0]!
    const signatures = await signAll(buyer, option.actions)
    // A fault between caipay and the wallet: the first confirm reaches caipay, its answer does not.
    const guarded = globalThis.fetch
    let confirms = 0
    globalThis.fetch = async (input, init) => {
      const response = await guarded(input, init)
      const url = input instanceof Request ? input.url : String(input)
      if (!url.endsWith('/confirm')) return response
      confirms += 1
      if (confirms > 1) return response
      const lost = new Response('', { status: 503 })
      // The SDK reads the answer's URL, which only fetch itself sets.
      Object.defineProperty(lost, 'url', { value: url })
      return lost
    }
    try {
      const result = await pay.confirmPayment({ paymentId, optionId: option.id, signatures })
      expect(result).toMatchObject({ status: 'succeeded', info: { txId: `test:${paymentId}` } })
    } finally {
      globalThis.fetch = guarded
    }
    expect(confirms).toBe(2)
    // Only the identical confirm is answered: other results for the paid payment are still refused.
    const other = await signAll(createBuyer(), option.actions)
    await expect(pay.confirmPayment({ paymentId, optionId: option.id, signatures: other })).rejects.toThrow(
      /Invalid option: 400: The payment is succeeded/,
    )
  })
})
