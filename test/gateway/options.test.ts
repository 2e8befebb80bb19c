import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { succeedPayment } from '../server/helpers.js'
import {
  type Buyer,
  chains,
  createBuyer,
  createGatewayEnv,
  type GatewayEnv,
  isSolanaOption,
  usdc,
} from './support.js'

const localToken = 'eip155:31337/erc20:0x5FbDB2315678afecb367f032d93F642f64180aa3'
const sanctioned = `eip155:8453:0x${'5a'.repeat(20)}`

let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv({
    config: {
      sanctioned: [sanctioned],
      chains: {
        'eip155:31337': {
          rpcUrl: 'http://127.0.0.1:1',
          signerKey: `0x${'11'.repeat(32)}`,
          assets: {
            [localToken]: { symbol: 'WETH', name: 'Wrapped Ether', decimals: 18, usdRate: '3000.5' },
          },
        },
      },
    },
  })
  buyer = createBuyer()
})
afterAll(() => env.t.close())

describe('GET /v1/gateway/payment/:id (row 18)', () => {
  it('returns what a wallet shows: amount with display, expiry, merchant', async () => {
    const paymentId = await env.pay('1250')
    const res = await env.gw('GET', paymentId)
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toMatchObject({
      paymentId,
      status: 'requires_action',
      amount: { unit: 'iso4217/USD', value: '1250', display: { assetSymbol: 'USD', decimals: 2 } },
      merchant: { name: 'Coffee Shop', iconUrl: null },
    })
    expect(res.json.expiresAt).toBeGreaterThan(env.nowS())
  })

  it('404 payment_not_found for an unknown id, 400 params_validation for a malformed one', async () => {
    expect((await env.gw('GET', 'pay_doesnotexist')).json.code).toBe('payment_not_found')
    const bad = await env.gw('GET', 'nope')
    expect(bad.statusCode).toBe(400)
    expect(bad.json.code).toBe('params_validation')
  })

  it('needs credentials; test and live never see each other', async () => {
    const paymentId = await env.pay()
    const anonymous = await env.t.request({ method: 'GET', url: `/v1/gateway/payment/${paymentId}` })
    expect([anonymous.statusCode, anonymous.json.code]).toEqual([401, 'missing_auth_headers'])
    const { apiKey: liveKey } = await env.t.createKey('live', 'wallet')
    const live = await env.gw('GET', paymentId, '', undefined, { 'api-key': liveKey })
    expect([live.statusCode, live.json.code]).toEqual([404, 'payment_not_found'])
  })
})

describe('GET /v1/gateway/payment/:id/status (row 19)', () => {
  it('polls while in flight, stops once final, and carries the txId of a success', async () => {
    const paymentId = await env.pay()
    const waiting = await env.gw('GET', paymentId, '/status')
    expect(waiting.json).toMatchObject({ status: 'requires_action', isFinal: false })
    expect(waiting.json.pollInMs).toBeGreaterThan(0)
    expect(waiting.json.txId).toBeUndefined()
    await succeedPayment(env.t, paymentId)
    const done = await env.gw('GET', paymentId, '/status')
    expect(done.json).toEqual({
      status: 'succeeded',
      isFinal: true,
      pollInMs: null,
      txId: `test:${paymentId}`,
    })
  })
})

