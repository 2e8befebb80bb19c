/**
 * The wallet library's own cost per payment: `createPayClient({ gateway })` with an in-process gateway
 * that answers at once (a test-mode-shaped EIP-3009 option, confirm -> succeeded, status with txId) and a
 * signer that returns a fixed signature. What remains is the library: link parsing, the state machine
 * and its events, action routing, the signing guard, result ordering, snapshots. Sequential payments in
 * their own process (`runLibraryFlow` forks it).
 */
import { authorizationFields, eip712DomainFields } from '../src/actions/eip712Structs.js'
import { createPayClient, type GatewayApi, type PaymentOption, type Signer } from '../src/index.js'
import { isJobChild, runJob, serveJob } from './child.js'
import { usdcBase } from './setup.js'

export interface LibraryFlowResult {
  payments: number
  microsecondsPerPayment: number
  paymentsPerSecond: number
  /** Gateway calls per payment (options, confirm, status). */
  callsPerPayment: number
}

export function runLibraryFlow(payments: number): Promise<LibraryFlowResult> {
  return runJob<LibraryFlowResult>('flow.ts', { payments })
}

const address = '0x1111111111111111111111111111111111111111'
const account = `eip155:8453:${address}`
const signature = `0x${'ab'.repeat(65)}`

function typedData(value: string, validBefore: number): string {
  return JSON.stringify({
    types: {
      EIP712Domain: eip712DomainFields.filter((field) => field.name !== 'salt'),
      TransferWithAuthorization: authorizationFields,
    },
    primaryType: 'TransferWithAuthorization',
    domain: {
      name: 'USD Coin',
      version: '2',
      chainId: 8453,
      verifyingContract: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
    },
    message: {
      from: address,
      to: '0x3333333333333333333333333333333333333333',
      value,
      validAfter: '0',
      validBefore: String(validBefore),
      nonce: `0x${'00'.repeat(31)}01`,
    },
  })
}

/** A gateway answering instantly, shaped like test mode's answers. */
function instantGateway(counter: { calls: number }): GatewayApi {
  const expiresAt = Math.floor(Date.now() / 1000) + 900
  const option = (paymentId: string): PaymentOption => ({
    id: `opt_${paymentId.slice(4)}`,
    account,
    amount: {
      unit: `caip19/${usdcBase}`,
      value: '12500000',
      display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 },
    },
    etaS: 4,
    expiresAt,
    actions: [
      {
        type: 'walletRpc',
        walletRpc: {
          chainId: 'eip155:8453',
          method: 'eth_signTypedData_v4',
          params: JSON.stringify([address, typedData('12500000', expiresAt)]),
        },
      },
    ],
  })
  const succeeded = { status: 'succeeded' as const, isFinal: true, pollInMs: null }
  return {
    async getPayment() {
      throw new Error('not used')
    },
    async getStatus(paymentId) {
      counter.calls++
      return { ...succeeded, txId: `test:${paymentId}` }
    },
    async getOptions(paymentId) {
      counter.calls++
      return { options: [option(paymentId)] }
    },
    async fetchActions() {
      throw new Error('not used: the option has no build action')
    },
    async confirm() {
      counter.calls++
      return succeeded
    },
    async cancel() {
      throw new Error('not used')
    },
  }
}

const signer: Signer = {
  namespace: 'eip155',
  methods: ['eth_signTypedData_v4'],
  accounts: () => [account],
  inspect: () => ({ account, transfers: [] }),
  request: async () => signature,
}

async function libraryFlow({ payments }: { payments: number }): Promise<LibraryFlowResult> {
  const counter = { calls: 0 }
  const pay = createPayClient({ gateway: instantGateway(counter), signers: [signer] })
  const run = async (count: number, offset: number) => {
    for (let i = 0; i < count; i++) {
      const result = await pay.pay(`pay_bench${offset + i}`)
      if (result.status !== 'succeeded') throw new Error(`payment ended ${result.status}`)
    }
  }
  await run(Math.min(500, payments), 0)
  counter.calls = 0
  const started = process.hrtime.bigint()
  await run(payments, 1_000_000)
  const us = Number(process.hrtime.bigint() - started) / 1000
  return {
    payments,
    microsecondsPerPayment: us / payments,
    paymentsPerSecond: payments / (us / 1e6),
    callsPerPayment: counter.calls / payments,
  }
}

if (isJobChild(import.meta.url)) serveJob(libraryFlow)
