import { type ChildProcess, spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { sql } from 'kysely'
import { type Address, createPublicClient, http, parseAbiItem } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import type { PaymentOption, WalletRpcAction } from '../../src/contract/gateway.js'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { encodeBase58 } from '../../src/server/chains/solana/index.js'
import { type AnvilInstance, anvilPrivateKeys, deployTestToken, mintTestToken, startAnvil } from '../anvil.js'
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

/**
 * Crash safety of live payments: the server runs as a child process (`node bin/caipay.js serve`) on a
 * harness database with a live config for Anvil (1 s blocks) and the Solana harness (litesvm, in this
 * process), both behind proxies that add network latency. A batch of live payments (EVM gasless, EVM
 * direct, Solana) is paid while the child is SIGKILLed at chosen points (a job claimed, a transaction
 * recorded but maybe not sent, a settlement running, a random moment) and restarted, several times.
 *
 * Then: every payment is final and settled; every token movement on chain is one the service recorded
 * for exactly one payment; the sums moved equal the sums of succeeded payments and settlements; nothing
 * was transferred twice.
 *
 * A SIGKILLed runner's claims stay leased (10 s) until they run out; the test lets them run out at once
 * (as test/evm/exactlyOnce.test.ts does), which is safe because that runner is dead.
 * Replay a kill schedule with CAIPAY_CRASH_SEED (printed on every run).
 */
const seed = Number(process.env.CAIPAY_CRASH_SEED ?? Math.floor(Math.random() * 2 ** 31))
const kills = Number(process.env.CAIPAY_CRASH_KILLS ?? 6)
const evmGasless = 5
const evmDirect = 2
const solanaPayments = 5

const root = fileURLToPath(new URL('../..', import.meta.url))

/** mulberry32: a small seeded PRNG, so a kill schedule can be replayed. */
function prng(s: number) {
  let a = s >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = Math.imul(a ^ (a >>> 15), 1 | a)
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}
const random = prng(seed)
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

// ---------------------------------------------------------------------------------------------------
// The server as a child process that can be killed and started again on the same port and database.

class ServerProcess {
  child: ChildProcess | undefined
  exited: Promise<void> = Promise.resolve()
  log = ''
  starts = 0
  constructor(
    readonly args: string[],
    readonly env: NodeJS.ProcessEnv,
    readonly url: string,
  ) {}

  async start(): Promise<void> {
    this.starts += 1
    const child = spawn(process.execPath, [join(root, 'bin/caipay.js'), 'serve', ...this.args], {
      cwd: root,
      env: this.env,
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    this.child = child
    const keep = (chunk: Buffer) => {
      this.log = (this.log + chunk.toString()).slice(-20_000)
    }
    child.stdout?.on('data', keep)
    child.stderr?.on('data', keep)
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()))
    const deadline = Date.now() + 30_000
    for (;;) {
      if (child.exitCode !== null) throw new Error(`caipay serve exited (${child.exitCode}):\n${this.log}`)
      try {
        if ((await fetch(`${this.url}/healthz`)).ok) return
      } catch {}
      if (Date.now() > deadline) throw new Error(`caipay serve did not come up:\n${this.log}`)
      await sleep(50)
    }
  }

  async kill(): Promise<void> {
    const child = this.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    child.kill('SIGKILL')
    await this.exited
  }
}

// ---------------------------------------------------------------------------------------------------

let pg: TestDatabase
let anvil: AnvilInstance
let cluster: SolanaValidator
const proxies: FaultProxy[] = []
let server: ServerProcess
let configDir: string

const evm = {
  token: '' as Address,
  asset: '',
  collection: '' as Address,
  merchant: privateKeyToAccount(generatePrivateKey()).address,
  gaslessBuyer: privateKeyToAccount(anvilPrivateKeys[2]),
  directBuyers: [privateKeyToAccount(anvilPrivateKeys[3]), privateKeyToAccount(anvilPrivateKeys[4])],
}
const sol = {
  service: Keypair.generate(),
  mintAuthority: Keypair.generate(),
  mint: undefined as unknown as PublicKey,
  asset: '',
  merchant: Keypair.generate().publicKey,
  buyers: [Keypair.generate(), Keypair.generate(), Keypair.generate()],
}
let liveKey = ''
let walletKey = ''
let merchantId = ''
const publicClient = () => createPublicClient({ transport: http(anvil.rpcUrl) })

async function rpc(method: string, params: unknown[] = []) {
  return publicClient().request({ method, params } as never)
}

function evmBalance(address: Address): Promise<bigint> {
  return publicClient().readContract({
    address: evm.token,
    abi: testUsdcAbi,
    functionName: 'balanceOf',
    args: [address],
  })
}

beforeAll(async () => {
  pg = await createTestDatabase()
  anvil = await startAnvil()
  cluster = await startSolanaValidator({ backend: 'litesvm' })

  evm.token = await deployTestToken(anvil.rpcUrl)
  evm.asset = `${anvil.caip2}/erc20:${evm.token}`
  evm.collection = privateKeyToAccount(anvilPrivateKeys[1]).address
  await mintTestToken(anvil.rpcUrl, evm.token, evm.gaslessBuyer.address, 1_000_000_000n)
  for (const b of evm.directBuyers) await mintTestToken(anvil.rpcUrl, evm.token, b.address, 1_000_000_000n)
  // From here on blocks come every second: a relay or settlement stays in flight long enough to be cut.
  await rpc('evm_setAutomine', [false])
  await rpc('evm_setIntervalMining', [1])

  const { connection } = cluster
  await airdrop(connection, sol.service.publicKey, 10 * LAMPORTS_PER_SOL)
  await airdrop(connection, sol.mintAuthority.publicKey, 10 * LAMPORTS_PER_SOL)
  sol.mint = await createTestMint(connection, sol.mintAuthority, 6)
  sol.asset = `${cluster.caip2}/token:${sol.mint.toBase58()}`
  for (const b of sol.buyers)
    await mintTestTokens(connection, sol.mintAuthority, sol.mint, b.publicKey, 1_000_000_000n)

  const evmProxy = await startFaultProxy(anvil.rpcUrl, { latencyMs: 60 })
  const solProxy = await startFaultProxy(cluster.rpcUrl, { latencyMs: 60 })
  proxies.push(evmProxy, solProxy)

  const usdcAsset = { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' }
  configDir = await mkdtemp(join(tmpdir(), 'caipay-crash-'))
  const configFile = join(configDir, 'caipay.config.json')
  await writeFile(
    configFile,
    JSON.stringify({
      rateLimit: false,
      collectDataAtMinor: null,
      // Short batches: several payments' settlements share a transfer while processes are killed.
      settlement: { intervalMs: 1000 },
      chains: {
        [anvil.caip2]: {
          rpcUrl: evmProxy.url,
          signerKey: 'env:CAIPAY_CRASH_EVM_KEY',
          assets: { [evm.asset]: { ...usdcAsset, methods: ['eip3009', 'transfer'] } },
        },
        [cluster.caip2]: {
          rpcUrl: solProxy.url,
          signerKey: 'env:CAIPAY_CRASH_SOLANA_KEY',
          assets: { [sol.asset]: usdcAsset },
        },
      },
    }),
  )

  const partnerId = await createPartner(pg.db)
  liveKey = (await createApiKey(pg.db, { partnerId, mode: 'live', role: 'partner' })).apiKey
  walletKey = (await createApiKey(pg.db, { partnerId, mode: 'live', role: 'wallet' })).apiKey

  const port = await freePort()
  server = new ServerProcess(
    ['--database-url', pg.url, '--config', configFile, '--port', String(port)],
    {
      ...process.env,
      NODE_OPTIONS: '',
      LOG_LEVEL: 'warn',
      CAIPAY_CRASH_EVM_KEY: anvilPrivateKeys[1],
      CAIPAY_CRASH_SOLANA_KEY: encodeBase58(sol.service.secretKey),
    },
    `http://127.0.0.1:${port}`,
  )
  await server.start()

  const merchant = await api('POST', '/v1/merchants', merchantHeaders('crash-merchant'), {
    merchantName: 'Crash Cafe',
    merchantEmail: 'crash@example.com',
  })
  expect(merchant.status, JSON.stringify(merchant.json)).toBe(201)
  merchantId = merchant.json.merchant.id
  const settlements = await api(
    'POST',
    `/v1/merchants/${merchantId}/settlements/crypto`,
    merchantHeaders('crash-settlements'),
    {
      settlements: [
        { asset: evm.asset, destination: `${anvil.caip2}:${evm.merchant}` },
        { asset: sol.asset, destination: `${cluster.caip2}:${sol.merchant.toBase58()}` },
      ],
    },
  )
  expect(settlements.status, JSON.stringify(settlements.json)).toBe(201)
}, 120_000)

afterAll(async () => {
  await server?.kill()
  for (const p of proxies) await p.stop()
  await cluster?.stop()
  await anvil?.stop()
  await pg?.drop()
  if (configDir) await rm(configDir, { recursive: true, force: true })
})

function merchantHeaders(idempotencyKey?: string): Record<string, string> {
  return {
    'api-key': liveKey,
    ...(merchantId ? { 'merchant-id': merchantId } : {}),
    ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}),
  }
}

