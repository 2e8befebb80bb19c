import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { type Address, createPublicClient, type Hash, http, parseAbiItem } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import type { WalletRpcAction } from '../../src/contract/gateway.js'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { encodeBase58 } from '../../src/server/chains/solana/index.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { type AnvilInstance, anvilPrivateKeys, deployTestToken, mintTestToken, startAnvil } from '../anvil.js'
import { CaipayProcess } from '../chaos/processes.js'
import { freePort } from '../ports.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'
import { type FaultProxy, startFaultProxy } from '../rpcFaults.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
  tokenBalance,
} from '../solana/index.js'
import { until } from '../until.js'
import { type Receiver, startReceiver } from '../webhooks/receiver.js'

/**
 * Live refunds whose worker process (`caipay serve --worker-only`, a real child) is SIGKILLed in a
 * refund's crash windows, then started again on the same database:
 *  - after the transfer is recorded and before it reaches the node (the RPC proxy holds the broadcast;
 *    the kill cuts it, so the node never sees those bytes from the dead process), on Anvil and on the
 *    Solana harness;
 *  - right after the broadcast (the EVM transfer sits in the node's pool and is mined while nothing runs).
 * Each time the refund must end `succeeded` with the recorded transaction, the buyer's balance read
 * from the chain must rise by exactly the refund once, the float fall by as much, and the merchant keep
 * every settled payment to the unit.
 *
 * And a manual capture killed mid-way (docs/capture.md): a partial capture's rest going back to the
 * buyer is recorded, its worker killed before the broadcast; the restarted worker sends those bytes,
 * the batch settles the captured part, each once, the ledger balances and each event is delivered once.
 */
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))
const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)')

let pg: TestDatabase
let anvil: AnvilInstance
let proxy: FaultProxy
let cluster: SolanaValidator
let solanaProxy: FaultProxy
let configDir: string
let api: CaipayProcess
let worker: CaipayProcess
let liveKey = ''
let walletKey = ''
let merchantId = ''
const token = { address: '' as Address, asset: '' }
const collection = privateKeyToAccount(anvilPrivateKeys[1]).address
const merchant = privateKeyToAccount(generatePrivateKey()).address
const buyer = privateKeyToAccount(anvilPrivateKeys[2])
const sol = {
  service: Keypair.generate(),
  mintAuthority: Keypair.generate(),
  mint: undefined as unknown as PublicKey,
  asset: '',
  merchant: Keypair.generate().publicKey,
  buyer: Keypair.generate(),
}
const solBalance = (owner: PublicKey) => tokenBalance(cluster.connection, owner, sol.mint)

const chain = () => createPublicClient({ transport: http(anvil.rpcUrl) })
const anvilRpc = (method: string, params: unknown[] = []) =>
  chain().request({ method, params } as never) as Promise<unknown>
const balance = (address: Address) =>
  chain().readContract({
    address: token.address,
    abi: testUsdcAbi,
    functionName: 'balanceOf',
    args: [address],
  })

async function call(method: string, path: string, headers: Record<string, string>, body?: unknown) {
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  })
  const text = await res.text()
  // biome-ignore lint/suspicious/noExplicitAny: JSON from the wire, read field by field
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as any }
}
const merchantHeaders = () => ({
  'api-key': liveKey,
  'merchant-id': merchantId,
  'idempotency-key': crypto.randomUUID(),
})

