import { getAssociatedTokenAddressSync } from '@solana/spl-token'
import { Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { expect } from 'vitest'
import { solanaSigner } from '../../adapters/solana/solanaSigner.js'
import { decodeSolanaTransaction } from '../../protocol/solana/index.js'
import { encodeBase58 } from '../../src/server/chains/solana/keys.js'
import { type JobRunner, startJobRunner } from '../../src/server/jobs/runner.js'
import { type FaultProxy, startFaultProxy } from '../rpcFaults.js'
import { createTestServer, type TestServer } from '../server/harness.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
  tokenBalance,
} from '../solana/index.js'

/**
 * Live Solana end to end: the litesvm cluster, an RPC proxy in front of it (what the server talks to),
 * a USDC-like mint, the server in-process on its own PostgreSQL database with a live config for that
 * cluster, a live partner key, and a job runner on demand.
 */
export interface SolanaLive {
  validator: SolanaValidator
  proxy: FaultProxy
  t: TestServer
  caip2: string
  /** Fee payer and collection owner of the service. */
  service: Keypair
  mint: PublicKey
  /** CAIP-19 id of the test token. */
  asset: string
  liveKey: string
  /** Transactions the cluster executed (from any client: server, harness, anyone). */
  executed(): number
  /** A job runner over the app's handlers (or those of `kinds`); `stop()` it before starting another. */
  startRunner(options?: { intervalMs?: number; leaseMs?: number; kinds?: readonly string[] }): JobRunner
  /** A funded buyer holding `tokens` minor units. */
  newBuyer(tokens?: bigint): Promise<Keypair>
  /** Mints `tokens` minor units to `owner`'s token account (an operator's top-up when it is the service). */
  mintTo(owner: PublicKey, tokens: bigint): Promise<void>
  balance(owner: PublicKey): Promise<bigint>
  /** A merchant, with a crypto settlement to `settleTo` when given. Returns its id. */
  createMerchant(settleTo?: PublicKey): Promise<string>
  /** Creates a payment of `usdCents` (more body fields in `extra`); returns its id and gateway URL. */
  createPayment(
    merchantId: string,
    usdCents?: number,
    extra?: Record<string, unknown>,
  ): Promise<{ paymentId: string; gatewayUrl: string }>
  /** POST to the gateway with the live key. */
  gateway(paymentId: string, action: 'options' | 'fetch' | 'confirm', body: unknown): Promise<GatewayResponse>
  /** Polls the payment (merchant view) until `done` holds. */
  waitForPayment(paymentId: string, merchantId: string, done: (payment: Json) => boolean): Promise<Json>
  close(): Promise<void>
}

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies, checked by assertions
type Json = any
type GatewayResponse = { statusCode: number; json: Json; body: string }

let sequence = 0

