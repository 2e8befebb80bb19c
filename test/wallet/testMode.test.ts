import type { AddressInfo } from 'node:net'
import { Keypair } from '@solana/web3.js'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { createPayClient, isPayError, type PaymentOption, type Signer } from '../../src/index.js'
import { chains, usdc } from '../gateway/support.js'
import { createTestServer, type TestServer } from '../server/harness.js'
import { createMerchant, createPayment } from '../server/helpers.js'

// The wallet library against the real server over real HTTP (127.0.0.1), in test mode, with the real
// viem and web3.js adapters: every payment ends succeeded with txId test:<paymentId>.

let t: TestServer
let baseUrl: string
let partnerKey: string
let walletKey: string
let merchantId: string

beforeAll(async () => {
  t = await createTestServer()
  await t.app.listen({ host: '127.0.0.1', port: 0 })
  baseUrl = `http://127.0.0.1:${(t.app.server.address() as AddressInfo).port}`
  partnerKey = (await t.createKey('test')).apiKey
  walletKey = (await t.createKey('test', 'wallet', await t.createPartner())).apiKey
  merchantId = await createMerchant(t, partnerKey)
})
afterAll(() => t.close())

let order = 0
async function newPayment(value = '1250'): Promise<string> {
  order += 1
  return createPayment(t, partnerKey, merchantId, {
    referenceId: `wallet-${order}`,
    amount: { unit: 'iso4217/USD', value },
  })
}

function buyerSigners(options: { evm?: boolean; solana?: boolean } = { evm: true, solana: true }) {
  const account = privateKeyToAccount(generatePrivateKey())
  const keypair = Keypair.generate()
  const signers: Signer[] = []
  // The RPC URL is never reached: test-mode options only ask for signatures.
  if (options.evm)
    signers.push(
      evmSigner({
        account,
        chains: {
          [chains.ethereum]: { rpcUrl: 'http://127.0.0.1:9' },
          [chains.base]: { rpcUrl: 'http://127.0.0.1:9' },
        },
      }),
    )
  if (options.solana) signers.push(solanaSigner({ keypair, chains: [chains.solana] }))
  return { account, keypair, signers }
}

function client(signers: Signer[]) {
  return createPayClient({ baseUrl, apiKey: walletKey, signers, poll: { deadlineMs: 10_000 } })
}

const byUnit = (unit: string) => (options: readonly PaymentOption[]) => {
  const option = options.find((o) => o.amount.unit === `caip19/${unit}` && o.actions.length === 1)
  if (!option) throw new Error(`no single-action option in ${unit}`)
  return option.id
}