// biome-ignore lint/suspicious/noExplicitAny: JSON from the wire, read field by field
type Wire = any

/**
 * A client that outlives the server: a request cut by a kill (or refused while it is down) is sent again
 * until the server answers, as a wallet or merchant integration would. Writes carry an Idempotency-Key,
 * so a retry of a request that did commit replays its answer.
 */
async function api(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<{ status: number; json: Wire }> {
  const deadline = Date.now() + 60_000
  for (;;) {
    try {
      const res = await fetch(`${server.url}${path}`, {
        method,
        headers: { ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
      const text = await res.text()
      return { status: res.status, json: text ? JSON.parse(text) : undefined }
    } catch (error) {
      if (Date.now() > deadline) throw error
      await sleep(50)
    }
  }
}

const gw = (method: string, paymentId: string, suffix: string, body?: unknown, key?: string) =>
  api(
    method,
    `/v1/gateway/payment/${paymentId}${suffix}`,
    { 'api-key': walletKey, ...(key ? { 'idempotency-key': key } : {}) },
    body,
  )

interface Paid {
  paymentId: string
  kind: 'gasless' | 'direct' | 'solana'
  /** Token minor units the buyer pays. */
  amount: bigint
}

const problems: string[] = []

async function createPayment(reference: string, usdCents: number): Promise<string> {
  const res = await api('POST', '/v1/payments', merchantHeaders(`pay-${reference}`), {
    referenceId: reference,
    amount: { unit: 'iso4217/USD', value: String(usdCents) },
  })
  if (res.status !== 201) throw new Error(`create ${reference}: ${res.status} ${JSON.stringify(res.json)}`)
  return res.json.paymentId
}

async function optionsFor(paymentId: string, account: string): Promise<PaymentOption[]> {
  const res = await gw('POST', paymentId, '/options', { accounts: [account] })
  if (res.status !== 200) throw new Error(`options ${paymentId}: ${res.status} ${JSON.stringify(res.json)}`)
  return res.json.options
}

/** Confirm, retried under one key; an answer other than processing/succeeded is a problem. */
async function confirm(paymentId: string, optionId: string, results: string[]) {
  const res = await gw('POST', paymentId, '/confirm', { optionId, results }, `confirm-${paymentId}`)
  if (res.status !== 200) problems.push(`confirm ${paymentId}: ${res.status} ${JSON.stringify(res.json)}`)
}

const signRequest = (
  signer: { request(r: { chainId: string; method: string; params: readonly unknown[] }): Promise<string> },
  action: WalletRpcAction,
) =>
  signer.request({
    chainId: action.walletRpc.chainId,
    method: action.walletRpc.method,
    params: JSON.parse(action.walletRpc.params),
  })

async function payGasless(i: number): Promise<Paid> {
  const usdCents = 1001 + i * 37
  const paymentId = await createPayment(`gasless-${i}`, usdCents)
  const signer = evmSigner({ account: evm.gaslessBuyer, chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } } })
  const option = (await optionsFor(paymentId, `${anvil.caip2}:${evm.gaslessBuyer.address}`)).find(
    (o) => o.actions[0]?.type === 'walletRpc' && o.actions[0].walletRpc.method === 'eth_signTypedData_v4',
  )!
  const action = option.actions[0] as WalletRpcAction
  await confirm(paymentId, option.id, [await signRequest(signer, action)])
  return { paymentId, kind: 'gasless', amount: BigInt(usdCents) * 10_000n }
}

async function payDirect(i: number): Promise<Paid> {
  const usdCents = 2003 + i * 41
  const paymentId = await createPayment(`direct-${i}`, usdCents)
  const buyer = evm.directBuyers[i]!
  const signer = evmSigner({
    account: buyer,
    chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } },
    pollingInterval: 100,
  })
  const option = (await optionsFor(paymentId, `${anvil.caip2}:${buyer.address}`)).find(
    (o) => o.actions[0]?.type === 'walletRpc' && o.actions[0].walletRpc.method === 'eth_sendTransaction',
  )!
  // The buyer's own transaction goes straight to the node; only the confirm needs the service.
  const hash = await signRequest(signer, option.actions[0] as WalletRpcAction)
  await confirm(paymentId, option.id, [hash])
  return { paymentId, kind: 'direct', amount: BigInt(usdCents) * 10_000n }
}