/** `config`: more config-file keys for the server (the chain is configured here); `chain`: more keys of the chain's. */
export async function startSolanaLive(
  options: {
    config?: Record<string, unknown>
    chain?: Record<string, unknown>
    /** The genesis hash the cluster reports (so its CAIP-2 can be a public cluster's). */
    genesisHash?: string
  } = {},
): Promise<SolanaLive> {
  const validator = await startSolanaValidator({
    backend: 'litesvm',
    ...(options.genesisHash ? { genesisHash: options.genesisHash } : {}),
  })
  const proxy = await startFaultProxy(validator.rpcUrl)
  const { connection, caip2 } = validator
  // Counted where every client's transaction ends up: the SVM itself, not any one RPC connection.
  const svm = validator.svm!
  const execute = svm.sendTransaction.bind(svm)
  let executed = 0
  svm.sendTransaction = ((tx: Parameters<typeof execute>[0]) => {
    executed++
    return execute(tx)
  }) as typeof svm.sendTransaction
  const service = Keypair.generate()
  const mintAuthority = Keypair.generate()
  await airdrop(connection, service.publicKey, 10 * LAMPORTS_PER_SOL)
  await airdrop(connection, mintAuthority.publicKey, 10 * LAMPORTS_PER_SOL)
  const mint = await createTestMint(connection, mintAuthority, 6)
  const asset = `${caip2}/token:${mint.toBase58()}`
  // The key reaches the config the way operators should pass it: through the environment.
  const envName = `CAIPAY_TEST_SOLANA_KEY_${process.pid}_${++sequence}`
  process.env[envName] = encodeBase58(service.secretKey)
  const t = await createTestServer({
    config: {
      // Settlement batches close a second after their first payment (5 s by default): payments that
      // succeed together still share one, and the suites do not wait 5 s per settlement.
      settlement: { intervalMs: 1000 },
      ...options.config,
      chains: {
        [caip2]: {
          rpcUrl: proxy.url,
          signerKey: `env:${envName}`,
          assets: { [asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
          ...options.chain,
        },
      },
    },
  })
  const { apiKey: liveKey } = await t.createKey('live')
  let runners: JobRunner[] = []

  const live: SolanaLive = {
    validator,
    proxy,
    t,
    caip2,
    service,
    mint,
    asset,
    liveKey,
    executed: () => executed,
    startRunner(options = {}) {
      const handlers = Object.fromEntries(
        Object.entries(t.app.jobHandlers).filter(([kind]) => !options.kinds || options.kinds.includes(kind)),
      )
      const runner = startJobRunner({
        db: t.db,
        handlers,
        intervalMs: options.intervalMs ?? 25,
        ...(options.leaseMs !== undefined ? { leaseMs: options.leaseMs } : {}),
      })
      runners.push(runner)
      return runner
    },
    async newBuyer(tokens = 100_000_000n) {
      const buyer = Keypair.generate()
      await mintTestTokens(connection, mintAuthority, mint, buyer.publicKey, tokens)
      return buyer
    },
    async mintTo(owner, tokens) {
      await mintTestTokens(connection, mintAuthority, mint, owner, tokens)
    },
    balance: (owner) => tokenBalance(connection, owner, mint),
    async createMerchant(settleTo) {
      const created = await t.request({
        method: 'POST',
        url: '/v1/merchants',
        headers: { 'api-key': liveKey, 'idempotency-key': `m-${Date.now()}-${Math.random()}` },
        payload: { merchantName: 'Solana Shop', merchantEmail: 'shop@example.com' },
      })
      expect(created.statusCode, created.body).toBe(201)
      const merchantId: string = created.json.merchant.id
      if (settleTo) {
        const settlement = await t.request({
          method: 'POST',
          url: `/v1/merchants/${merchantId}/settlements/crypto`,
          headers: { 'api-key': liveKey, 'idempotency-key': `s-${Date.now()}-${Math.random()}` },
          payload: { settlements: [{ asset, destination: `${caip2}:${settleTo.toBase58()}` }] },
        })
        expect(settlement.statusCode, settlement.body).toBe(201)
      }
      return merchantId
    },
    async createPayment(merchantId, usdCents = 1250, extra = {}) {
      const created = await t.request({
        method: 'POST',
        url: '/v1/payments',
        headers: { 'api-key': liveKey, 'merchant-id': merchantId },
        payload: {
          referenceId: `order-${++sequence}`,
          amount: { unit: 'iso4217/USD', value: String(usdCents) },
          ...extra,
        },
      })
      expect(created.statusCode, created.body).toBe(201)
      return { paymentId: created.json.paymentId, gatewayUrl: created.json.gatewayUrl }
    },
    gateway: (paymentId, action, body) =>
      t.request({
        method: 'POST',
        url: `/v1/gateway/payment/${paymentId}/${action}`,
        headers: { 'api-key': liveKey },
        payload: body as Record<string, unknown>,
      }),
    async waitForPayment(paymentId, merchantId, done) {
      const deadline = Date.now() + 20_000
      for (;;) {
        const res = await t.request({
          method: 'GET',
          url: `/v1/payments/${paymentId}`,
          headers: { 'api-key': liveKey, 'merchant-id': merchantId },
        })
        expect(res.statusCode, res.body).toBe(200)
        if (done(res.json)) return res.json
        if (Date.now() > deadline) throw new Error(`Payment ${paymentId} stuck: ${res.body}`)
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
    },
    async close() {
      await Promise.all(runners.map((r) => r.stop()))
      runners = []
      await t.close()
      await proxy.stop()
      await validator.stop()
      delete process.env[envName]
    },
  }
  return live
}

/** The buyer's associated token account: where its tokens are. */
export function tokenAccount(live: SolanaLive, owner: PublicKey): PublicKey {
  return getAssociatedTokenAddressSync(live.mint, owner, true)
}

/** A wallet-side Solana signer for `buyer` on the live cluster (no RPC connection: it cannot send). */
export function buyerSigner(live: SolanaLive, buyer: Keypair) {
  return solanaSigner({ keypair: buyer, chains: [live.caip2] })
}

/** Signs one `walletRpc` action with `signer` and returns the result string. */
export async function sign(
  signer: { request(r: { chainId: string; method: string; params: readonly unknown[] }): Promise<string> },
  action: { walletRpc: { chainId: string; method: string; params: string } },
): Promise<string> {
  const { chainId, method, params } = action.walletRpc
  return signer.request({ chainId, method, params: JSON.parse(params) })
}

/** Options, fetch, sign and confirm for `buyer`: leaves a new payment `processing` for the jobs. */
export async function confirmedPayment(
  live: SolanaLive,
  buyer: Keypair,
  merchantId: string,
  /** More fields of the payment's creation (e.g. `capture: 'manual'`). */
  extra?: Record<string, unknown>,
): Promise<{ paymentId: string; signature: string }> {
  const { paymentId } = await live.createPayment(merchantId, 1250, extra)
  const options = await live.gateway(paymentId, 'options', {
    accounts: [`${live.caip2}:${buyer.publicKey.toBase58()}`],
  })
  expect(options.statusCode, options.body).toBe(200)
  const option = options.json.options[0]
  const fetched = await live.gateway(paymentId, 'fetch', {
    optionId: option.id,
    data: option.actions[0].build.data,
  })
  expect(fetched.statusCode, fetched.body).toBe(200)
  const signed = await sign(buyerSigner(live, buyer), fetched.json.actions[0])
  const confirmed = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
  expect(confirmed.statusCode, confirmed.body).toBe(200)
  expect(confirmed.json.status).toBe('processing')
  const signature = encodeBase58(decodeSolanaTransaction(signed).signatures[0]!)
  return { paymentId, signature }
}

export { until } from '../until.js'

/** Whether the cluster has the signature at all (asked directly, not through the proxy). */
export async function onChain(live: SolanaLive, signature: string): Promise<boolean> {
  const { value } = await live.validator.connection.getSignatureStatuses([signature])
  return value[0] !== null
}

/** The payment's database row. */
export function paymentRow(live: SolanaLive, paymentId: string) {
  return live.t.db.selectFrom('payments').selectAll().where('id', '=', paymentId).executeTakeFirstOrThrow()
}
