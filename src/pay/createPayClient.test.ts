import { describe, expect, it } from 'vitest'
import type { CancelResponse } from '../contract/index.js'
import {
  amount,
  build,
  evmAccount,
  evmAddress,
  evmSigner,
  option,
  rpc,
  scriptedGateway,
  solAccount,
  solanaSigner,
  solChain,
  statusSequence,
  usdcSol,
} from '../flow/testkit.js'
import { createPayClient } from './createPayClient.js'

const paymentId = 'pay_abc'
const link = `https://pay.example.com/pay/${paymentId}`
const instantPoll = { sleep: async () => undefined, jitter: 0 }
const attest = rpc('eip155:8453', 'personal_sign', ['0x68656c6c6f', evmAddress])
const solTx = rpc(solChain, 'solana_signTransaction', [{ transaction: 'AQID' }])
const mixed = option({
  id: 'opt_mixed',
  account: solAccount,
  amount: amount(`caip19/${usdcSol}`, '1000000'),
  actions: [attest, build('bld_1')],
})
const cancelled: CancelResponse = {
  paymentId,
  status: 'cancelled',
  cancelledAt: '2026-02-18T00:00:00Z',
  cancelledReason: 'cancelled_by_user',
}

function gatewayWith(options = [option(), mixed]) {
  return scriptedGateway({
    getOptions: async () => ({ options }),
    fetchActions: async () => ({ actions: [attest, solTx] }),
    confirm: async () => ({ status: 'processing', isFinal: false, pollInMs: 5 }),
    getStatus: statusSequence('succeeded'),
    cancel: async () => cancelled,
  })
}

function client(gateway = gatewayWith(), extra: { trustedHosts?: string[] } = {}) {
  const evm = evmSigner()
  const sol = solanaSigner()
  const pay = createPayClient({
    gateway,
    signers: [evm, sol],
    trustedHosts: ['pay.example.com'],
    poll: instantPoll,
    ...extra,
  })
  return { pay, gateway, evm, sol }
}

