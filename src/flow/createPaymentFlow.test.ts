import { describe, expect, it } from 'vitest'
import type { Signer } from '../actions/types.js'
import type { GatewayApi } from '../client/gatewayApi.js'
import type { CancelResponse, OptionsResponse, PaymentOption } from '../contract/index.js'
import { PayError } from '../errors/PayError.js'
import {
  createPaymentFlow,
  type PaymentFlow,
  type PaymentFlowOptions,
  resumePaymentFlow,
} from './createPaymentFlow.js'
import type { FlowSnapshot } from './snapshot.js'
import { flowStates, flowTransitions } from './states.js'
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
  usdcBase,
  usdcSol,
} from './testkit.js'
import type { FlowEvents } from './types.js'

// --- fixtures --------------------------------------------------------------------------------------

const paymentId = 'pay_abc'
const instantPoll = { sleep: async () => undefined, jitter: 0 }
const processing = { status: 'processing' as const, isFinal: false, pollInMs: 10 }
const cancelled: CancelResponse = {
  paymentId,
  status: 'cancelled',
  cancelledAt: '2026-02-18T00:00:00Z',
  cancelledReason: 'cancelled_by_user',
}
const attest = rpc('eip155:8453', 'personal_sign', ['0x68656c6c6f', evmAddress])
const solTx = rpc(solChain, 'solana_signTransaction', [{ transaction: 'AQID' }])
const mixed = option({
  id: 'opt_mixed',
  account: solAccount,
  amount: amount(`caip19/${usdcSol}`, '1000000'),
  actions: [attest, build('bld_1')],
})
const form = {
  url: 'https://pay.example/collect/pay_abc',
  schema: JSON.stringify({ required: ['fullName'] }),
}
const withForm = option({ id: 'opt_form', collectData: form })

const never = () => new Promise<never>(() => undefined)

// Every transition any flow in this file makes; the last test checks the table is covered.
const seen = new Set<string>()

type Recorded = { [K in keyof FlowEvents]: [K, Parameters<FlowEvents[K]>[0]] }[keyof FlowEvents]

function watch(flow: PaymentFlow) {
  const events: Recorded[] = []
  const names = ['state', 'options', 'collectData', 'action', 'status', 'final', 'error', 'snapshot'] as const
  for (const name of names) {
    const record = (payload: unknown) => {
      events.push([name, payload] as Recorded)
    }
    flow.on(name, record as never)
  }
  flow.on('state', ({ from, to }) => seen.add(`${from}->${to}`))
  return {
    events,
    of<K extends keyof FlowEvents>(name: K): Parameters<FlowEvents[K]>[0][] {
      return events.filter((e) => e[0] === name).map((e) => e[1]) as Parameters<FlowEvents[K]>[0][]
    },
    states: () => events.filter((e) => e[0] === 'state').map((e) => (e[1] as { to: string }).to),
    errorCodes: () => events.filter((e) => e[0] === 'error').map((e) => (e[1] as PayError).code),
  }
}

interface Setup {
  options?: PaymentOption[]
  response?: Partial<OptionsResponse>
  gateway?: Partial<GatewayApi>
  signers?: Signer[]
  flow?: Partial<PaymentFlowOptions>
}

function setup(s: Setup = {}) {
  const evm = evmSigner()
  const sol = solanaSigner()
  const gateway = scriptedGateway({
    getOptions: async () => ({ options: s.options ?? [option(), mixed], ...s.response }),
    fetchActions: async () => ({ actions: [attest, solTx] }),
    confirm: async () => processing,
    getStatus: statusSequence('processing', 'succeeded'),
    cancel: async () => cancelled,
    ...s.gateway,
  })
  const flow = createPaymentFlow({
    gateway,
    paymentId,
    signers: s.signers ?? [evm, sol],
    poll: instantPoll,
    ...s.flow,
  })
  return { flow, gateway, evm, sol, ...watch(flow) }
}

async function ready(flow: PaymentFlow, optionId: string) {
  await flow.loadOptions()
  flow.select(optionId)
}

const code = (c: string, context?: Record<string, unknown>) =>
  expect.objectContaining({ code: c, ...(context && { context: expect.objectContaining(context) }) })

// --- loading options ---------------------------------------------------------------------------------