beforeAll(async () => {
  ;[pg, anvil, cluster] = await Promise.all([
    createTestDatabase(),
    startAnvil(),
    startSolanaValidator({ backend: 'litesvm' }),
  ])
  await airdrop(cluster.connection, sol.service.publicKey, 10 * LAMPORTS_PER_SOL)
  await airdrop(cluster.connection, sol.mintAuthority.publicKey, 10 * LAMPORTS_PER_SOL)
  sol.mint = await createTestMint(cluster.connection, sol.mintAuthority, 6)
  sol.asset = `${cluster.caip2}/token:${sol.mint.toBase58()}`
  await mintTestTokens(cluster.connection, sol.mintAuthority, sol.mint, sol.buyer.publicKey, 1_000_000_000n)
  solanaProxy = await startFaultProxy(cluster.rpcUrl)
  token.address = await deployTestToken(anvil.rpcUrl)
  token.asset = `${anvil.caip2}/erc20:${token.address}`
  await mintTestToken(anvil.rpcUrl, token.address, buyer.address, 1_000_000_000n)
  proxy = await startFaultProxy(anvil.rpcUrl)

  configDir = await mkdtemp(join(tmpdir(), 'caipay-refund-kill-'))
  const configFile = join(configDir, 'caipay.config.json')
  await writeFile(
    configFile,
    JSON.stringify({
      rateLimit: false,
      collectDataAtMinor: null,
      // The capture case's webhook receiver listens on loopback.
      webhooks: { allowPrivateUrls: true },
      chains: {
        [anvil.caip2]: {
          rpcUrl: proxy.url,
          signerKey: 'env:CAIPAY_REFUND_KILL_EVM_KEY',
          blockPollMs: 50,
          assets: {
            [token.asset]: {
              symbol: 'USDC',
              name: 'USD Coin',
              decimals: 6,
              usdRate: '1',
              methods: ['eip3009'],
            },
          },
        },
        [cluster.caip2]: {
          rpcUrl: solanaProxy.url,
          signerKey: 'env:CAIPAY_REFUND_KILL_SOLANA_KEY',
          assets: { [sol.asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
        },
      },
    }),
  )
  const partnerId = await createPartner(pg.db)
  liveKey = (await createApiKey(pg.db, { partnerId, mode: 'live', role: 'partner' })).apiKey
  walletKey = (await createApiKey(pg.db, { partnerId, mode: 'live', role: 'wallet' })).apiKey
  const args = ['--database-url', pg.url, '--config', configFile]
  const env = {
    ...process.env,
    NODE_OPTIONS: '',
    LOG_LEVEL: 'warn',
    CAIPAY_REFUND_KILL_EVM_KEY: anvilPrivateKeys[1],
    CAIPAY_REFUND_KILL_SOLANA_KEY: encodeBase58(sol.service.secretKey),
  }
  api = new CaipayProcess('api', 'api', args, env, await freePort())
  worker = new CaipayProcess('worker', 'worker', args, env)
  await Promise.all([api.start(), worker.start()])

  const created = await call(
    'POST',
    '/v1/merchants',
    { 'api-key': liveKey, 'idempotency-key': 'm' },
    {
      merchantName: 'Refund Kill Cafe',
      merchantEmail: 'kill@example.com',
    },
  )
  expect(created.status, JSON.stringify(created.json)).toBe(201)
  merchantId = created.json.merchant.id
  const settlements = await call(
    'POST',
    `/v1/merchants/${merchantId}/settlements/crypto`,
    merchantHeaders(),
    {
      settlements: [
        { asset: token.asset, destination: `${anvil.caip2}:${merchant}` },
        { asset: sol.asset, destination: `${cluster.caip2}:${sol.merchant.toBase58()}` },
      ],
    },
  )
  expect(settlements.status, JSON.stringify(settlements.json)).toBe(201)
}, 120_000)

afterAll(async () => {
  await Promise.all([api?.stop(), worker?.stop()])
  await proxy?.stop()
  await solanaProxy?.stop()
  await cluster?.stop()
  await anvil?.stop()
  await pg?.drop()
  if (configDir) await rm(configDir, { recursive: true, force: true })
})

/** until (test/until.ts), its timeout naming what the processes logged. */
const waitFor = <T>(check: () => T | Promise<T>, what: string) =>
  until(check, what, 20_000).catch((error: Error) => {
    throw new Error(`${error.message}\n${api.log}\n${worker.log}`)
  })

const signWith = (
  signer: { request(r: { chainId: string; method: string; params: readonly unknown[] }): Promise<string> },
  action: WalletRpcAction,
) =>
  signer.request({
    chainId: action.walletRpc.chainId,
    method: action.walletRpc.method,
    params: JSON.parse(action.walletRpc.params),
  })

/** A payment of `cents` (EVM gasless, or Solana), succeeded and settled to the merchant; its id. */
async function paidAndSettled(family: 'evm' | 'solana', cents: number): Promise<string> {
  const paymentId = await paid(family, cents)
  await waitFor(async () => {
    const view = (
      await call('GET', `/v1/payments/${paymentId}`, { 'api-key': liveKey, 'merchant-id': merchantId })
    ).json
    return view.status === 'succeeded' && view.settlement?.successful
  }, 'settled')
  return paymentId
}

/** A payment of `cents` confirmed by the buyer (`extra`: more of the create body, e.g. manual capture). */
async function paid(family: 'evm' | 'solana', cents: number, extra: Record<string, unknown> = {}) {
  const created = await call('POST', '/v1/payments', merchantHeaders(), {
    referenceId: `kill-${family}-${cents}`,
    amount: { unit: 'iso4217/USD', value: String(cents) },
    ...extra,
  })
  expect(created.status, JSON.stringify(created.json)).toBe(201)
  const paymentId = created.json.paymentId as string
  const gateway = `/v1/gateway/payment/${paymentId}`
  const wallet = { 'api-key': walletKey }
  const account =
    family === 'evm'
      ? `${anvil.caip2}:${buyer.address}`
      : `${cluster.caip2}:${sol.buyer.publicKey.toBase58()}`
  const options = await call('POST', `${gateway}/options`, wallet, { accounts: [account] })
  expect(options.json.options?.length, `${JSON.stringify(options.json)}\n${api.log}`).toBeGreaterThan(0)
  const option = options.json.options[0]
  const results: string[] = []
  if (family === 'evm') {
    const signer = evmSigner({ account: buyer, chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } } })
    results.push(await signWith(signer, option.actions[0] as WalletRpcAction))
  } else {
    const signer = solanaSigner({ keypair: sol.buyer, chains: [cluster.caip2] })
    // biome-ignore lint/suspicious/noExplicitAny: JSON from the wire
    const build = option.actions.find((a: any) => a.type === 'build')
    const fetched = await call('POST', `${gateway}/fetch`, wallet, {
      optionId: option.id,
      data: build.build.data,
    })
    expect(fetched.status, JSON.stringify(fetched.json)).toBe(200)
    for (const action of fetched.json.actions as WalletRpcAction[])
      results.push(await signWith(signer, action))
  }
  const confirmed = await call(
    'POST',
    `${gateway}/confirm`,
    { ...wallet, 'idempotency-key': paymentId },
    { optionId: option.id, results },
  )
  expect(confirmed.status, JSON.stringify(confirmed.json)).toBe(200)
  return paymentId
}