describe('createPayClient with an in-process gateway', () => {
  it('pays a link with the first option by default', async () => {
    const { pay, gateway, evm } = client()
    await expect(pay.pay(link)).resolves.toEqual({
      paymentId,
      status: 'succeeded',
      txId: 'test:pay_abc',
      optionAmount: option().amount,
    })
    expect(gateway.callsTo('getOptions')[0]!.slice(0, 2)).toEqual([
      paymentId,
      { accounts: [evmAccount, solAccount] },
    ])
    expect(evm.requests.map((r) => r.method)).toEqual(['eth_sendTransaction'])
  })

  it('lets the wallet choose the option', async () => {
    const { pay, gateway } = client()
    const seen: string[][] = []
    const result = await pay.pay(link, {
      selectOption: async (options) => {
        seen.push(options.map((o) => o.id))
        return 'opt_mixed'
      },
    })
    expect(result.optionAmount).toEqual(mixed.amount)
    expect(seen).toEqual([['opt_evm', 'opt_mixed']])
    expect(gateway.callsTo('confirm')[0]![1]).toEqual({
      optionId: 'opt_mixed',
      results: ['personal_sign#1', 'solana_signTransaction#1'],
    })
  })

  it('completes the data-collection form through onCollectData', async () => {
    const form = { url: 'https://pay.example.com/collect/pay_abc', schema: '{"required":["fullName"]}' }
    const { pay } = client(gatewayWith([option({ collectData: form })]))
    const urls: string[] = []
    const result = await pay.pay(link, {
      collectDataUrl: { prefill: { fullName: 'Ada' } },
      onCollectData: async ({ url }) => {
        urls.push(url)
        return '{"type":"IC_COMPLETE"}'
      },
    })
    expect(result.status).toBe('succeeded')
    expect(urls).toEqual([`${form.url}?prefill=eyJmdWxsTmFtZSI6IkFkYSJ9`])
  })

  it('cancels the payment when the user declines at option selection', async () => {
    const { pay, gateway } = client()
    const result = await pay.pay(link, { selectOption: () => Promise.reject({ code: 4001 }) })
    expect(result).toEqual({ paymentId, status: 'cancelled' })
    expect(gateway.callsTo('cancel')).toHaveLength(1)
  })

  it('rejects with no_options when nothing fits the wallet', async () => {
    const { pay, gateway } = client(gatewayWith([]))
    await expect(pay.pay(link)).rejects.toThrowError(expect.objectContaining({ code: 'no_options' }))
    expect(gateway.callsTo('cancel')).toEqual([])
  })

  it('returns the outcome of a payment that was already paid', async () => {
    const resultInfo = { txId: '0xpaid', optionAmount: option().amount }
    const gateway = scriptedGateway({ getOptions: async () => ({ options: [], resultInfo }) })
    const { pay } = client(gateway)
    await expect(pay.pay(link)).resolves.toMatchObject({ status: 'succeeded', txId: '0xpaid' })
  })

  it('refuses links to untrusted hosts before any call', async () => {
    const { pay, gateway } = client()
    await expect(pay.pay('https://evil.example.net/pay/pay_abc')).rejects.toThrowError(
      expect.objectContaining({ code: 'untrusted_host' }),
    )
    expect(gateway.calls).toEqual([])
    expect(pay.parseLink(paymentId)).toEqual({ paymentId, url: undefined })
  })

  it('stops on abort while the wallet is choosing', async () => {
    const { pay } = client()
    const controller = new AbortController()
    const paying = pay.pay(link, {
      signal: controller.signal,
      selectOption: () => new Promise<string>(() => undefined),
    })
    setTimeout(() => controller.abort(), 0)
    await expect(paying).rejects.toThrowError(expect.objectContaining({ code: 'aborted' }))
  })

  it('hands out the flow before it starts, and flows to drive by hand or resume', async () => {
    const { pay } = client()
    const states: string[] = []
    await pay.pay(link, { onFlow: (flow) => flow.on('state', ({ to }) => states.push(to)) })
    expect(states.at(-1)).toBe('succeeded')

    const flow = pay.createFlow(link)
    expect(flow.paymentId).toBe(paymentId)
    await flow.loadOptions()
    const resumed = pay.resumeFlow(flow.snapshot())
    expect(resumed.state).toBe('selecting')
    resumed.select('opt_evm')
    await expect(resumed.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it('refuses two signers for one namespace at creation', () => {
    expect(() =>
      createPayClient({ gateway: scriptedGateway(), signers: [evmSigner(), evmSigner()] }),
    ).toThrowError(expect.objectContaining({ code: 'invalid_signer' }))
  })
})

describe('createPayClient over HTTP', () => {
  function fakeService() {
    const requests: { method: string; url: string; headers: Record<string, string>; body: unknown }[] = []
    const fetch = async (url: string, init: RequestInit) => {
      const headers = init.headers as Record<string, string>
      requests.push({
        method: init.method!,
        url,
        headers,
        body: init.body ? JSON.parse(String(init.body)) : undefined,
      })
      const path = new URL(url).pathname
      const json = (body: unknown) =>
        new Response(JSON.stringify(body), { status: 200, headers: { 'content-type': 'application/json' } })
      if (path.includes('pay_missing')) {
        return new Response(JSON.stringify({ code: 'payment_not_found', message: 'no' }), { status: 404 })
      }
      if (path.endsWith('/options')) return json({ options: [option()] })
      if (path.endsWith('/confirm')) return json({ status: 'succeeded', isFinal: true, pollInMs: null })
      if (path.endsWith('/status'))
        return json({ status: 'succeeded', isFinal: true, pollInMs: null, txId: 'test:pay_abc' })
      return new Response(JSON.stringify({ code: 'internal_error', message: 'unexpected' }), { status: 500 })
    }
    return { fetch, requests }
  }

  it('authenticates with an API key, trusts the host of baseUrl, and pays', async () => {
    const service = fakeService()
    const pay = createPayClient({
      baseUrl: 'https://pay.example.com',
      apiKey: 'svc_test_key',
      fetch: service.fetch,
      sdk: { name: 'my-wallet', version: '1.2.3' },
      signers: [evmSigner()],
    })
    await expect(pay.pay(link)).resolves.toMatchObject({ status: 'succeeded', txId: 'test:pay_abc' })
    expect(service.requests.map((r) => `${r.method} ${r.url}`)).toEqual([
      'POST https://pay.example.com/v1/gateway/payment/pay_abc/options',
      'POST https://pay.example.com/v1/gateway/payment/pay_abc/confirm',
      'GET https://pay.example.com/v1/gateway/payment/pay_abc/status',
    ])
    expect(service.requests[0]!.headers).toMatchObject({ 'Api-Key': 'svc_test_key', 'Sdk-Name': 'my-wallet' })
    expect(service.requests[0]!.body).toEqual({ accounts: [evmAccount] })
    expect(service.requests[1]!.headers['Idempotency-Key']).toMatch(/^caipay-[0-9a-f]{32}-confirm-[0-9a-z]+$/)
    await expect(pay.pay('https://other.example.com/pay/pay_abc')).rejects.toThrowError(
      expect.objectContaining({ code: 'untrusted_host' }),
    )
  })

  it('authenticates with App-Id and Client-Id', async () => {
    const service = fakeService()
    const pay = createPayClient({
      baseUrl: 'https://pay.example.com',
      appId: 'app_1',
      clientId: 'client_1',
      fetch: service.fetch,
      signers: [evmSigner()],
      retry: { attempts: 1 },
    })
    await pay.pay(link)
    expect(service.requests[0]!.headers).toMatchObject({ 'App-Id': 'app_1', 'Client-Id': 'client_1' })
    expect(service.requests[0]!.headers['Api-Key']).toBeUndefined()
  })

  it('surfaces service errors by code', async () => {
    const service = fakeService()
    const pay = createPayClient({
      baseUrl: 'https://pay.example.com',
      apiKey: 'svc_test_key',
      fetch: service.fetch,
      signers: [],
    })
    await expect(pay.pay('pay_missing')).rejects.toThrowError(
      expect.objectContaining({ code: 'payment_not_found', status: 404 }),
    )
  })
})
