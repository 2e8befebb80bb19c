/**
 * Live EVM test environment: a real Anvil node with TestUSDC, the server in-process on a real PostgreSQL
 * database with a live key and a config naming that chain, and a job runner. Buyers pay with the real
 * viem adapter (`evmSigner`).
 */
import { type Address, createPublicClient, getAddress, type Hex, http } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { expect } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import type { Fetch } from '../../src/client/http.js'
import type { Action, WalletRpcAction } from '../../src/contract/gateway.js'
import { createEvmRuntime } from '../../src/server/chains/evm/index.js'
import { type JobRunner, startJobRunner } from '../../src/server/jobs/runner.js'
import type { JobRow } from '../../src/server/store/schema.js'
import {
  type AnvilInstance,
  anvilChain,
  anvilPrivateKeys,
  deployTestToken,
  mintTestToken,
  startAnvil,
} from '../anvil.js'
import { createTestServer, type TestServer } from '../server/harness.js'
import { createMerchant, headers, idem } from '../server/helpers.js'

export const usdc = (amount: number) => BigInt(Math.round(amount * 1_000_000))

export interface EvmEnv {
  anvil: AnvilInstance
  t: TestServer
  token: Address
  /** CAIP-19 of the token. */
  asset: string
  /** Executor, relayer and collection address of the service. */
  collection: Address
  liveKey: string
  walletKey: string
  /** A merchant with a crypto settlement for the token, and one without. */
  merchant: { id: string; destination: Address }
  bareMerchantId: string
  publicClient: ReturnType<typeof createPublicClient>
  /** A funded buyer (ETH for gas from Anvil, `tokens` TestUSDC minted). */
  buyer(index: number, tokens?: bigint): Promise<Buyer>
  balance(address: Address, token?: Address): Promise<bigint>
  pay(usdCents: string, merchantId?: string): Promise<{ paymentId: string; gatewayUrl: string }>
  gw(
    method: 'GET' | 'POST',
    paymentId: string,
    suffix?: string,
    body?: unknown,
  ): ReturnType<TestServer['request']>
  merchantView(paymentId: string, merchantId?: string): Promise<any>
  /** Starts a job runner on the app's handlers (or others given). */
  startRunner(handlers?: Parameters<typeof startJobRunner>[0]['handlers']): JobRunner
  /** Polls the job of (payment, kind) until its run is recorded (succeeded or failed). */
  waitJob(paymentId: string, kind: string, timeoutMs?: number): Promise<JobRow>
  /** Waits for the job of the settlement batch the payment's settlement joined to finish; returns it. */
  waitSettled(paymentId: string, timeoutMs?: number): Promise<JobRow>
  /** Polls the payment until it is final. */
  waitFinal(paymentId: string, timeoutMs?: number): Promise<any>
  close(): Promise<void>
}

export interface Buyer {
  key: Hex
  address: Address
  account: string
  signer: ReturnType<typeof evmSigner>
  sign(action: WalletRpcAction): Promise<string>
}