async function refundRecorded(refundId: string) {
  return waitFor(
    () =>
      pg.db.selectFrom('evm_transactions').selectAll().where('refund_id', '=', refundId).executeTakeFirst(),
    'refund transaction recorded',
  )
}

/** Each chain's RPC proxy, and the method that carries a signed transaction to the node. */
const sends = {
  evm: () => ({ faults: proxy, method: 'eth_sendRawTransaction' }),
  solana: () => ({ faults: solanaProxy, method: 'sendTransaction' }),
}

/** Holds every send of the chain at its proxy (nothing the worker signs reaches the node). */
const holdSends = (family: 'evm' | 'solana') => {
  const { faults, method } = sends[family]()
  faults.hold(method)
}

/**
 * The refund's transfer recorded and its send held at the proxy: the worker SIGKILLed and the held sends
 * cut, so these bytes never reached the node from the dead process. Returns the recorded transaction's
 * id (EVM hash, Solana signature), which the chain does not know, with the refund still pending.
 */
async function killedBeforeSend(family: 'evm' | 'solana', refundId: string): Promise<string> {
  const recorded =
    family === 'evm'
      ? (await refundRecorded(refundId)).hash
      : (
          await waitFor(
            () =>
              pg.db
                .selectFrom('solana_transactions')
                .selectAll()
                .where('refund_id', '=', refundId)
                .executeTakeFirst(),
            'refund transaction recorded',
          )
        ).signature
  const { faults, method } = sends[family]()
  await waitFor(() => faults.held() > 0, 'send held')
  await killWorker(refundId)
  faults.cutHeld()
  faults.clear(method)
  const unseen =
    family === 'evm'
      ? (await chain()
          .getTransaction({ hash: recorded as Hash })
          .catch(() => null)) === null
      : (await cluster.connection.getSignatureStatuses([recorded])).value[0] === null
  expect(unseen).toBe(true)
  expect((await readRefund(refundId)).status).toBe('pending')
  return recorded
}

