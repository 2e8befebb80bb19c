import type { AddressInfo } from 'node:net'
import { custom } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { decodeEvmAction, evmForwardParams, evmSigner } from '../../adapters/evm/index.js'
import { walletConnectSigners } from '../../adapters/walletconnect/index.js'
import { createPayClient, type PaymentOption } from '../../src/index.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { createGatewayEnv, type GatewayEnv } from '../gateway/support.js'
import {
  closeTestClient,
  connectSession,
  createTestClient,
  guardNetwork,
  type NetworkGuard,
  respondAsWallet,
  type Session,
  type TestSignClient,
} from './clients.js'
import { type Relay, startRelay } from './relay.js'

// The wallet library pays through a WalletConnect session: the app holds no keys, a remote wallet
// (a second real sign-client, answering with caipay's viem signer) signs over the local relay.

const testChain = 'eip155:8453'
let relay: Relay
let network: NetworkGuard
let dapp: TestSignClient
let wallet: TestSignClient
let session: Session
let live: EvmEnv
let sandbox: GatewayEnv
let buyerKey: `0x${string}`

async function listen(app: GatewayEnv['t']['app']): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 })
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

beforeAll(async () => {
  network = guardNetwork()
  ;[live, sandbox, relay] = await Promise.all([createEvmEnv(), createGatewayEnv(), startRelay()])
  live.startRunner()
  const buyer = await live.buyer(4)
  buyerKey = buyer.key
  const account = privateKeyToAccount(buyerKey)
  const noRpc = custom({
    request: async () => {
      throw new Error('test mode needs signatures only')
    },
  })
  const remote = evmSigner({
    account,
    chains: { [live.anvil.caip2]: { rpcUrl: live.anvil.rpcUrl }, [testChain]: { transport: noRpc } },
    pollingInterval: 50,
  })
  ;[dapp, wallet] = await Promise.all([
    createTestClient(relay.url, 'dapp'),
    createTestClient(relay.url, 'wallet'),
  ])
  respondAsWallet(wallet, async ({ chainId, method, params }) => ({
    result: await remote.request({ chainId, method, params: params as unknown[] }),
  }))
  const chains = [live.anvil.caip2, testChain]
  const methods = ['eth_signTypedData_v4', 'eth_sendTransaction', 'personal_sign']
  session = await connectSession(
    dapp,
    wallet,
    { eip155: { chains, methods, events: [] } },
    { eip155: { chains, methods, events: [], accounts: chains.map((c) => `${c}:${account.address}`) } },
  )
})

afterAll(async () => {
  await Promise.all([dapp && closeTestClient(dapp), wallet && closeTestClient(wallet)])
  await Promise.allSettled([relay?.stop(), live?.close(), sandbox?.t.close()])
  network?.restore()
})

const gasless = (options: readonly PaymentOption[]) => {
  const option = options.find(
    (o) => o.actions[0]?.type === 'walletRpc' && o.actions[0].walletRpc.method === 'eth_signTypedData_v4',
  )
  if (!option) throw new Error('no gasless option')
  return option.id
}

function payClient(baseUrl: string, apiKey: string) {
  return createPayClient({
    baseUrl,
    apiKey,
    signers: walletConnectSigners(dapp, session, {
      inspect: { eip155: decodeEvmAction },
      forwardParams: { eip155: evmForwardParams },
    }),
    poll: { intervalMs: 50, deadlineMs: 20_000 },
  })
}

describe('paying through a WalletConnect session', () => {
  it('pays a test-mode payment: the remote wallet signs the EIP-3009 authorization', async () => {
    const baseUrl = await listen(sandbox.t.app)
    const paymentId = await sandbox.pay('1250')
    const result = await payClient(baseUrl, sandbox.walletKey).pay(paymentId, { selectOption: gasless })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
  })

  it('pays a live EVM payment on Anvil: tokens move from the remote wallet to the merchant', async () => {
    const baseUrl = await listen(live.t.app)
    const { paymentId } = await live.pay('1250')
    const buyer = privateKeyToAccount(buyerKey).address
    const before = await Promise.all([live.balance(buyer), live.balance(live.merchant.destination)])
    const result = await payClient(baseUrl, live.walletKey).pay(paymentId, { selectOption: gasless })
    expect(result).toMatchObject({ status: 'succeeded', txId: expect.stringMatching(/^0x[0-9a-f]{64}$/) })
    const settled = await live.waitSettled(paymentId)
    expect(settled.state).toBe('succeeded')
    const after = await Promise.all([live.balance(buyer), live.balance(live.merchant.destination)])
    expect([after[0]! - before[0]!, after[1]! - before[1]!]).toEqual([-usdc(12.5), usdc(12.5)])
    expect(network.external).toEqual([])
  })
})