async function paySolana(i: number): Promise<Paid> {
  const usdCents = 3007 + i * 43
  const paymentId = await createPayment(`solana-${i}`, usdCents)
  const buyer = sol.buyers[i % sol.buyers.length]!
  const signer = solanaSigner({ keypair: buyer, chains: [cluster.caip2] })
  const option = (await optionsFor(paymentId, `${cluster.caip2}:${buyer.publicKey.toBase58()}`))[0]!
  const build = option.actions.find((a) => a.type === 'build')!
  const fetched = await gw('POST', paymentId, '/fetch', { optionId: option.id, data: build.build.data })
  if (fetched.status !== 200)
    throw new Error(`fetch ${paymentId}: ${fetched.status} ${JSON.stringify(fetched.json)}`)
  const results = []
  for (const action of fetched.json.actions as WalletRpcAction[])
    results.push(await signRequest(signer, action))
  await confirm(paymentId, option.id, results)
  return { paymentId, kind: 'solana', amount: BigInt(usdCents) * 10_000n }
}

// ---------------------------------------------------------------------------------------------------
// Where to kill. Each waits (polling the database the child writes to) for its moment, or gives up
// after a while and kills anyway.

type Trigger = 'job claimed' | 'transaction recorded' | 'settlement running' | 'random moment'
const triggers: Trigger[] = ['job claimed', 'transaction recorded', 'settlement running', 'random moment']