/**
 * SIGKILL the worker; its leases (the refund's job, and any other it held: only the worker runs jobs)
 * run out at once (safe: the holder is dead).
 */
async function killWorker(refundId: string) {
  await worker.kill()
  const now = new Date()
  await pg.db
    .updateTable('jobs')
    .set({ locked_until: new Date(now.getTime() - 1000) })
    .where((eb) => eb.or([eb('refund_id', '=', refundId), eb('locked_until', '>', now)]))
    .execute()
}

async function transfersTo(to: Address) {
  const logs = await chain().getLogs({
    address: token.address,
    event: transferEvent,
    args: { from: collection, to },
    fromBlock: 0n,
    toBlock: 'latest',
  })
  return logs.map((l) => ({ hash: l.transactionHash as Hash, value: l.args.value! }))
}

type Window = 'recorded, not yet broadcast' | 'broadcast, not yet mined'

async function refundKilledIn(window: Window, paymentCents: number, refundCents: number) {
  const paymentId = await paidAndSettled('evm', paymentCents)
  const paid = BigInt(paymentCents) * 10_000n
  const refunded = BigInt(refundCents) * 10_000n
  // The settlement paid the merchant the whole payment; the refund comes from the float.
  await mintTestToken(anvil.rpcUrl, token.address, collection, refunded)
  const before = {
    buyer: await balance(buyer.address),
    merchant: await balance(merchant),
    collection: await balance(collection),
    toBuyer: await transfersTo(buyer.address),
  }

  if (window === 'recorded, not yet broadcast') holdSends('evm')
  else await anvilRpc('evm_setAutomine', [false])
  const sendsBefore = proxy.calls('eth_sendRawTransaction')
  const made = await call('POST', '/v1/refunds', merchantHeaders(), {
    paymentId,
    amount: { unit: 'iso4217/USD', value: String(refundCents) },
  })
  expect(made.status, JSON.stringify(made.json)).toBe(201)
  const refundId = made.json.refundId as string
  let recorded: string
  if (window === 'recorded, not yet broadcast') recorded = await killedBeforeSend('evm', refundId)
  else {
    recorded = (await refundRecorded(refundId)).hash
    await waitFor(
      async () =>
        proxy.calls('eth_sendRawTransaction') > sendsBefore &&
        (await chain()
          .getTransaction({ hash: recorded as Hash })
          .catch(() => null)) !== null,
      'broadcast',
    )
    await killWorker(refundId)
    // Mined while no process runs: the restarted one must find it landed and send nothing.
    await anvilRpc('evm_mine')
    await anvilRpc('evm_setAutomine', [true])
    expect((await readRefund(refundId)).status).toBe('pending')
  }

  const restarted = Date.now()
  await worker.start()
  const done = await waitFor(async () => {
    const r = await readRefund(refundId)
    return r.status === 'succeeded' ? r : undefined
  }, 'refund succeeded')
  const recoveryMs = Date.now() - restarted
  console.info(`refund killed (${window}): succeeded ${recoveryMs} ms after the restart`)

  expect(done.txId).toBe(recorded)
  const rows = await pg.db
    .selectFrom('evm_transactions')
    .select(['hash', 'nonce', 'status'])
    .where('refund_id', '=', refundId)
    .execute()
  expect(rows.map((r) => [r.hash, r.status])).toEqual([[recorded, 'succeeded']])
  // Read from the chain: one transfer to the buyer since, of exactly the refund; the merchant untouched.
  const newToBuyer = (await transfersTo(buyer.address)).slice(before.toBuyer.length)
  expect(newToBuyer).toEqual([{ hash: recorded, value: refunded }])
  expect((await balance(buyer.address)) - before.buyer).toBe(refunded)
  expect(before.collection - (await balance(collection))).toBe(refunded)
  expect(await balance(merchant)).toBe(before.merchant)
  // To the unit: the merchant holds every payment in full, the float nothing but what refunds still owe.
  return { paid, refunded }
}

