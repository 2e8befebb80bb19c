import { describe, expect, it } from 'vitest'
import type { GatewayApi } from '../client/gatewayApi.js'
import { PayError } from '../errors/PayError.js'
import { type PaymentFlow, type PaymentFlowOptions, resumePaymentFlow } from './createPaymentFlow.js'
import {
  attest,
  code,
  coversTransitions,
  form,
  instantPoll,
  legalTransitions,
  mixed,
  never,
  paymentId,
  processing,
  ready,
  setup,
  solTx,
  transitionsBySuite,
  watch,
} from './flowHarness.js'
import type { FlowSnapshot } from './snapshot.js'
import { evmAddress, evmSigner, option, scriptedGateway, solanaSigner, statusSequence } from './testkit.js'

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

describe('transition table', () => {
  it('the suites of the jobs together exercise every legal transition', () => {
    const owned = new Set(Object.values(transitionsBySuite).flat())
    expect(legalTransitions().filter((t) => !owned.has(t))).toEqual([])
    expect([...owned].filter((t) => !legalTransitions().includes(t))).toEqual([])
  })
})

coversTransitions('lifecycle')