describe('POST /v1/gateway/payment/:id/options (row 20)', () => {
  it('quotes every default test asset the accounts can pay, with info, eta and quote expiry', async () => {
    const paymentId = await env.pay('1250')
    const res = await env.gw('POST', paymentId, '/options', { accounts: Object.values(buyer.accounts) })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json.info).toMatchObject({ paymentId, status: 'requires_action' })
    const byAsset = res.json.options.map((o: PaymentOption) => [o.account, o.amount.unit, o.actions.length])
    expect(byAsset).toEqual([
      [buyer.accounts.ethereum, `caip19/${usdc.ethereum}`, 1],
      [buyer.accounts.base, `caip19/${usdc.base}`, 1],
      [buyer.accounts.solana, `caip19/${usdc.solana}`, 1],
      [buyer.accounts.solana, `caip19/${usdc.solana}`, 2],
    ])
    const now = env.nowS()
    for (const option of res.json.options) {
      expect(option.id).toMatch(/^opt_[A-Za-z0-9]{24}$/)
      expect(option.amount.value).toBe('12500000')
      expect(option.etaS).toBeGreaterThan(0)
      expect(option.expiresAt).toBeGreaterThan(now + 200)
      expect(option.expiresAt).toBeLessThanOrEqual(now + 301)
      expect(option.collectData).toBeUndefined()
    }
  })

  it('rule 1: an EVM-only wallet gets EVM options and no error', async () => {
    const paymentId = await env.pay()
    const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.accounts.base] })
    expect(res.statusCode).toBe(200)
    expect(res.json.options.map((o: PaymentOption) => o.account)).toEqual([buyer.accounts.base])
  })

  it('accounts on chains the service does not serve yield no option and no error', async () => {
    const paymentId = await env.pay()
    const res = await env.gw('POST', paymentId, '/options', {
      accounts: [`eip155:137:${buyer.evm.address}`, 'cosmos:cosmoshub-4:cosmos1abcdefghijklmnop'],
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json.options).toEqual([])
  })

  it('accounts are validated by the contract', async () => {
    const paymentId = await env.pay()
    const res = await env.gw('POST', paymentId, '/options', { accounts: ['eip155:1:not-an-address'] })
    expect([res.statusCode, res.json.code]).toEqual([400, 'params_validation'])
    expect(res.json.issues[0].path).toBe('body.accounts.0')
  })

  it('451 sanctioned_user for a configured account (any casing)', async () => {
    const paymentId = await env.pay()
    const res = await env.gw('POST', paymentId, '/options', {
      accounts: [buyer.accounts.base, sanctioned.replace('0x5a', '0x5A')],
    })
    expect([res.statusCode, res.json.code]).toEqual([451, 'sanctioned_user'])
  })

  it('a caip19 amount is payable only in that asset, 1:1', async () => {
    const paymentId = await env.pay('4200000', `caip19/${usdc.solana}`)
    const res = await env.gw('POST', paymentId, '/options', { accounts: Object.values(buyer.accounts) })
    expect(res.json.options.length).toBe(2)
    for (const o of res.json.options)
      expect(o.amount).toMatchObject({ unit: `caip19/${usdc.solana}`, value: '4200000' })
  })

  it('converts USD at the configured rate, rounding up, on a configured chain in test mode', async () => {
    const paymentId = await env.pay('1250')
    const res = await env.gw('POST', paymentId, '/options', {
      accounts: [`eip155:31337:${buyer.evm.address}`],
    })
    expect(res.json.options).toHaveLength(1)
    const expected = (1250n * 10n ** 18n * 10n + 100n * 30005n - 1n) / (100n * 30005n)
    expect(res.json.options[0].amount).toMatchObject({
      unit: `caip19/${localToken}`,
      value: expected.toString(),
      display: { assetSymbol: 'WETH', decimals: 18 },
    })
    const typed = JSON.parse(JSON.parse(res.json.options[0].actions[0].walletRpc.params)[1])
    expect(typed.domain.chainId).toBe(31337)
    expect(typed.message.value).toBe(expected.toString())
  })

  it('a quote never outlives the payment', async () => {
    const expiresAt = env.nowS() + 90
    const paymentId = await env.pay('100', 'iso4217/USD', { expiresAt })
    const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.accounts.base] })
    expect(res.json.options[0].expiresAt).toBe(expiresAt)
  })

  it('refresh re-quotes the named options in place (same id, new quote); unknown ids are refused', async () => {
    const paymentId = await env.pay()
    const first = await env.gw('POST', paymentId, '/options', {
      accounts: [buyer.accounts.base, buyer.accounts.solana],
    })
    const option = first.json.options[0]
    env.t.advanceTime(60_000)
    const refreshed = await env.gw('POST', paymentId, '/options', {
      accounts: [buyer.accounts.base],
      refresh: [option.id],
    })
    expect(refreshed.statusCode, refreshed.body).toBe(200)
    expect(refreshed.json.options).toHaveLength(1)
    expect(refreshed.json.options[0].id).toBe(option.id)
    expect(refreshed.json.options[0].expiresAt).toBeGreaterThanOrEqual(option.expiresAt + 60)
    expect(refreshed.json.options[0].actions[0].walletRpc.params).not.toBe(option.actions[0].walletRpc.params)
    const unknown = await env.gw('POST', paymentId, '/options', {
      accounts: [buyer.accounts.base],
      refresh: ['opt_nope'],
    })
    expect([unknown.statusCode, unknown.json.code]).toEqual([400, 'params_validation'])
  })

  it('a succeeded payment returns resultInfo and no options; other final states just no options', async () => {
    const paymentId = await env.pay()
    await succeedPayment(env.t, paymentId)
    const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.accounts.base] })
    expect(res.statusCode).toBe(200)
    expect(res.json.options).toEqual([])
    expect(res.json.info.status).toBe('succeeded')
    expect(res.json.resultInfo).toMatchObject({
      txId: `test:${paymentId}`,
      optionAmount: { unit: 'iso4217/USD' },
    })

    const cancelled = await env.pay()
    await env.gw('POST', cancelled, '/cancel')
    const res2 = await env.gw('POST', cancelled, '/options', { accounts: [buyer.accounts.base] })
    expect(res2.json.options).toEqual([])
    expect(res2.json.resultInfo).toBeUndefined()
  })

  it('410 payment_expired once the payment expired', async () => {
    const paymentId = await env.pay('100', 'iso4217/USD', { expiresAt: env.nowS() + 30 })
    env.t.advanceTime(31_000)
    const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.accounts.base] })
    expect([res.statusCode, res.json.code]).toEqual([410, 'payment_expired'])
    expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('expired')
  })

  it('serves the Solana mainnet chain id from the default config', async () => {
    expect(buyer.accounts.solana.startsWith(chains.solana)).toBe(true)
    // The test-mode Solana asset is quoted on mainnet's chain id, and the transaction built to sign is for it.
    const paymentId = await env.pay('100')
    const { option, actions } = await env.prepare(paymentId, buyer, isSolanaOption, [buyer.accounts.solana])
    expect([option.account, option.amount.unit]).toEqual([buyer.accounts.solana, `caip19/${usdc.solana}`])
    expect(option.amount.display).toMatchObject({ networkName: 'Solana' })
    expect(actions.map((a) => a.walletRpc.chainId)).toEqual([chains.solana])
  })
})