const readRefund = async (refundId: string) =>
  (await call('GET', `/v1/refunds/${refundId}`, { 'api-key': liveKey, 'merchant-id': merchantId })).json

describe('a live Solana refund, its worker SIGKILLed between recording the transfer and sending it', () => {
  it('the same signed transfer lands once after the restart', async () => {
    const paymentId = await paidAndSettled('solana', 1507)
    const refunded = 900n * 10_000n
    // Settled: the refund comes from the float, which the operator funds.
    await mintTestTokens(cluster.connection, sol.mintAuthority, sol.mint, sol.service.publicKey, refunded)
    const before = {
      buyer: await solBalance(sol.buyer.publicKey),
      merchant: await solBalance(sol.merchant),
      service: await solBalance(sol.service.publicKey),
    }
    holdSends('solana')
    const made = await call('POST', '/v1/refunds', merchantHeaders(), {
      paymentId,
      amount: { unit: 'iso4217/USD', value: '900' },
    })
    expect(made.status, JSON.stringify(made.json)).toBe(201)
    const refundId = made.json.refundId as string
    const recorded = await killedBeforeSend('solana', refundId)

    const restarted = Date.now()
    await worker.start()
    const done = await waitFor(async () => {
      const r = await readRefund(refundId)
      return r.status === 'succeeded' ? r : undefined
    }, 'refund succeeded')
    console.info(
      `Solana refund killed before the send: succeeded ${Date.now() - restarted} ms after the restart`,
    )
    expect(done.txId).toBe(recorded)
    const rows = await pg.db
      .selectFrom('solana_transactions')
      .select(['signature', 'state'])
      .where('refund_id', '=', refundId)
      .execute()
    expect(rows).toEqual([{ signature: recorded, state: 'landed' }])
    expect((await solBalance(sol.buyer.publicKey)) - before.buyer).toBe(refunded)
    expect(before.service - (await solBalance(sol.service.publicKey))).toBe(refunded)
    expect(await solBalance(sol.merchant)).toBe(before.merchant)
    // To the unit: the merchant received the payment in full, the float is back to nothing.
    expect(before.merchant).toBe(1507n * 10_000n)
    expect(await solBalance(sol.service.publicKey)).toBe(0n)
  }, 60_000)
})

describe('a live EVM refund, its worker SIGKILLed', () => {
  const totals = { paid: 0n, merchantBefore: 0n }
  it('between recording the transfer and broadcasting it: sent once after the restart', async () => {
    totals.merchantBefore = await balance(merchant)
    const { paid } = await refundKilledIn('recorded, not yet broadcast', 1234, 567)
    totals.paid += paid
    expect((await balance(merchant)) - totals.merchantBefore).toBe(totals.paid)
  }, 60_000)

  it('right after broadcasting: the landed transfer is recognised, nothing is sent again', async () => {
    const { paid } = await refundKilledIn('broadcast, not yet mined', 2001, 2001)
    totals.paid += paid
    expect((await balance(merchant)) - totals.merchantBefore).toBe(totals.paid)
    expect(await balance(collection)).toBe(0n)
  }, 60_000)
})

