// Test support for the flow and actions suites (not exported from the package).
import type { ActionInspection, Signer, SignerRequest } from '../actions/types.js'
import type { GatewayApi } from '../client/gatewayApi.js'
import type { Amount } from '../contract/common.js'
import type { Action, PaymentOption, WalletRpcAction } from '../contract/gateway.js'

export const evmAddress = '0x1111111111111111111111111111111111111111'
export const evmAccount = `eip155:8453:${evmAddress}`
export const solAddress = '9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM'
export const solChain = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
export const solAccount = `${solChain}:${solAddress}`
export const usdcBase = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'
export const usdcSol = `${solChain}/token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v`

type GatewayMethod = keyof GatewayApi
export interface GatewayCall {
  method: GatewayMethod
  args: unknown[]
}
export type ScriptedGateway = GatewayApi & {
  calls: GatewayCall[]
  callsTo(method: GatewayMethod): unknown[][]
}

const gatewayMethods: readonly GatewayMethod[] = [
  'getPayment',
  'getStatus',
  'getOptions',
  'fetchActions',
  'confirm',
  'cancel',
]

/** A gateway that answers only what the test scripted; any other call rejects. Records every call. */
export function scriptedGateway(script: Partial<GatewayApi> = {}): ScriptedGateway {
  const calls: GatewayCall[] = []
  const gateway = {
    calls,
    callsTo: (m: GatewayMethod) => calls.filter((c) => c.method === m).map((c) => c.args),
  }
  for (const method of gatewayMethods) {
    const answer = script[method] as ((...args: unknown[]) => Promise<unknown>) | undefined
    Object.assign(gateway, {
      [method]: (...args: unknown[]) => {
        calls.push({ method, args })
        return answer ? answer(...args) : Promise.reject(new Error(`unexpected gateway call: ${method}`))
      },
    })
  }
  return gateway as ScriptedGateway
}

/** Answers getStatus with each status in turn (the last one repeats). */
export function statusSequence(
  ...statuses: Array<'requires_action' | 'processing' | 'succeeded' | 'failed' | 'expired' | 'cancelled'>
) {
  let at = 0
  return async () => {
    const status = statuses[Math.min(at++, statuses.length - 1)]!
    const isFinal = status !== 'requires_action' && status !== 'processing'
    return {
      status,
      isFinal,
      pollInMs: isFinal ? null : 500,
      ...(status === 'succeeded' && { txId: 'test:pay_abc' }),
    }
  }
}

export interface TestSigner extends Signer {
  requests: SignerRequest[]
}

export interface TestSignerOptions {
  namespace: string
  accounts: string[]
  methods?: string[]
  /** The result of a request; default `<method>#<n>` (n counts requests to this signer). */
  answer?: (request: SignerRequest, n: number) => string | Promise<string>
  /**
   * The decoder the guard calls. Default: the signer's account on the action's chain, moving nothing
   * (what an attestation decodes to); `false` leaves the signer without one.
   */
  inspect?: ((request: SignerRequest) => ActionInspection | Promise<ActionInspection>) | false
}

/** A real signer object with deterministic results: what a wallet adapter looks like to the core. */
export function testSigner(options: TestSignerOptions): TestSigner {
  const requests: SignerRequest[] = []
  const signer: TestSigner = {
    namespace: options.namespace,
    methods: options.methods ?? [
      'eth_sendTransaction',
      'eth_signTypedData_v4',
      'personal_sign',
      'solana_signTransaction',
    ],
    accounts: () => options.accounts,
    requests,
    async request(request) {
      requests.push(request)
      return options.answer
        ? options.answer(request, requests.length)
        : `${request.method}#${requests.length}`
    },
  }
  if (options.inspect !== false) {
    signer.inspect =
      options.inspect ??
      ((request) => ({
        account:
          options.accounts.find((account) => account.startsWith(`${request.chainId}:`)) ??
          options.accounts[0] ??
          '',
        transfers: [],
      }))
  }
  return signer
}

export const evmSigner = (extra: Partial<TestSignerOptions> = {}) =>
  testSigner({
    namespace: 'eip155',
    accounts: [evmAccount],
    methods: ['eth_sendTransaction', 'eth_signTypedData_v4', 'personal_sign'],
    ...extra,
  })
export const solanaSigner = (extra: Partial<TestSignerOptions> = {}) =>
  testSigner({ namespace: 'solana', accounts: [solAccount], methods: ['solana_signTransaction'], ...extra })

export function rpc(chainId: string, method: string, params: unknown[] = []): WalletRpcAction {
  return { type: 'walletRpc', walletRpc: { chainId, method, params: JSON.stringify(params) } }
}

export function build(data: string): Action {
  return { type: 'build', build: { data } }
}

export function amount(unit: string, value: string): Amount {
  return { unit, value, display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 } }
}

export function option(overrides: Partial<PaymentOption> = {}): PaymentOption {
  return {
    id: 'opt_evm',
    account: evmAccount,
    amount: amount(`caip19/${usdcBase}`, '1000000'),
    etaS: 5,
    expiresAt: 2_000_000_000,
    actions: [
      rpc('eip155:8453', 'eth_sendTransaction', [
        { from: evmAddress, to: '0x2222222222222222222222222222222222222222' },
      ]),
    ],
    ...overrides,
  }
}