describe('loadOptions', () => {
  it("advertises the signers' accounts and moves to selecting", async () => {
    const { flow, gateway, of } = setup()
    const loaded = await flow.loadOptions()
    expect(gateway.callsTo('getOptions')).toEqual([
      [paymentId, { accounts: [evmAccount, solAccount] }, { signal: expect.any(AbortSignal) }],
    ])
    expect(loaded.options.map((o) => o.id)).toEqual(['opt_evm', 'opt_mixed'])
    expect(loaded.result).toBeUndefined()
    expect(flow.state).toBe('selecting')
    expect(flow.accounts).toEqual([evmAccount, solAccount])
    expect(of('options')).toEqual([{ options: loaded.options }])
  })

  it('with nothing signable advertises no accounts and takes an empty option list without error', async () => {
    const { flow, gateway, errorCodes } = setup({ signers: [], options: [] })
    await expect(flow.loadOptions()).resolves.toEqual({ options: [] })
    expect(gateway.callsTo('getOptions')[0]![1]).toEqual({ accounts: [] })
    expect(flow.state).toBe('selecting')
    expect(errorCodes()).toEqual([])
  })

  it('ends succeeded when the payment was already paid (resultInfo)', async () => {
    const resultInfo = { txId: '0xpaid', optionAmount: option().amount }
    const { flow, of } = setup({ options: [], response: { resultInfo } })
    const loaded = await flow.loadOptions()
    const result = { paymentId, status: 'succeeded', txId: '0xpaid', optionAmount: option().amount }
    expect(loaded.result).toEqual(result)
    expect(flow.state).toBe('succeeded')
    expect(of('final')).toEqual([result])
    await expect(flow.execute()).resolves.toEqual(result)
  })

  it('ends in the final status the payment info reports', async () => {
    const info = {
      paymentId,
      status: 'expired' as const,
      amount: amount('iso4217/USD', '100'),
      expiresAt: 1,
      merchant: { name: 'Shop', iconUrl: null },
    }
    const { flow } = setup({ options: [], response: { info } })
    const loaded = await flow.loadOptions()
    expect(loaded.result).toEqual({ paymentId, status: 'expired' })
    expect(loaded.info).toEqual(info)
    expect(flow.state).toBe('expired')
  })

  it('ends expired on payment_expired', async () => {
    const expired = new PayError({ code: 'payment_expired', message: 'gone', status: 410 })
    const { flow, of } = setup({ gateway: { getOptions: () => Promise.reject(expired) } })
    await expect(flow.loadOptions()).resolves.toEqual({
      options: [],
      result: { paymentId, status: 'expired' },
    })
    expect(of('final')).toEqual([{ paymentId, status: 'expired' }])
  })

  it('ends failed and rejects when the gateway fails', async () => {
    const notFound = new PayError({ code: 'payment_not_found', message: 'no', status: 404 })
    const { flow, of } = setup({ gateway: { getOptions: () => Promise.reject(notFound) } })
    await expect(flow.loadOptions()).rejects.toBe(notFound)
    expect(flow.state).toBe('failed')
    expect(of('error')).toEqual([notFound])
    expect(of('final')).toEqual([])
  })

  it('wraps a foreign gateway error so callers can still narrow by code', async () => {
    const { flow } = setup({ gateway: { getOptions: () => Promise.reject(new TypeError('boom')) } })
    await expect(flow.loadOptions()).rejects.toThrowError(code('internal_error'))
  })

  it('loads only once', async () => {
    const { flow } = setup()
    await flow.loadOptions()
    await expect(flow.loadOptions()).rejects.toThrowError(code('invalid_transition', { from: 'selecting' }))
    expect(flow.state).toBe('selecting')
  })
})

// --- selecting ---------------------------------------------------------------------------------------

describe('select', () => {
  it('refuses an unknown option and leaves the state alone', async () => {
    const { flow } = setup()
    await flow.loadOptions()
    expect(() => flow.select('opt_nope')).toThrowError(code('unknown_option', { optionId: 'opt_nope' }))
    expect(flow.state).toBe('selecting')
  })

  it('refuses to select before options are loaded', () => {
    const { flow } = setup()
    expect(() => flow.select('opt_evm')).toThrowError(code('invalid_transition', { from: 'idle' }))
  })

  it('opens the form of an option that collects data', async () => {
    const { flow, of } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    expect(flow.state).toBe('collectingData')
    expect(flow.collectData).toEqual(form)
    expect(flow.collectDataReady).toBe(false)
    expect(of('collectData')).toEqual([form])
  })

  it("applies the response's payment-wide form to options without their own", async () => {
    const { flow } = setup({ options: [option()], response: { collectData: { url: form.url } } })
    await ready(flow, 'opt_evm')
    expect(flow.state).toBe('collectingData')
    expect(flow.collectData).toEqual({ url: form.url })
  })

  it('goes back to selecting when the user picks an option without a form', async () => {
    const { flow, states } = setup({ options: [withForm, option()] })
    await ready(flow, 'opt_form')
    flow.select('opt_evm')
    expect(flow.state).toBe('selecting')
    expect(flow.selectedOption?.id).toBe('opt_evm')
    expect(states()).toEqual(['loadingOptions', 'selecting', 'collectingData', 'selecting'])
  })

  it('refuses to execute before an option is chosen, without ending the flow', async () => {
    const { flow } = setup()
    await expect(flow.execute()).rejects.toThrowError(code('invalid_transition', { from: 'idle' }))
    await flow.loadOptions()
    await expect(flow.execute()).rejects.toThrowError(code('invalid_transition', { from: 'selecting' }))
    expect(flow.state).toBe('selecting')
  })
})

// --- the happy path ------------------------------------------------------------------------------------