describe('wallet library end to end, test mode', () => {
  it('pays an EVM gasless option: EIP-3009 typed data signed by viem', async () => {
    const paymentId = await newPayment()
    const { signers } = buyerSigners({ evm: true })
    const events: string[] = []
    const result = await client(signers).pay(`${baseUrl}/pay/${paymentId}`, {
      selectOption: byUnit(usdc.base),
      onFlow: (flow) => flow.on('state', ({ to }) => events.push(to)),
    })
    expect(result).toMatchObject({ paymentId, status: 'succeeded', txId: `test:${paymentId}` })
    expect(result.optionAmount).toMatchObject({ unit: `caip19/${usdc.base}`, value: '12500000' })
    // Test mode settles inside confirm (isFinal), so the flow has nothing to poll.
    expect(events).toEqual([
      'loadingOptions',
      'selecting',
      'fetchingActions',
      'signing',
      'confirming',
      'succeeded',
    ])
  })

  it('pays a Solana build option: the wallet returns the complete signed transaction', async () => {
    const paymentId = await newPayment('990')
    const { signers } = buyerSigners({ solana: true })
    const result = await client(signers).pay(paymentId, { selectOption: byUnit(usdc.solana) })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
    expect(result.optionAmount?.value).toBe('9900000')
  })

  it('pays the mixed option: EVM personal_sign, then the Solana transaction, results in that order', async () => {
    const paymentId = await newPayment()
    const { signers } = buyerSigners()
    const signed: { index: number; chainId: string; method: string }[] = []
    const result = await client(signers).pay(paymentId, {
      selectOption: (options) => {
        const mixed = options.find((o) => o.actions.length === 2)
        if (!mixed) throw new Error('no mixed option')
        return mixed.id
      },
      onFlow: (flow) => flow.on('action', (e) => e.phase === 'signed' && signed.push(e)),
    })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
    expect(signed.map((s) => [s.index, s.method])).toEqual([
      [0, 'personal_sign'],
      [1, 'solana_signTransaction'],
    ])
  })

  it('a wallet with only EVM keys advertises no Solana account and still gets options', async () => {
    const paymentId = await newPayment()
    const { signers } = buyerSigners({ evm: true })
    const flow = client(signers).createFlow(paymentId)
    const { options } = await flow.loadOptions()
    expect(flow.accounts.every((a) => a.startsWith('eip155:'))).toBe(true)
    expect(options.length).toBeGreaterThan(0)
    expect(options.every((o) => o.account.startsWith('eip155:'))).toBe(true)
  })

  it('the signing guard refuses an option whose typed data moves more than the option amount', async () => {
    const paymentId = await newPayment()
    const { signers } = buyerSigners({ evm: true })
    const [evm] = signers
    let signedCount = 0
    const counting: Signer = {
      ...evm!,
      request: async (r) => {
        signedCount += 1
        return evm!.request(r)
      },
    }
    const pay = createPayClient({
      baseUrl,
      apiKey: walletKey,
      signers: [counting],
      fetch: async (input, init) => {
        const response = await fetch(input, init)
        if (!input.endsWith('/options')) return response
        // A compromised or buggy service: the typed data asks for 10x the option amount.
        const body = await response.json()
        for (const option of body.options) {
          const action = option.actions[0]
          const [address, typed] = JSON.parse(action.walletRpc.params)
          const data = JSON.parse(typed)
          data.message.value = (BigInt(data.message.value) * 10n).toString()
          action.walletRpc.params = JSON.stringify([address, JSON.stringify(data)])
        }
        return new Response(JSON.stringify(body), {
          status: 200,
          headers: { 'content-type': 'application/json' },
        })
      },
    })
    const error = await pay.pay(paymentId, { selectOption: byUnit(usdc.base) }).catch((e) => e)
    expect(isPayError(error, 'action_rejected')).toBe(true)
    expect(signedCount).toBe(0)
    const status = await t.request({
      method: 'GET',
      url: `/v1/payments/${paymentId}/status`,
      headers: { 'api-key': partnerKey, 'merchant-id': merchantId },
    })
    expect(status.json.status).toBe('requires_action')
  })

  it('completes the hosted data-collection form before fetching, when the option asks for it', async () => {
    const paymentId = await newPayment('250000')
    const { signers } = buyerSigners({ evm: true })
    const forms: { url: string; schema?: string }[] = []
    const result = await client(signers).pay(paymentId, {
      selectOption: byUnit(usdc.base),
      collectDataUrl: { prefill: { fullName: 'Grace Hopper' }, theme: 'dark' },
      onCollectData: async (request) => {
        forms.push(request)
        // What the hosted page does when the buyer presses Continue: submit, then post IC_COMPLETE.
        const url = new URL(request.url)
        const submitted = await fetch(`${baseUrl}/v1/gateway/payment/${paymentId}/collect-data`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({
            optionId: url.searchParams.get('option'),
            fields: { fullName: 'Grace Hopper', dateOfBirth: '1906-12-09', country: 'US' },
          }),
        })
        expect(submitted.status).toBe(200)
        return JSON.stringify({ type: 'IC_COMPLETE' })
      },
    })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
    expect(forms).toHaveLength(1)
    const url = new URL(forms[0]!.url)
    expect(url.searchParams.get('theme')).toBe('dark')
    expect(JSON.parse(Buffer.from(url.searchParams.get('prefill')!, 'base64url').toString())).toEqual({
      fullName: 'Grace Hopper',
    })
    expect(JSON.parse(forms[0]!.schema!).required).toEqual(
      expect.arrayContaining(['fullName', 'dateOfBirth', 'country']),
    )
  })

  it('a user rejection cancels the payment on the gateway', async () => {
    const paymentId = await newPayment()
    const rejecting: Signer = {
      namespace: 'eip155',
      methods: ['eth_signTypedData_v4'],
      accounts: () => [`${chains.base}:0x1111111111111111111111111111111111111111`],
      inspect: () => ({
        account: `${chains.base}:0x1111111111111111111111111111111111111111`,
        transfers: [],
      }),
      request: async () => {
        throw Object.assign(new Error('User rejected the request.'), { code: 4001 })
      },
    }
    const result = await client([rejecting])
      .pay(paymentId, { selectOption: byUnit(usdc.base) })
      .catch((e) => e)
    const status = await t.request({
      method: 'GET',
      url: `/v1/payments/${paymentId}/status`,
      headers: { 'api-key': partnerKey, 'merchant-id': merchantId },
    })
    expect(status.json).toMatchObject({ status: 'cancelled', isFinal: true })
    expect(isPayError(result) ? result.code : result.status).toMatch(/user_rejected|cancelled/)
  })
})