describe('a live manual capture, its worker SIGKILLed mid-capture', () => {
  const watched = ['payment.authorized', 'payment.captured', 'payment.settled', 'refund.succeeded']
  const paidToken = 1000n * 10_000n
  const capturedToken = 600n * 10_000n
  const restToken = paidToken - capturedToken
  let receiver: Receiver
  beforeAll(async () => {
    receiver = await startReceiver()
    const endpoint = await call(
      'POST',
      '/v1/webhook-endpoints',
      { 'api-key': liveKey, 'idempotency-key': crypto.randomUUID() },
      { url: receiver.url, enabledEvents: watched },
    )
    expect(endpoint.status, JSON.stringify(endpoint.json)).toBe(201)
  })
  afterAll(() => receiver?.close())

  const readPayment = async (paymentId: string) =>
    (await call('GET', `/v1/payments/${paymentId}`, { 'api-key': liveKey, 'merchant-id': merchantId })).json

  /** A manual payment of 10.00 paid and held; then 6.00 of it captured, the rest's refund recorded. */
  async function heldThenCaptured(family: 'evm' | 'solana') {
    const paymentId = await paid(family, 1000, { capture: 'manual' })
    await waitFor(async () => (await readPayment(paymentId)).capture?.status === 'authorized', 'held')
    holdSends(family)
    const captured = await call('POST', `/v1/payments/${paymentId}/capture`, merchantHeaders(), {
      amount: { unit: 'iso4217/USD', value: '600' },
    })
    expect(captured.status, JSON.stringify(captured.json)).toBe(200)
    expect(captured.json.capture).toMatchObject({
      status: 'partially_captured',
      capturedAmount: { value: '600' },
    })
    const refund = await pg.db
      .selectFrom('refunds')
      .select(['id', 'asset_value', 'paid_from'])
      .where('payment_id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect([refund.paid_from, BigInt(refund.asset_value!)]).toEqual(['authorized', restToken])
    return { paymentId, refundId: refund.id }
  }

  /** After the restart: the rest's refund succeeded and the captured part settled. */
  async function finished(paymentId: string, refundId: string) {
    const restarted = Date.now()
    await worker.start()
    const done = await waitFor(async () => {
      const [refund, view] = [await readRefund(refundId), await readPayment(paymentId)]
      return refund.status === 'succeeded' && view.settlement?.successful ? { refund, view } : undefined
    }, 'rest refunded and captured part settled')
    console.info(`capture killed before the rest's send: done ${Date.now() - restarted} ms after the restart`)
    expect(done.view.capture).toMatchObject({ status: 'partially_captured', heldAmount: { value: '0' } })
    return done
  }

  /** The ledger balances: nothing held, collected, settling or owed for the merchant on the chain. */
  async function expectMerchantLedgerEmpty(chainId: string) {
    const balances = await call('GET', `/v1/balances?merchantId=${merchantId}`, { 'api-key': liveKey })
    expect(balances.status, JSON.stringify(balances.json)).toBe(200)
    const accounts = (
      balances.json.data as {
        chainId: string
        account: string
        merchantId: string | null
        amount: { value: string }
      }[]
    ).filter((b) => b.merchantId === merchantId && b.chainId === chainId)
    expect(accounts.map((a) => a.account)).toContain('authorized')
    for (const account of accounts)
      expect([account.account, account.amount.value]).toEqual([account.account, '0'])
    expect(balances.json.differences).toEqual([])
  }

  /** Each event once in the outbox, and delivered; those made after the restart exactly once. */
  async function expectEventsOnce(paymentId: string) {
    const outbox = await pg.db
      .selectFrom('payment_events')
      .select(['type'])
      .where('payment_id', '=', paymentId)
      .where('type', 'in', watched)
      .execute()
    expect(outbox.map((e) => e.type).sort()).toEqual([...watched].sort())
    const deliveredOf = () => receiver.received.filter((r) => r.event.data.payment_id === paymentId)
    await waitFor(
      () => watched.every((type) => deliveredOf().some((r) => r.event.type === type)),
      'delivered',
    )
    // Let any second delivery that should not exist arrive before judging.
    await sleep(500)
    const delivered = deliveredOf()
    for (const type of watched) {
      const ofType = delivered.filter((r) => r.event.type === type)
      expect(new Set(ofType.map((r) => r.headers['webhook-id'])).size, type).toBe(1)
    }
    for (const type of ['payment.settled', 'refund.succeeded'])
      expect(
        delivered.filter((r) => r.event.type === type),
        type,
      ).toHaveLength(1)
  }

  it('on Anvil, the rest going back recorded, not yet broadcast: after the restart the merchant gets the captured part and the buyer the rest, once each', async () => {
    const before = {
      buyer: await balance(buyer.address),
      merchant: await balance(merchant),
      collection: await balance(collection),
      toBuyer: await transfersTo(buyer.address),
      toMerchant: await transfersTo(merchant),
    }
    const { paymentId, refundId } = await heldThenCaptured('evm')
    // The held broadcasts (the rest's refund, and the settlement batch's if it got that far) die with it.
    const recorded = await killedBeforeSend('evm', refundId)

    const done = await finished(paymentId, refundId)
    expect(done.refund.txId).toBe(recorded)
    const sends = await pg.db
      .selectFrom('evm_transactions')
      .select(['status'])
      .where('refund_id', '=', refundId)
      .execute()
    expect(sends).toEqual([{ status: 'succeeded' }])
    // Read from the chain: one transfer to the buyer (the rest), one to the merchant (the captured part).
    const toBuyer = (await transfersTo(buyer.address)).slice(before.toBuyer.length)
    expect(toBuyer).toEqual([{ hash: recorded, value: restToken }])
    const toMerchant = (await transfersTo(merchant)).slice(before.toMerchant.length)
    expect(toMerchant.map((t) => t.value)).toEqual([capturedToken])
    expect(before.buyer - (await balance(buyer.address))).toBe(capturedToken)
    expect((await balance(merchant)) - before.merchant).toBe(capturedToken)
    expect(await balance(collection)).toBe(before.collection)
    await expectMerchantLedgerEmpty(anvil.caip2)
    // The operator's book at the collection address is what the chain holds there, to the unit.
    const book = await pg.db
      .selectFrom('ledger_accounts')
      .select((eb) => eb.fn.sum<string>('balance').as('total'))
      .where('holder', '=', holderOf(anvil.caip2, collection))
      .executeTakeFirstOrThrow()
    expect(BigInt(book.total ?? 0)).toBe(await balance(collection))
    await expectEventsOnce(paymentId)
  }, 90_000)

  it('on the Solana harness, the rest going back recorded, not yet sent: the same signed transfer lands once after the restart', async () => {
    const before = {
      buyer: await solBalance(sol.buyer.publicKey),
      merchant: await solBalance(sol.merchant),
      service: await solBalance(sol.service.publicKey),
    }
    const { paymentId, refundId } = await heldThenCaptured('solana')
    const recorded = await killedBeforeSend('solana', refundId)

    const done = await finished(paymentId, refundId)
    expect(done.refund.txId).toBe(recorded)
    const rows = await pg.db
      .selectFrom('solana_transactions')
      .select(['signature', 'state'])
      .where('refund_id', '=', refundId)
      .execute()
    expect(rows).toEqual([{ signature: recorded, state: 'landed' }])
    // Read from the chain: the buyer is out the captured part only, the merchant has it, the service
    // holds what it held before.
    expect(before.buyer - (await solBalance(sol.buyer.publicKey))).toBe(capturedToken)
    expect((await solBalance(sol.merchant)) - before.merchant).toBe(capturedToken)
    expect(await solBalance(sol.service.publicKey)).toBe(before.service)
    await expectMerchantLedgerEmpty(cluster.caip2)
    await expectEventsOnce(paymentId)
  }, 90_000)
})