export async function createEvmEnv(
  options: {
    anvilArgs?: string[]
    config?: Record<string, unknown>
    /** More keys of the chain's config entry (e.g. `eip6492Factories`). */
    chainConfig?: Record<string, unknown>
    /** More assets of the chain, deployed on the node before the server starts. */
    extraAssets?: (anvil: AnvilInstance) => Promise<Record<string, unknown>>
  } = {},
): Promise<EvmEnv> {
  const anvil = await startAnvil(options.anvilArgs ? { args: options.anvilArgs } : {})
  const token = await deployTestToken(anvil.rpcUrl)
  const asset = `${anvil.caip2}/erc20:${token}`
  const executorKey = anvilPrivateKeys[1]
  const collection = privateKeyToAccount(executorKey).address
  const extraAssets = (await options.extraAssets?.(anvil)) ?? {}
  const t = await createTestServer({
    config: {
      // Each payment's settlement as soon as it succeeds, as tests of one payment at a time expect.
      settlement: { intervalMs: 0 },
      ...options.config,
      chains: {
        [anvil.caip2]: {
          rpcUrl: anvil.rpcUrl,
          signerKey: executorKey,
          ...options.chainConfig,
          assets: {
            [asset]: {
              symbol: 'USDC',
              name: 'USD Coin',
              decimals: 6,
              usdRate: '1',
              methods: ['eip3009', 'transfer'],
            },
            ...extraAssets,
          },
        },
      },
    },
  })
  const { apiKey: liveKey } = await t.createKey('live')
  const { apiKey: walletKey } = await t.createKey('live', 'wallet', await t.createPartner())
  const destination = privateKeyToAccount(generatePrivateKey()).address
  const merchantId = await createMerchant(t, liveKey)
  const registered = await t.request({
    method: 'POST',
    url: `/v1/merchants/${merchantId}/settlements/crypto`,
    headers: headers(liveKey, undefined, { 'idempotency-key': idem() }),
    payload: { settlements: [{ asset, destination: `${anvil.caip2}:${destination}` }] },
  })
  expect(registered.statusCode, registered.body).toBe(201)
  const bareMerchantId = await createMerchant(t, liveKey, {
    merchantName: 'No Settlement',
    merchantEmail: 'b@example.com',
  })
  const publicClient = createPublicClient({
    chain: anvilChain(anvil.chainId, anvil.rpcUrl),
    transport: http(anvil.rpcUrl),
  })
  const runners: JobRunner[] = []
  let reference = 0

  const env: EvmEnv = {
    anvil,
    t,
    token,
    asset,
    collection,
    liveKey,
    walletKey,
    merchant: { id: merchantId, destination },
    bareMerchantId,
    publicClient,
    async buyer(index, tokens = usdc(100)) {
      const key = anvilPrivateKeys[index]!
      const address = privateKeyToAccount(key).address
      if (tokens > 0n) await mintTestToken(anvil.rpcUrl, token, address, tokens)
      const signer = evmSigner({
        account: privateKeyToAccount(key),
        chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } },
        pollingInterval: 50,
      })
      return {
        key,
        address,
        account: `${anvil.caip2}:${address}`,
        signer,
        sign: ({ walletRpc }) =>
          signer.request({
            chainId: walletRpc.chainId,
            method: walletRpc.method,
            params: JSON.parse(walletRpc.params),
          }),
      }
    },
    balance: (address, of = token) =>
      publicClient.readContract({
        address: of,
        abi: testUsdcAbi,
        functionName: 'balanceOf',
        args: [address],
      }),
    async pay(value, merchant = merchantId) {
      reference += 1
      const res = await t.request({
        method: 'POST',
        url: '/v1/payments',
        headers: headers(liveKey, merchant),
        payload: { referenceId: `evm-${reference}`, amount: { unit: 'iso4217/USD', value } },
      })
      expect(res.statusCode, res.body).toBe(201)
      return { paymentId: res.json.paymentId, gatewayUrl: res.json.gatewayUrl }
    },
    gw(method, paymentId, suffix = '', body) {
      return t.request({
        method,
        url: `/v1/gateway/payment/${paymentId}${suffix}`,
        headers: headers(walletKey),
        ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
      })
    },
    async merchantView(paymentId, merchant = merchantId) {
      const res = await t.request({
        method: 'GET',
        url: `/v1/payments/${paymentId}`,
        headers: headers(liveKey, merchant),
      })
      expect(res.statusCode, res.body).toBe(200)
      return res.json
    },
    startRunner(handlers = t.app.jobHandlers) {
      const runner = startJobRunner({ db: t.db, handlers, intervalMs: 25, listenUrl: t.databaseUrl })
      runners.push(runner)
      return runner
    },
    async waitJob(paymentId, kind, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const job = await t.db
          .selectFrom('jobs')
          .selectAll()
          .where('payment_id', '=', paymentId)
          .where('kind', '=', kind)
          .executeTakeFirst()
        if (job && (job.state === 'succeeded' || job.state === 'failed')) return job
        if (Date.now() > deadline)
          throw new Error(`Job ${kind} of ${paymentId} still ${job?.state}: ${JSON.stringify(job)}`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
    },
    async waitSettled(paymentId, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const batch = await t.db
          .selectFrom('settlement_items')
          .innerJoin('settlement_batches', 'settlement_batches.id', 'settlement_items.batch_id')
          .select('settlement_batches.payment_id')
          .where('settlement_items.payment_id', '=', paymentId)
          .executeTakeFirst()
        if (batch) return env.waitJob(batch.payment_id, 'evm.settle', Math.max(0, deadline - Date.now()))
        if (Date.now() > deadline) throw new Error(`Payment ${paymentId} has no settlement item`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
    },
    async waitFinal(paymentId, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs
      for (;;) {
        const res = await env.gw('GET', paymentId, '/status')
        if (res.json.isFinal) return res.json
        if (Date.now() > deadline) throw new Error(`Payment ${paymentId} still ${res.json.status}`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
    },
    async close() {
      await Promise.all(runners.map((r) => r.stop()))
      await t.close()
      await anvil.stop()
    },
  }
  return env
}

/** A runtime on the test server's database and config with test-friendly timings. */
/** The relay transactions recorded for a payment, oldest first (replacements included). */
export function relayRows(env: EvmEnv, paymentId: string) {
  return env.t.db
    .selectFrom('evm_transactions')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', 'relay')
    .orderBy('id')
    .execute()
}

export function fastRuntime(env: EvmEnv, overrides: Partial<Parameters<typeof createEvmRuntime>[0]> = {}) {
  return createEvmRuntime({ config: env.t.app.config, db: env.t.db, pollingIntervalMs: 25, ...overrides })
}

/** Picks options by kind from their first action's method. */
export function isKind(kind: 'eip3009' | 'transfer') {
  return (o: { actions: readonly Action[] }): boolean => {
    const first = o.actions[0]
    const method = first?.type === 'walletRpc' ? first.walletRpc.method : undefined
    return kind === 'eip3009' ? method === 'eth_signTypedData_v4' : method === 'eth_sendTransaction'
  }
}

/**
 * A new payment of `usdCents` confirmed with the buyer's EIP-3009 authorization: left `processing` for
 * the jobs. Returns its id and the typed data the buyer signed.
 */
export async function confirmGasless(
  env: EvmEnv,
  buyer: Buyer,
  usdCents = '1000',
): Promise<{
  paymentId: string
  typed: { domain: Record<string, unknown>; message: Record<string, string> }
}> {
  const { paymentId } = await env.pay(usdCents)
  const res = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
  expect(res.statusCode, res.body).toBe(200)
  const option = res.json.options.find(isKind('eip3009'))
  expect(option, res.body).toBeDefined()
  const confirm = await env.gw('POST', paymentId, '/confirm', {
    optionId: option.id,
    results: [await buyer.sign(option.actions[0])],
  })
  expect(confirm.statusCode, confirm.body).toBe(200)
  return { paymentId, typed: JSON.parse(JSON.parse(option.actions[0].walletRpc.params)[1]) }
}

export function address(account: string): Address {
  return getAddress(account.split(':')[2]!)
}

/** The wallet library's fetch, answered by the in-process server. */
export function injectFetch(e: EvmEnv): Fetch {
  return async (input, init) => {
    const url = new URL(input)
    const res = await e.t.app.inject({
      method: (init.method ?? 'GET') as 'GET',
      url: url.pathname + url.search,
      headers: Object.fromEntries(new Headers(init.headers).entries()),
      ...(init.body ? { payload: init.body as string } : {}),
    })
    return new Response(res.body === '' ? null : res.body, {
      status: res.statusCode,
      headers: res.headers as Record<string, string>,
    })
  }
}