async function moment(trigger: Trigger): Promise<boolean> {
  if (trigger === 'random moment') {
    await sleep(200 + random() * 1500)
    return true
  }
  const deadline = Date.now() + 6_000
  while (Date.now() < deadline) {
    let hit = false
    if (trigger === 'job claimed') {
      hit = !!(await pg.db.selectFrom('jobs').select('id').where('state', '=', 'running').executeTakeFirst())
    } else if (trigger === 'settlement running') {
      hit = !!(await pg.db
        .selectFrom('jobs')
        .select('id')
        .where('state', '=', 'running')
        .where('kind', 'like', '%settle%')
        .executeTakeFirst())
    } else {
      const { rows } = await sql<{ n: string }>`
        SELECT (SELECT count(*) FROM evm_transactions WHERE status = 'sent')
             + (SELECT count(*) FROM solana_transactions WHERE state = 'pending') AS n`.execute(pg.db)
      hit = Number(rows[0]!.n) > 0
    }
    if (hit) return true
    await sleep(3)
  }
  return false
}

/** What the dead runner's lease would do after 10 s: let its claims go. */
async function leasesRunOut(): Promise<number> {
  const result = await pg.db
    .updateTable('jobs')
    .set({ locked_until: new Date(Date.now() - 1000) })
    .where('state', '=', 'running')
    .executeTakeFirst()
  return Number(result.numUpdatedRows)
}

