// Test support for the flow suites, one per job (not exported from the package).
import { expect, it } from 'vitest'
import type { Signer } from '../actions/types.js'
import type { GatewayApi } from '../client/gatewayApi.js'
import type { CancelResponse, OptionsResponse, PaymentOption } from '../contract/index.js'
import type { PayError } from '../errors/PayError.js'
import { createPaymentFlow, type PaymentFlow, type PaymentFlowOptions } from './createPaymentFlow.js'
import { flowStates, flowTransitions } from './states.js'
import {
  amount,
  build,
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
} from './testkit.js'
import type { FlowEvents } from './types.js'

export const paymentId = 'pay_abc'
export const instantPoll = { sleep: async () => undefined, jitter: 0 }
export const processing = { status: 'processing' as const, isFinal: false, pollInMs: 10 }
export const cancelled: CancelResponse = {
  paymentId,
  status: 'cancelled',
  cancelledAt: '2026-02-18T00:00:00Z',
  cancelledReason: 'cancelled_by_user',
}
export const attest = rpc('eip155:8453', 'personal_sign', ['0x68656c6c6f', evmAddress])
export const solTx = rpc(solChain, 'solana_signTransaction', [{ transaction: 'AQID' }])
export const mixed = option({
  id: 'opt_mixed',
  account: solAccount,
  amount: amount(`caip19/${usdcSol}`, '1000000'),
  actions: [attest, build('bld_1')],
})
export const form = {
  url: 'https://pay.example/collect/pay_abc',
  schema: JSON.stringify({ required: ['fullName'] }),
}
export const withForm = option({ id: 'opt_form', collectData: form })

export const never = () => new Promise<never>(() => undefined)

// Every transition the flows of one test file make (each file runs in its own module instance).
const seen = new Set<string>()

type Recorded = { [K in keyof FlowEvents]: [K, Parameters<FlowEvents[K]>[0]] }[keyof FlowEvents]

export function watch(flow: PaymentFlow) {
  const events: Recorded[] = []
  const names = [
    'state',
    'options',
    'collectData',
    'action',
    'review',
    'status',
    'final',
    'error',
    'snapshot',
  ] as const
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

export interface Setup {
  options?: PaymentOption[]
  response?: Partial<OptionsResponse>
  gateway?: Partial<GatewayApi>
  signers?: Signer[]
  flow?: Partial<PaymentFlowOptions>
}

export function setup(s: Setup = {}) {
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

export async function ready(flow: PaymentFlow, optionId: string) {
  await flow.loadOptions()
  flow.select(optionId)
}

export const code = (c: string, context?: Record<string, unknown>) =>
  expect.objectContaining({ code: c, ...(context && { context: expect.objectContaining(context) }) })

// --- loading options ---------------------------------------------------------------------------------

/**
 * The transitions each job's suite must exercise; together they are the whole table
 * (createPaymentFlow.test.ts checks that), and each suite checks its own list with `coversTransitions`.
 */
export const transitionsBySuite = {
  options: [
    'idle->loadingOptions',
    'loadingOptions->selecting',
    'loadingOptions->succeeded',
    'loadingOptions->expired',
    'loadingOptions->failed',
    'selecting->collectingData',
    'collectingData->selecting',
  ],
  collecting: ['collectingData->fetchingActions', 'collectingData->failed', 'collectingData->cancelled'],
  signing: [
    'selecting->fetchingActions',
    'fetchingActions->signing',
    'fetchingActions->failed',
    'fetchingActions->expired',
    'signing->confirming',
    'signing->failed',
    'signing->cancelled',
  ],
  confirming: [
    'confirming->polling',
    'confirming->succeeded',
    'confirming->failed',
    'confirming->expired',
    'polling->succeeded',
    'polling->failed',
    'polling->expired',
    'polling->cancelled',
  ],
  exposure: ['confirming->fetchingActions'],
  lifecycle: [
    'idle->cancelled',
    'loadingOptions->cancelled',
    'selecting->cancelled',
    'selecting->failed',
    'fetchingActions->cancelled',
    'confirming->cancelled',
  ],
} satisfies Record<string, readonly string[]>

export function legalTransitions(): string[] {
  return flowStates.flatMap((from) => flowTransitions[from].map((to) => `${from}->${to}`))
}

/** The last test of a suite: every transition it owns was made by one of its flows, and none illegal. */
export function coversTransitions(suite: keyof typeof transitionsBySuite): void {
  it(`exercises the transitions of ${suite}`, () => {
    if (process.env.PRINT_TRANSITIONS) console.log(suite, JSON.stringify([...seen].sort()))
    expect(transitionsBySuite[suite].filter((t) => !seen.has(t))).toEqual([])
    expect([...seen].filter((t) => !legalTransitions().includes(t))).toEqual([])
  })
}