describe('execute', () => {
  it('signs, confirms and polls to succeeded, emitting every step', async () => {
    const { flow, gateway, evm, of, states } = setup()
    await ready(flow, 'opt_evm')
    const result = await flow.execute()

    expect(result).toEqual({
      paymentId,
      status: 'succeeded',
      txId: 'test:pay_abc',
      optionAmount: option().amount,
    })
    expect(states()).toEqual([
      'loadingOptions',
      'selecting',
      'fetchingActions',
      'signing',
      'confirming',
      'polling',
      'succeeded',
    ])
    expect(evm.requests).toEqual([
      {
        chainId: 'eip155:8453',
        method: 'eth_sendTransaction',
        params: [{ from: evmAddress, to: '0x2222222222222222222222222222222222222222' }],
        followedByMore: false,
        signal: expect.any(AbortSignal),
      },
    ])
    // No build action: nothing to fetch.
    expect(gateway.callsTo('fetchActions')).toEqual([])
    expect(gateway.callsTo('confirm')).toEqual([
      [
        paymentId,
        { optionId: 'opt_evm', results: ['eth_sendTransaction#1'] },
        {
          signal: expect.any(AbortSignal),
          idempotencyKey: expect.stringMatching(`^caipay-${flow.flowId}-confirm-[0-9a-z]+$`),
        },
      ],
    ])
    expect(of('action')).toEqual([
      { index: 0, count: 1, chainId: 'eip155:8453', method: 'eth_sendTransaction', phase: 'start' },
      {
        index: 0,
        count: 1,
        chainId: 'eip155:8453',
        method: 'eth_sendTransaction',
        phase: 'signed',
        result: 'eth_sendTransaction#1',
      },
    ])
    expect(of('status')).toEqual([
      processing,
      { status: 'processing', isFinal: false, pollInMs: 500 },
      { status: 'succeeded', isFinal: true, pollInMs: null },
    ])
    expect(of('final')).toEqual([result])
    expect(of('error')).toEqual([])
    expect(flow.result).toEqual(result)
  })

  it('returns the same promise to concurrent callers, and the result once ended', async () => {
    const { flow, gateway } = setup()
    await ready(flow, 'opt_evm')
    const first = flow.execute()
    expect(flow.execute()).toBe(first)
    const result = await first
    await expect(flow.execute()).resolves.toBe(result)
    expect(gateway.callsTo('confirm')).toHaveLength(1)
  })

  it('ends at once when confirm is already final, reading the txId from status', async () => {
    const { flow, states } = setup({
      gateway: {
        confirm: async () => ({ status: 'succeeded', isFinal: true, pollInMs: null }),
        getStatus: statusSequence('succeeded'),
      },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded', txId: 'test:pay_abc' })
    expect(states().slice(-2)).toEqual(['confirming', 'succeeded'])
  })

  it.each(['failed', 'expired', 'cancelled'] as const)(
    'resolves with a %s payment reported by polling',
    async (status) => {
      const { flow, of } = setup({ gateway: { getStatus: statusSequence('processing', status) } })
      await ready(flow, 'opt_evm')
      await expect(flow.execute()).resolves.toEqual({ paymentId, status })
      expect(flow.state).toBe(status)
      expect(of('final')).toEqual([{ paymentId, status }])
    },
  )

  it('resolves with a failed payment reported by confirm', async () => {
    const { flow } = setup({
      gateway: { confirm: async () => ({ status: 'failed', isFinal: true, pollInMs: null }) },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toEqual({ paymentId, status: 'failed' })
  })

  it('carries on from the actual status when confirm says the payment already moved (invalid_state)', async () => {
    const conflict = new PayError({ code: 'invalid_state', message: 'not requires_action', status: 409 })
    const { flow } = setup({
      gateway: {
        confirm: () => Promise.reject(conflict),
        getStatus: statusSequence('processing', 'succeeded'),
      },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it('fails on invalid_state when the payment still awaits action', async () => {
    const conflict = new PayError({ code: 'invalid_state', message: 'x', status: 409 })
    const { flow } = setup({
      gateway: { confirm: () => Promise.reject(conflict), getStatus: statusSequence('requires_action') },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).rejects.toBe(conflict)
    expect(flow.state).toBe('failed')
  })

  it('fails when confirm is refused, and ends expired when the payment expired meanwhile', async () => {
    const refused = new PayError({ code: 'params_validation', message: 'bad', status: 400 })
    const a = setup({ gateway: { confirm: () => Promise.reject(refused) } })
    await ready(a.flow, 'opt_evm')
    await expect(a.flow.execute()).rejects.toBe(refused)
    expect(a.states().slice(-2)).toEqual(['confirming', 'failed'])

    const expired = new PayError({ code: 'payment_expired', message: 'late', status: 410 })
    const b = setup({ gateway: { confirm: () => Promise.reject(expired) } })
    await ready(b.flow, 'opt_evm')
    await expect(b.flow.execute()).resolves.toEqual({ paymentId, status: 'expired' })
    expect(b.states().slice(-2)).toEqual(['confirming', 'expired'])
  })

  it('fails on poll_timeout at the deadline (injected clock)', async () => {
    let now = 0
    const sleep = async (ms: number) => {
      now += ms
    }
    const poll = { now: () => now, sleep, deadlineMs: 95, jitter: 0 }
    const { flow, of, states } = setup({
      gateway: { getStatus: statusSequence('processing') },
      flow: { poll },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).rejects.toThrowError(code('poll_timeout', { deadlineMs: 95 }))
    expect(states().slice(-2)).toEqual(['polling', 'failed'])
    // confirm's status, then reads at 10, 510 (cut to the deadline, 95)
    expect(of('status')).toHaveLength(3)
  })
})

// --- fetching, routing and results -----------------------------------------------------------------------

describe('actions', () => {
  it('signs a mixed EVM + Solana option in order and confirms one result per resolved action', async () => {
    const { flow, gateway, evm, sol } = setup()
    await ready(flow, 'opt_mixed')
    await flow.execute()
    expect(gateway.callsTo('fetchActions')).toEqual([
      [paymentId, { optionId: 'opt_mixed', data: 'bld_1' }, { signal: expect.any(AbortSignal) }],
    ])
    expect(evm.requests.map((r) => [r.method, r.followedByMore])).toEqual([['personal_sign', true]])
    expect(sol.requests.map((r) => [r.method, r.params, r.followedByMore])).toEqual([
      ['solana_signTransaction', [{ transaction: 'AQID' }], false],
    ])
    expect(gateway.callsTo('confirm')[0]![1]).toEqual({
      optionId: 'opt_mixed',
      results: ['personal_sign#1', 'solana_signTransaction#1'],
    })
  })

  it('builds and signs again when the quote expired before confirm, then confirms the new results', async () => {
    let confirms = 0
    let builds = 0
    const { flow, gateway, states } = setup({
      gateway: {
        fetchActions: async () => {
          builds += 1
          return {
            actions: [attest, rpc(solChain, 'solana_signTransaction', [{ transaction: `AQI${builds}` }])],
          }
        },
        confirm: async () => {
          confirms += 1
          if (confirms === 1)
            throw new PayError({ code: 'quote_expired', message: 'Blockhash expired.', status: 422 })
          return processing
        },
      },
    })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(gateway.callsTo('fetchActions')).toHaveLength(2)
    const [first, second] = gateway.callsTo('confirm')
    expect(first![1]).not.toEqual(second![1])
    // A different body needs a different idempotency key, or the service would refuse it as a conflict.
    expect((first![2] as { idempotencyKey: string }).idempotencyKey).not.toBe(
      (second![2] as { idempotencyKey: string }).idempotencyKey,
    )
    expect(states()).toContain('fetchingActions')
  })

  it('does not rebuild an option whose wallet already broadcast, nor loop forever', async () => {
    const expired = async () => {
      throw new PayError({ code: 'quote_expired', message: 'Quote expired.', status: 422 })
    }
    const { flow, gateway } = setup({ gateway: { confirm: expired } })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).rejects.toThrowError(code('quote_expired'))
    expect(gateway.callsTo('fetchActions')).toHaveLength(3)
    const sent = option({
      id: 'opt_send',
      actions: [
        rpc('eip155:8453', 'eth_sendTransaction', [{ from: evmAddress, to: evmAddress, value: '0x0' }]),
      ],
    })
    const other = setup({ options: [sent], gateway: { confirm: expired } })
    await ready(other.flow, 'opt_send')
    await expect(other.flow.execute()).rejects.toThrowError(code('quote_expired'))
    expect(other.gateway.callsTo('confirm')).toHaveLength(1)
  })

  it('keeps results in action order when one build expands into several actions', async () => {
    const solTx2 = rpc(solChain, 'solana_signTransaction', [{ transaction: 'BAUG' }])
    const { flow, gateway } = setup({
      gateway: { fetchActions: async () => ({ actions: [attest, solTx, solTx2] }) },
    })
    await ready(flow, 'opt_mixed')
    await flow.execute()
    expect(gateway.callsTo('confirm')[0]![1]).toEqual({
      optionId: 'opt_mixed',
      results: ['personal_sign#1', 'solana_signTransaction#1', 'solana_signTransaction#2'],
    })
  })

  it.each([
    ['unsupported_namespace', rpc('cosmos:cosmoshub-4', 'cosmos_signDirect'), undefined],
    ['unsupported_method', rpc('eip155:8453', 'eth_sign'), undefined],
    ['missing_signer', solTx, 'evm-only'],
    [
      'invalid_action',
      { type: 'walletRpc' as const, walletRpc: { ...attest.walletRpc, params: '{"a":1}' } },
      undefined,
    ],
  ] as const)('fails with %s before signing anything and never confirms', async (errorCode, bad, signers) => {
    const evm = evmSigner()
    const opt = option({ id: 'opt_bad', actions: [attest, bad] })
    const { flow, gateway, of } = setup({
      options: [opt],
      ...(signers && { signers: [evm] }),
      ...(!signers && { signers: [evm, solanaSigner()] }),
    })
    await ready(flow, 'opt_bad')
    await expect(flow.execute()).rejects.toThrowError(code(errorCode, { index: 1 }))
    expect(flow.state).toBe('failed')
    expect(evm.requests).toEqual([])
    expect(gateway.callsTo('confirm')).toEqual([])
    expect(of('error').map((e) => e.code)).toEqual([errorCode])
  })

  it('fails with signer_failed when a signer throws or returns nothing', async () => {
    for (const answer of [
      () => {
        throw new Error('insufficient funds')
      },
      () => '',
    ]) {
      const { flow, gateway } = setup({ signers: [evmSigner({ answer })] })
      await ready(flow, 'opt_evm')
      await expect(flow.execute()).rejects.toThrowError(code('signer_failed', { index: 0 }))
      expect(gateway.callsTo('confirm')).toEqual([])
    }
  })

  it('fails (fetchingActions -> failed) when fetch fails, and ends expired on payment_expired', async () => {
    const broken = new PayError({ code: 'network_error', message: 'offline' })
    const a = setup({ gateway: { fetchActions: () => Promise.reject(broken) } })
    await ready(a.flow, 'opt_mixed')
    await expect(a.flow.execute()).rejects.toBe(broken)
    expect(a.states().slice(-2)).toEqual(['fetchingActions', 'failed'])

    const expired = new PayError({ code: 'payment_expired', message: 'late' })
    const b = setup({ gateway: { fetchActions: () => Promise.reject(expired) } })
    await ready(b.flow, 'opt_mixed')
    await expect(b.flow.execute()).resolves.toEqual({ paymentId, status: 'expired' })
    expect(b.states().slice(-2)).toEqual(['fetchingActions', 'expired'])
  })
})

// --- the signing guard ---------------------------------------------------------------------------------

describe('signing guard', () => {
  const usdc = `caip19/${usdcBase}`
  const transfer = (asset: string, value: bigint) => ({ asset, amount: value })

  it.each([
    ['wrong chain', rpc('eip155:1', 'eth_sendTransaction'), evmAccount, [transfer(usdcBase, 1n)]],
    [
      'wrong account',
      rpc('eip155:8453', 'eth_sendTransaction'),
      'eip155:8453:0x9999999999999999999999999999999999999999',
      [],
    ],
    [
      'wrong asset',
      rpc('eip155:8453', 'eth_sendTransaction'),
      evmAccount,
      [transfer('eip155:8453/erc20:0x50c5725949A6F0c72E6C4a641F24049A917DB0Cb', 1n)],
    ],
    [
      'amount over the option amount',
      rpc('eip155:8453', 'eth_sendTransaction'),
      evmAccount,
      [transfer(usdcBase, 1_000_001n)],
    ],
  ] as const)(
    'rejects %s with action_rejected; nothing is signed or confirmed',
    async (_, action, account, transfers) => {
      const evm = evmSigner({ inspect: () => ({ account, transfers }) })
      // A harmless action first: the guard checks the whole option before the first signature.
      const opt = option({ id: 'opt_g', amount: amount(usdc, '1000000'), actions: [attest, action] })
      const { flow, gateway, states } = setup({ options: [opt], signers: [evm] })
      await ready(flow, 'opt_g')
      await expect(flow.execute()).rejects.toThrowError(code('action_rejected'))
      expect(evm.requests).toEqual([])
      expect(gateway.callsTo('confirm')).toEqual([])
      expect(states().slice(-2)).toEqual(['signing', 'failed'])
    },
  )

  it("accepts the option's own transfer (EVM hex in any case)", async () => {
    const evm = evmSigner({
      inspect: () => ({ account: evmAccount, transfers: [transfer(usdcBase.toLowerCase(), 1_000_000n)] }),
    })
    const { flow } = setup({ signers: [evm] })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it("guard: 'off' signs what it is given", async () => {
    const evm = evmSigner({
      inspect: () => ({ account: evmAccount, transfers: [transfer(usdcBase, 5_000_000n)] }),
    })
    const { flow } = setup({ signers: [evm], flow: { guard: 'off' } })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(evm.requests).toHaveLength(1)
  })
})

// --- data collection -----------------------------------------------------------------------------------

describe('collect data', () => {
  it('needs IC_COMPLETE before fetching; then proceeds', async () => {
    const { flow, gateway, states } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    await expect(flow.execute()).rejects.toThrowError(code('invalid_transition', { from: 'collectingData' }))
    expect(flow.state).toBe('collectingData')

    const url = flow.collectDataUrl({ prefill: { fullName: 'Ada', phone: '1' }, theme: 'light' })
    expect(url).toBe(`${form.url}?prefill=eyJmdWxsTmFtZSI6IkFkYSJ9&theme=light`)
    expect(flow.completeCollectData('{"type":"IC_COMPLETE"}')).toEqual({ type: 'complete' })
    expect(flow.collectDataReady).toBe(true)
    expect(flow.state).toBe('collectingData')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(states()).toContain('fetchingActions')
    expect(gateway.callsTo('confirm')).toHaveLength(1)
  })

  it('reports IC_ERROR as collect_data_failed and stays for a retry', async () => {
    const { flow, of } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    expect(flow.completeCollectData({ type: 'IC_ERROR', error: 'Country is invalid.' })).toEqual({
      type: 'error',
      error: 'Country is invalid.',
    })
    expect(of('error')).toEqual([code('collect_data_failed', { error: 'Country is invalid.' })])
    expect(flow.state).toBe('collectingData')
    expect(flow.collectDataReady).toBe(false)

    flow.completeCollectData({ type: 'IC_COMPLETE' })
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it('can be cancelled while the form is open', async () => {
    const { flow, gateway, states } = setup({ options: [withForm] })
    await ready(flow, 'opt_form')
    await expect(flow.cancel()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(gateway.callsTo('cancel')).toHaveLength(1)
    expect(states().slice(-2)).toEqual(['collectingData', 'cancelled'])
  })

  it('ignores messages that are not the form, and refuses form messages when no form is open', async () => {
    const { flow } = setup({ options: [withForm, option()] })
    await ready(flow, 'opt_form')
    expect(flow.completeCollectData({ type: 'webpackOk' })).toBeUndefined()
    expect(flow.completeCollectData('hello')).toBeUndefined()
    expect(flow.collectDataReady).toBe(false)
    flow.select('opt_evm')
    expect(() => flow.completeCollectData('IC_COMPLETE')).toThrowError(code('invalid_transition'))
    expect(() => flow.collectDataUrl()).toThrowError(code('collect_data_failed'))
  })

  it('does not ask twice for a form already completed when the user switches back', async () => {
    const { flow } = setup({ options: [withForm, option()] })
    await ready(flow, 'opt_form')
    flow.completeCollectData('IC_COMPLETE')
    flow.select('opt_evm')
    flow.select('opt_form')
    expect(flow.state).toBe('selecting')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
  })

  it('drives the form through onCollectData, retrying after IC_ERROR with its text', async () => {
    const requests: unknown[] = []
    const answers = [{ type: 'IC_ERROR', error: 'Enter a valid date.' }, 'garbage', '{"type":"IC_COMPLETE"}']
    const { flow } = setup({
      options: [withForm],
      flow: {
        onCollectData: async (request) => {
          requests.push(request)
          return answers.shift()
        },
        collectDataUrl: { theme: 'dark' },
      },
    })
    await ready(flow, 'opt_form')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    const url = `${form.url}?theme=dark`
    expect(requests).toEqual([
      { url, schema: form.schema },
      { url, schema: form.schema, error: 'Enter a valid date.' },
      { url, schema: form.schema, error: 'The form posted no completion message.' },
    ])
  })

  it('fails with collect_data_failed when onCollectData throws, and cancels when the user declines', async () => {
    const a = setup({
      options: [withForm],
      flow: { onCollectData: () => Promise.reject(new Error('webview crashed')) },
    })
    await ready(a.flow, 'opt_form')
    await expect(a.flow.execute()).rejects.toThrowError(code('collect_data_failed'))
    expect(a.states().slice(-2)).toEqual(['collectingData', 'failed'])

    const declined = new PayError({ code: 'user_rejected', message: 'closed the form' })
    const b = setup({ options: [withForm], flow: { onCollectData: () => Promise.reject(declined) } })
    await ready(b.flow, 'opt_form')
    await expect(b.flow.execute()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(b.gateway.callsTo('cancel')).toHaveLength(1)
  })
})

// --- rejection, abort and cancel ------------------------------------------------------------------------

describe('user rejection', () => {
  it('an EIP-1193 4001 from the signer cancels the payment at the gateway and ends cancelled', async () => {
    const evm = evmSigner({
      answer: () => {
        throw Object.assign(new Error('User rejected the request.'), { code: 4001 })
      },
    })
    const { flow, gateway, of, states } = setup({ signers: [evm] })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(gateway.callsTo('cancel')).toEqual([
      [paymentId, { idempotencyKey: `caipay-${flow.flowId}-cancel` }],
    ])
    expect(gateway.callsTo('confirm')).toEqual([])
    expect(of('error')).toEqual([code('user_rejected', { index: 0 })])
    expect(states().slice(-2)).toEqual(['signing', 'cancelled'])
  })

  it('a PayError user_rejected on the Solana action of a mixed option does the same', async () => {
    const sol = solanaSigner({
      answer: () => Promise.reject(new PayError({ code: 'user_rejected', message: 'declined' })),
    })
    const evm = evmSigner()
    const { flow, gateway } = setup({ signers: [evm, sol] })
    await ready(flow, 'opt_mixed')
    await expect(flow.execute()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(evm.requests).toHaveLength(1)
    expect(gateway.callsTo('cancel')).toHaveLength(1)
    expect(gateway.callsTo('confirm')).toEqual([])
  })

  it('when the gateway refuses that cancel: ends cancelled locally, rejects, no final', async () => {
    const evm = evmSigner({ answer: () => Promise.reject({ code: 4001 }) })
    const { flow, errorCodes, of } = setup({
      signers: [evm],
      gateway: { cancel: () => Promise.reject(new PayError({ code: 'network_error', message: 'offline' })) },
    })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).rejects.toThrowError(code('user_rejected'))
    expect(flow.state).toBe('cancelled')
    expect(errorCodes()).toEqual(['user_rejected', 'network_error'])
    expect(of('final')).toEqual([])
    expect(flow.result).toBeUndefined()
  })
})

describe('abort', () => {
  it('an AbortSignal stops a pending signer at once: aborted, cancelled, no gateway cancel', async () => {
    const controller = new AbortController()
    const evm = evmSigner({ answer: never })
    const { flow, gateway, of, states } = setup({ signers: [evm], flow: { signal: controller.signal } })
    await ready(flow, 'opt_evm')
    const running = flow.execute()
    await new Promise((r) => setTimeout(r, 0))
    expect(evm.requests).toHaveLength(1)
    controller.abort()
    await expect(running).rejects.toThrowError(code('aborted'))
    expect(evm.requests[0]!.signal?.aborted).toBe(true)
    expect(states().slice(-2)).toEqual(['signing', 'cancelled'])
    expect(gateway.callsTo('cancel')).toEqual([])
    expect(gateway.callsTo('confirm')).toEqual([])
    expect(of('final')).toEqual([])
  })

  it('ends an idle flow at once when its signal aborts', async () => {
    const controller = new AbortController()
    const { flow, errorCodes } = setup({ flow: { signal: controller.signal } })
    await flow.loadOptions()
    controller.abort()
    expect(flow.state).toBe('cancelled')
    expect(errorCodes()).toEqual(['aborted'])
  })

  it('a signal aborted beforehand ends the flow before any call', async () => {
    const { flow, gateway } = setup({ flow: { signal: AbortSignal.abort() } })
    expect(flow.state).toBe('idle')
    await expect(flow.loadOptions()).rejects.toThrowError(code('aborted'))
    expect(gateway.calls).toEqual([])
    expect(flow.state).toBe('cancelled')
  })
})

describe('cancel', () => {
  it('from idle calls the gateway and ends cancelled', async () => {
    const { flow, gateway, of } = setup()
    await expect(flow.cancel()).resolves.toEqual({ paymentId, status: 'cancelled' })
    expect(gateway.callsTo('cancel')).toHaveLength(1)
    expect(of('final')).toEqual([{ paymentId, status: 'cancelled' }])
    await expect(flow.cancel()).resolves.toEqual({ paymentId, status: 'cancelled' })
  })

  it('while options load, while fetching, while signing and while confirming', async () => {
    const pending = (method: keyof GatewayApi) => ({ [method]: never })
    const cases = [
      { gateway: pending('getOptions'), start: (f: PaymentFlow) => f.loadOptions(), from: 'loadingOptions' },
      {
        gateway: pending('fetchActions'),
        start: (f: PaymentFlow) => ready(f, 'opt_mixed').then(() => f.execute()),
        from: 'fetchingActions',
      },
      {
        signers: [evmSigner({ answer: never })],
        start: (f: PaymentFlow) => ready(f, 'opt_evm').then(() => f.execute()),
        from: 'signing',
      },
      {
        gateway: pending('confirm'),
        start: (f: PaymentFlow) => ready(f, 'opt_evm').then(() => f.execute()),
        from: 'confirming',
      },
    ]
    for (const c of cases) {
      const { flow, gateway, states } = setup({
        gateway: c.gateway,
        ...(c.signers && { signers: c.signers }),
      })
      const started = c.start(flow)
      await new Promise((r) => setTimeout(r, 0))
      expect(flow.state).toBe(c.from)
      const result = await flow.cancel()
      expect(result).toEqual({ paymentId, status: 'cancelled' })
      // The interrupted call resolves with the same outcome.
      await expect(started).resolves.toEqual(c.from === 'loadingOptions' ? { options: [], result } : result)
      expect(states().slice(-2)).toEqual([c.from, 'cancelled'])
      expect(gateway.callsTo('cancel')).toHaveLength(1)
    }
  })

  it('rejects when the gateway refuses, ending the flow locally anyway', async () => {
    const conflict = new PayError({ code: 'invalid_state', message: 'processing', status: 409 })
    const { flow, of } = setup({ gateway: { cancel: () => Promise.reject(conflict) } })
    await flow.loadOptions()
    await expect(flow.cancel()).rejects.toBe(conflict)
    expect(flow.state).toBe('cancelled')
    expect(of('error')).toEqual([conflict])
    expect(of('final')).toEqual([])
  })

  it('is refused once the payment ended otherwise', async () => {
    const { flow } = setup()
    await ready(flow, 'opt_evm')
    await flow.execute()
    await expect(flow.cancel()).rejects.toThrowError(
      code('invalid_transition', { from: 'succeeded', to: 'cancelled' }),
    )
  })
})

// --- durability ----------------------------------------------------------------------------------------

describe('snapshots and resume', () => {
  async function recordRun() {
    const { flow } = setup({ options: [{ ...mixed, collectData: form }] })
    const snapshots: FlowSnapshot[] = [flow.snapshot()]
    flow.on('snapshot', (s) => snapshots.push(s))
    await flow.loadOptions()
    flow.select('opt_mixed')
    flow.completeCollectData('IC_COMPLETE')
    await flow.execute()
    return snapshots
  }

  async function drive(flow: PaymentFlow) {
    if (flow.state === 'idle') await flow.loadOptions()
    if (flow.state === 'selecting' && !flow.selectedOption) flow.select('opt_mixed')
    if (flow.state === 'collectingData' && !flow.collectDataReady) flow.completeCollectData('IC_COMPLETE')
    return flow.execute()
  }

  it('snapshots are plain JSON and are taken in every state of a run', async () => {
    const snapshots = await recordRun()
    for (const s of snapshots) expect(JSON.parse(JSON.stringify(s))).toEqual(s)
    expect(new Set(snapshots.map((s) => s.state))).toEqual(
      new Set([
        'idle',
        'selecting',
        'collectingData',
        'fetchingActions',
        'signing',
        'confirming',
        'polling',
        'succeeded',
      ]),
    )
    const signing = snapshots.filter((s) => s.state === 'signing').map((s) => [s.results.length, s.inFlight])
    // Before each signer call the in-flight index is recorded; after it, the result.
    expect(signing).toEqual([
      [0, null],
      [0, 0],
      [1, null],
      [1, 1],
      [2, null],
    ])
  })

  it('resumes from every snapshot of a run, reusing every recorded result', async () => {
    const snapshots = await recordRun()
    for (const snapshot of snapshots) {
      const evm = evmSigner({ answer: () => 'evm-resumed' })
      const sol = solanaSigner({ answer: () => 'sol-resumed' })
      const gateway = scriptedGateway({
        getOptions: async () => ({ options: [{ ...mixed, collectData: form }] }),
        fetchActions: async () => ({ actions: [attest, solTx] }),
        confirm: async () => processing,
        getStatus: statusSequence('succeeded'),
      })
      const flow = resumePaymentFlow(snapshot, { gateway, signers: [evm, sol], poll: instantPoll })
      watch(flow)
      const label = `${snapshot.state} results=${snapshot.results.length} inFlight=${snapshot.inFlight}`
      const result = await drive(flow)
      expect(result.status, label).toBe('succeeded')
      if (snapshot.state === 'succeeded') {
        expect(gateway.calls, label).toEqual([])
        continue
      }
      // Recorded results are sent as they are; only the missing ones are signed (by the new signers).
      const recorded = snapshot.results
      const sent = ['evm-resumed', 'sol-resumed'].map((fresh, i) => recorded[i] ?? fresh)
      // Polling means confirm went through: it is not sent again.
      const confirms = snapshot.state === 'polling' ? [] : [sent]
      const confirmed = gateway.callsTo('confirm').map((c) => (c[1] as { results: string[] }).results)
      expect(confirmed, label).toEqual(confirms)
      expect(evm.requests.length, label).toBe(recorded.length < 1 ? 1 : 0)
      expect(sol.requests.length, label).toBe(recorded.length < 2 ? 1 : 0)
      if (snapshot.state === 'confirming') {
        expect(gateway.callsTo('confirm')[0]![2], label).toMatchObject({
          idempotencyKey: expect.stringMatching(`^caipay-${snapshot.flowId}-confirm-[0-9a-z]+$`),
        })
      }
    }
  })

  describe('after a crash around eth_sendTransaction', () => {
    async function crashAt(pick: (s: FlowSnapshot) => boolean) {
      const evm = evmSigner({ answer: () => `0x${'ab'.repeat(32)}` })
      const { flow } = setup({ signers: [evm] })
      let kept: FlowSnapshot | undefined
      flow.on('snapshot', (s) => {
        if (!kept && pick(s)) kept = s
      })
      await ready(flow, 'opt_evm')
      await flow.execute()
      return kept!
    }
    const resumed = (snapshot: FlowSnapshot, extra: Partial<PaymentFlowOptions> = {}) => {
      const evm = evmSigner({ answer: () => 'signed-again' })
      const gateway = scriptedGateway({
        confirm: async () => processing,
        getStatus: statusSequence('succeeded'),
      })
      const flow = resumePaymentFlow(snapshot, { gateway, signers: [evm], poll: instantPoll, ...extra })
      return { flow, evm, gateway, ...watch(flow) }
    }

    it('reuses the recorded hash instead of sending again', async () => {
      const snapshot = await crashAt((s) => s.state === 'signing' && s.results.length === 1)
      const { flow, evm, gateway } = resumed(snapshot)
      await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
      expect(evm.requests).toEqual([])
      expect(gateway.callsTo('confirm')[0]![1]).toEqual({
        optionId: 'opt_evm',
        results: [`0x${'ab'.repeat(32)}`],
      })
    })

    it('confirms with the recorded results after a crash before confirm', async () => {
      const snapshot = await crashAt((s) => s.state === 'confirming')
      const { flow, evm, gateway } = resumed(snapshot)
      await flow.execute()
      expect(evm.requests).toEqual([])
      expect(gateway.callsTo('confirm')).toEqual([
        [
          paymentId,
          { optionId: 'opt_evm', results: [`0x${'ab'.repeat(32)}`] },
          {
            signal: expect.any(AbortSignal),
            idempotencyKey: expect.stringMatching(`^caipay-${snapshot.flowId}-confirm-[0-9a-z]+$`),
          },
        ],
      ])
    })

    it('does not send again when the crash hit while the transaction was with the signer', async () => {
      const snapshot = await crashAt((s) => s.inFlight === 0)
      const { flow, evm, gateway, errorCodes } = resumed(snapshot)
      await expect(flow.execute()).rejects.toThrowError(code('action_in_doubt', { index: 0 }))
      expect(evm.requests).toEqual([])
      expect(gateway.callsTo('confirm')).toEqual([])
      expect(errorCodes()).toEqual(['action_in_doubt'])
    })

    it('asks reconcile: a hash found is reused, null signs again', async () => {
      const snapshot = await crashAt((s) => s.inFlight === 0)
      const found = resumed(snapshot, { reconcile: async () => '0xfound' })
      await found.flow.execute()
      expect(found.evm.requests).toEqual([])
      expect(found.gateway.callsTo('confirm')[0]![1]).toEqual({ optionId: 'opt_evm', results: ['0xfound'] })

      const reconcile = async (request: unknown) => {
        expect(request).toMatchObject({ index: 0, chainId: 'eip155:8453', method: 'eth_sendTransaction' })
        return null
      }
      const notFound = resumed(snapshot, { reconcile })
      await notFound.flow.execute()
      expect(notFound.evm.requests).toHaveLength(1)
      expect(notFound.gateway.callsTo('confirm')[0]![1]).toEqual({
        optionId: 'opt_evm',
        results: ['signed-again'],
      })
    })
  })

  it('awaits persist before each signer call, with the in-flight index recorded', async () => {
    const persisted: FlowSnapshot[] = []
    const evm = evmSigner({
      answer: () => {
        expect(persisted.at(-1)).toMatchObject({ state: 'signing', inFlight: 0, results: [] })
        return '0xhash'
      },
    })
    const persist = async (s: FlowSnapshot) => {
      await new Promise((r) => setTimeout(r, 1))
      persisted.push(s)
    }
    const { flow } = setup({ signers: [evm], flow: { persist } })
    await ready(flow, 'opt_evm')
    await flow.execute()
    expect(persisted.find((s) => s.results.length === 1 && s.state === 'signing')).toBeDefined()
    expect(persisted.at(-1)).toMatchObject({ state: 'succeeded', result: { status: 'succeeded' } })
  })

  it('fails before signing when the snapshot cannot be persisted (selecting -> failed)', async () => {
    const evm = evmSigner()
    // Storage breaks once an option is chosen: the first checkpoint of execute().
    const persist = (s: FlowSnapshot) => (s.option ? Promise.reject(new Error('disk full')) : undefined)
    const { flow, states } = setup({ signers: [evm], flow: { persist } })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).rejects.toThrowError(code('internal_error'))
    expect(states().slice(-2)).toEqual(['selecting', 'failed'])
    expect(evm.requests).toEqual([])
  })

  it('once something is signed, a storage failure is reported and the payment still confirms', async () => {
    const persist = (s: FlowSnapshot) =>
      s.results.length > 0 ? Promise.reject(new Error('disk full')) : undefined
    const { flow, gateway, errorCodes } = setup({ flow: { persist } })
    await ready(flow, 'opt_evm')
    await expect(flow.execute()).resolves.toMatchObject({ status: 'succeeded' })
    expect(gateway.callsTo('confirm')).toHaveLength(1)
    expect(new Set(errorCodes())).toEqual(new Set(['internal_error']))
  })

  it('restarts a snapshot taken while options loaded at idle', async () => {
    const { flow } = setup({ gateway: { getOptions: never } })
    void flow.loadOptions()
    const snapshot = flow.snapshot()
    expect(snapshot.state).toBe('loadingOptions')
    const again = resumePaymentFlow(snapshot, { gateway: scriptedGateway(), signers: [] })
    expect(again.state).toBe('idle')
    expect(again.paymentId).toBe(paymentId)
  })

  it('refuses a damaged or inconsistent snapshot with invalid_snapshot', async () => {
    const { flow } = setup()
    await ready(flow, 'opt_evm')
    const good = flow.snapshot()
    const deps = { gateway: scriptedGateway(), signers: [] }
    for (const bad of [
      null,
      { ...good, version: 2 },
      { ...good, state: 'paying' },
      { ...good, state: 'signing', actions: null },
      { ...good, state: 'confirming', actions: [attest], results: [] },
      { ...good, results: ['x'] },
    ]) {
      expect(() => resumePaymentFlow(bad, deps)).toThrowError(code('invalid_snapshot'))
    }
  })

  it('a resumed flow that had failed stays failed', async () => {
    const { flow } = setup({
      gateway: { getOptions: () => Promise.reject(new PayError({ code: 'forbidden', message: 'x' })) },
    })
    await flow.loadOptions().catch(() => undefined)
    const again = resumePaymentFlow(flow.snapshot(), { gateway: scriptedGateway(), signers: [] })
    await expect(again.execute()).rejects.toThrowError(code('invalid_transition', { from: 'failed' }))
  })
})

// --- coverage of the table ------------------------------------------------------------------------------

describe('transition table coverage', () => {
  it('every legal transition was exercised by a flow in this file', () => {
    const legal = flowStates.flatMap((from) => flowTransitions[from].map((to) => `${from}->${to}`))
    expect(legal.filter((t) => !seen.has(t))).toEqual([])
    expect([...seen].filter((t) => !legal.includes(t))).toEqual([])
  })
})