/** Everything the database knows about these payments, for a failure message. */
async function explain(which: readonly Paid[]): Promise<string> {
  if (which.length === 0) return ''
  const ids = which.map((p) => p.paymentId)
  const rows = await pg.db
    .selectFrom('payments')
    .select(['id', 'status', 'failure_code', 'tx_id', 'settlement_status'])
    .where('id', 'in', ids)
    .execute()
  const jobs = await pg.db
    .selectFrom('jobs')
    .select(['payment_id', 'kind', 'state', 'attempts', 'result', 'last_error'])
    .where('payment_id', 'in', ids)
    .execute()
  const evmTxs = await pg.db
    .selectFrom('evm_transactions')
    .select(['payment_id', 'purpose', 'nonce', 'hash', 'status'])
    .where('payment_id', 'in', ids)
    .execute()
  const solTxs = await pg.db
    .selectFrom('solana_transactions')
    .select(['payment_id', 'purpose', 'signature', 'state', 'error', 'send_count'])
    .where('payment_id', 'in', ids)
    .execute()
  return JSON.stringify(
    {
      kinds: which.map((p) => [p.paymentId, p.kind]),
      rows,
      jobs,
      evmTxs,
      solTxs,
      log: server.log.slice(-6000),
    },
    null,
    1,
  )
}

const finalStatuses = new Set(['succeeded', 'failed', 'cancelled', 'expired'])

async function waitSettled(paid: readonly Paid[], timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  const views = new Map<string, Wire>()
  for (;;) {
    for (const p of paid) {
      if (views.has(p.paymentId)) continue
      const res = await api('GET', `/v1/payments/${p.paymentId}`, merchantHeaders())
      const view = res.json
      const done =
        finalStatuses.has(view.status) &&
        (view.status !== 'succeeded' || view.settlement === null || view.settlement.successful !== null)
      if (done) views.set(p.paymentId, view)
    }
    if (views.size === paid.length) return views
    if (Date.now() > deadline) {
      const stuck = paid.filter((p) => !views.has(p.paymentId)).map((p) => p.paymentId)
      const jobs = await pg.db.selectFrom('jobs').selectAll().where('payment_id', 'in', stuck).execute()
      throw new Error(
        `not final/settled: ${stuck.join(', ')}\njobs: ${JSON.stringify(jobs)}\nserver log:\n${server.log.slice(-4000)}`,
      )
    }
    await sleep(200)
  }
}

describe(`crash safety (seed ${seed})`, () => {
  it(`SIGKILLed ${kills} times mid-payment, the service still moves every amount exactly once`, async () => {
    console.info(`crash safety: seed ${seed} (replay with CAIPAY_CRASH_SEED=${seed})`)
    const evmBefore = {
      gaslessBuyer: await evmBalance(evm.gaslessBuyer.address),
      directBuyers: await Promise.all(evm.directBuyers.map((b) => evmBalance(b.address))),
    }
    const solBefore = await Promise.all(
      sol.buyers.map((b) => tokenBalance(cluster.connection, b.publicKey, sol.mint)),
    )

    // The buyers pay, staggered, while the killer works.
    let paying = true
    const flows: Promise<Paid>[] = []
    const stagger = async <T>(ms: number, f: () => Promise<T>) => {
      await sleep(ms)
      return f()
    }
    for (let i = 0; i < evmGasless; i++) flows.push(stagger(i * 400, () => payGasless(i)))
    for (let i = 0; i < evmDirect; i++) flows.push(stagger(200 + i * 900, () => payDirect(i)))
    for (let i = 0; i < solanaPayments; i++) flows.push(stagger(100 + i * 450, () => paySolana(i)))
    const paidAll = Promise.all(flows).finally(() => {
      paying = false
    })

    const schedule: string[] = []
    for (let k = 0; k < kills; k++) {
      const trigger = triggers[Math.floor(random() * triggers.length)]!
      const hit = await moment(trigger)
      const phase = paying ? 'while buyers pay' : 'after the last confirm'
      await server.kill()
      const released = await leasesRunOut()
      schedule.push(`${trigger}${hit ? '' : ' (timed out)'} ${phase}: released ${released} claims`)
      // Down for a moment: clients retry against a closed port.
      await sleep(random() * 300)
      await server.start()
      await sleep(200 + random() * 800)
    }
    const paid = await paidAll
    console.info(`kills: ${schedule.join('; ')}`)
    const views = await waitSettled(paid, 90_000)
    expect(problems).toEqual([])

    // Every payment succeeded: a crash may delay a payment, never fail or lose it.
    const statuses = paid.map((p) => [p.paymentId, views.get(p.paymentId).status])
    expect(
      statuses,
      await explain(paid.filter((p) => views.get(p.paymentId).status !== 'succeeded')),
    ).toEqual(paid.map((p) => [p.paymentId, 'succeeded']))

    // --- The database: one landed transaction per (payment, purpose), every job done, no duplicates.
    const ids = paid.map((p) => p.paymentId)
    // A job records its effect on the payment before it marks itself done: give the last one that moment.
    const jobsOf = () => pg.db.selectFrom('jobs').selectAll().where('payment_id', 'in', ids).execute()
    let jobs = await jobsOf()
    for (
      let waited = 0;
      waited < 30_000 && jobs.some((j) => j.state !== 'succeeded' && j.state !== 'failed');
      waited += 200
    ) {
      await sleep(200)
      jobs = await jobsOf()
    }
    expect(jobs.filter((j) => j.state !== 'succeeded').map((j) => [j.kind, j.payment_id, j.state])).toEqual(
      [],
    )
    const evmTxs = await pg.db
      .selectFrom('evm_transactions')
      .selectAll()
      .where('payment_id', 'in', ids)
      .execute()
    const solTxs = await pg.db
      .selectFrom('solana_transactions')
      .selectAll()
      .where('payment_id', 'in', ids)
      .execute()
    const landed = new Map<string, number>()
    for (const tx of evmTxs.filter((x) => x.status === 'succeeded'))
      landed.set(`${tx.payment_id}/${tx.purpose}`, (landed.get(`${tx.payment_id}/${tx.purpose}`) ?? 0) + 1)
    for (const tx of solTxs.filter((x) => x.state === 'landed'))
      landed.set(`${tx.payment_id}/${tx.purpose}`, (landed.get(`${tx.payment_id}/${tx.purpose}`) ?? 0) + 1)
    expect([...landed.entries()].filter(([, n]) => n !== 1)).toEqual([])

    // --- EVM on chain: every token Transfer (mints aside) is a transaction some payment names.
    const logs = await publicClient().getLogs({
      address: evm.token,
      event: parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
      fromBlock: 0n,
      toBlock: 'latest',
    })
    const movements = logs.filter((l) => l.args.from !== '0x0000000000000000000000000000000000000000')
    const named = new Map<string, { paymentId: string; what: 'payment' | 'settlement'; amount: bigint }>()
    for (const p of paid.filter((x) => x.kind !== 'solana')) {
      const view = views.get(p.paymentId)
      named.set(view.info.txId.toLowerCase(), { paymentId: p.paymentId, what: 'payment', amount: p.amount })
      // A settlement batch's one transfer pays the sum of its payments.
      const settlement = view.settlement?.successful?.txId.toLowerCase()
      if (settlement)
        named.set(settlement, {
          paymentId: p.paymentId,
          what: 'settlement',
          amount: (named.get(settlement)?.amount ?? 0n) + p.amount,
        })
    }
    const unexplained = movements.filter((l) => !named.has(l.transactionHash!.toLowerCase()))
    expect(unexplained.map((l) => [l.transactionHash, l.args.from, l.args.to, l.args.value])).toEqual([])
    const perTx = new Map<string, bigint[]>()
    for (const l of movements) {
      const h = l.transactionHash!.toLowerCase()
      perTx.set(h, [...(perTx.get(h) ?? []), l.args.value!])
    }
    // Exactly one Transfer per named transaction, of exactly the payment's amount (its batch's sum).
    for (const [hash, n] of named) expect([hash, n.what, perTx.get(hash)]).toEqual([hash, n.what, [n.amount]])

    const sum = (xs: readonly Paid[]) => xs.reduce((a, p) => a + p.amount, 0n)
    const gasless = paid.filter((p) => p.kind === 'gasless')
    const direct = paid.filter((p) => p.kind === 'direct')
    const solana = paid.filter((p) => p.kind === 'solana')
    expect(evmBefore.gaslessBuyer - (await evmBalance(evm.gaslessBuyer.address))).toBe(sum(gasless))
    const directAfter = await Promise.all(evm.directBuyers.map((b) => evmBalance(b.address)))
    expect(evmBefore.directBuyers.reduce((a, b) => a + b, 0n) - directAfter.reduce((a, b) => a + b, 0n)).toBe(
      sum(direct),
    )
    // Gasless funds pass through the collection address and on to the merchant; direct ones go straight.
    expect(await evmBalance(evm.collection)).toBe(0n)
    expect(await evmBalance(evm.merchant)).toBe(sum(gasless) + sum(direct))
    for (const p of direct) expect(views.get(p.paymentId).settlement).toBeNull()

    // --- Solana on chain: the balances say nothing moved twice.
    const solAfter = await Promise.all(
      sol.buyers.map((b) => tokenBalance(cluster.connection, b.publicKey, sol.mint)),
    )
    expect(solBefore.reduce((a, b) => a + b, 0n) - solAfter.reduce((a, b) => a + b, 0n)).toBe(sum(solana))
    expect(await tokenBalance(cluster.connection, sol.service.publicKey, sol.mint)).toBe(0n)
    expect(await tokenBalance(cluster.connection, sol.merchant, sol.mint)).toBe(sum(solana))
    // Every landed signature is on chain without error; nothing the service dropped ever landed.
    const statusesOnChain = await cluster.connection.getSignatureStatuses(solTxs.map((x) => x.signature))
    solTxs.forEach((tx, i) => {
      const s = statusesOnChain.value[i]
      if (tx.state === 'landed')
        expect([tx.signature, s?.err ?? null, s !== null]).toEqual([tx.signature, null, true])
      else
        expect([tx.signature, tx.state, s === null || s.err !== null]).toEqual([tx.signature, tx.state, true])
    })
    for (const p of solana)
      expect(views.get(p.paymentId).info.txId).toBe(
        solTxs.find((x) => x.payment_id === p.paymentId && x.purpose === 'payment' && x.state === 'landed')
          ?.signature,
      )
    console.info(
      `crash safety: ${paid.length} payments, ${server.starts} server starts, ${evmTxs.length} EVM and ${solTxs.length} Solana transactions recorded`,
    )
  }, 240_000)
})
