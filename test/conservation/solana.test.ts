import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { getAssociatedTokenAddressSync } from '@solana/spl-token'
import { Connection, Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaSigner } from '../../adapters/solana/index.js'
import { isPayError } from '../../src/errors/PayError.js'
import type { FlowSnapshot } from '../../src/flow/snapshot.js'
import { createPayClient } from '../../src/pay/createPayClient.js'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { encodeBase58 } from '../../src/server/chains/solana/keys.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { type OpenedDatabase, openDatabase } from '../../src/server/store/db.js'
import { type EmbeddedPostgres, freePort, startEmbeddedPostgres } from '../../src/server/store/embedded.js'
import { CaipayProcess } from '../chaos/processes.js'
import { type Fault, type FaultProxy, startFaultProxy } from '../rpcFaults.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
  tokenBalance,
} from '../solana/index.js'
import { ledgerAgrees } from './ledger.js'
import { type RpcLoadBalancer, startRpcLoadBalancer } from './loadBalancer.js'

/**
 * The conservation suite on Solana (issue 37): one `caipay serve --api-only` and two `--worker-only`
 * processes on their own PostgreSQL cluster take live payments for three merchants (two share a
 * settlement destination) on the litesvm cluster (clocked: 400 ms slots, so a
 * transaction is processed, then confirmed), paid by wallets through the caipay wallet library; refunds
 * are asked before and after the settlements, and the float those after draw on is an operator's top-up
 * minted to the service's token account only late (read from the chain into the ledger). Meanwhile the
 * fault classes play: workers SIGKILLed and SIGSTOPped (past their job lease) at a step (blockhash,
 * send, status read), PostgreSQL stopped and started, a send dropped, a node behind (statuses as nulls
 * from an older slot, its finalized height behind).
 *
 * After draining, the judge reads the token balance changes of every transaction touching the buyers',
 * destinations' and the service's token accounts from the cluster itself (never through a proxy) and
 * checks: buyers debited once, only for succeeded payments, by the transaction the API names; refunds
 * paid once, by the transaction the API names; each destination received exactly what its settlements
 * say; debited = delivered + refunded + fees with nothing pending; and the ledger agrees: the partner's
 * view is drained, no difference is open, and the operator's book at the service's token account adds up
 * to its balance on chain.
 *
 * Seeded: the seed is printed, `CONSERVATION_SEED=<seed>` replays the schedule (timing still varies).
 * `CONSERVATION_FAULTS=kill,pause,postgres,drop,behind` selects fault classes (default all; `none`).
 */
const faultClasses = ['kill', 'pause', 'postgres', 'drop', 'behind'] as const
type FaultClass = (typeof faultClasses)[number]

const long = process.env.CONSERVATION === 'long'
const seed = Number(process.env.CONSERVATION_SEED ?? Math.floor(Math.random() * 2 ** 31))
const selected = parseFaults(process.env.CONSERVATION_FAULTS)
const leaseMs = process.env.CONSERVATION_LEASE_MS ? Number(process.env.CONSERVATION_LEASE_MS) : 3_000
const plan = long
  ? { perMerchant: 6, spreadMs: 40_000, rounds: 3, floatDelayMs: 6_000, drainMs: 120_000, timeoutMs: 600_000 }
  : { perMerchant: 2, spreadMs: 10_000, rounds: 1, floatDelayMs: 3_000, drainMs: 45_000, timeoutMs: 150_000 }

function parseFaults(value: string | undefined): Set<FaultClass> {
  if (value === undefined || value === '' || value === 'all') return new Set(faultClasses)
  if (value === 'none') return new Set()
  // The EVM suite's classes with no Solana counterpart here are skipped, not refused: one variable
  // drives both files.
  const names = value.split(',').map((s) => s.trim())
  return new Set(names.filter((n): n is FaultClass => (faultClasses as readonly string[]).includes(n)))
}

/** mulberry32: small, seeded, good enough to replay a schedule. */
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
const between = (low: number, high: number) => low + random() * (high - low)
const pick = <T>(xs: readonly T[]): T => xs[Math.floor(random() * xs.length)]!
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let validator: SolanaValidator
let pgDir: string
let pgPort: number
let cluster: EmbeddedPostgres
let database: OpenedDatabase
let faultProxy: FaultProxy
const balancers = new Map<string, RpcLoadBalancer>()
let configDir: string
let api: CaipayProcess
const workers: CaipayProcess[] = []
const all = () => [api, ...workers]
let liveKey = ''
let walletKey = ''
let caip2 = ''
let mint: PublicKey
let asset = ''
const service = Keypair.generate()
const mintAuthority = Keypair.generate()
const events: string[] = []
let t0 = Date.now()
const note = (what: string) => events.push(`${((Date.now() - t0) / 1000).toFixed(1)}s ${what}`)

interface Merchant {
  id: string
  name: string
  destination: PublicKey
}
const merchants: Merchant[] = []

type RefundWhen = 'before' | 'after'
interface Planned {
  index: number
  merchant: Merchant
  usdCents: number
  amount: bigint
  buyer: Keypair
  refund?: { when: RefundWhen; cents: number }
}
const planned: Planned[] = []

const balanceOf = (owner: PublicKey) => tokenBalance(validator.connection, owner, mint)

async function startCluster() {
  cluster = await startEmbeddedPostgres({ dataDir: pgDir, port: pgPort })
}

beforeAll(async () => {
  t0 = Date.now()
  console.info(
    `conservation (Solana): seed ${seed}, faults ${[...selected].join(',') || 'none'} (replay with CONSERVATION_SEED=${seed}${process.env.CONSERVATION_FAULTS ? ` CONSERVATION_FAULTS=${process.env.CONSERVATION_FAULTS}` : ''}${long ? ' CONSERVATION=long' : ''})`,
  )
  pgDir = await mkdtemp(join(tmpdir(), 'caipay-conservation-sol-pg-'))
  pgPort = await freePort()
  ;[validator] = await Promise.all([
    startSolanaValidator({ backend: 'litesvm', slotMs: 400 }),
    startCluster(),
  ])
  database = await openDatabase({ databaseUrl: cluster.url })
  const { connection } = validator
  caip2 = validator.caip2
  await airdrop(connection, service.publicKey, 10 * LAMPORTS_PER_SOL)
  await airdrop(connection, mintAuthority.publicKey, 10 * LAMPORTS_PER_SOL)
  mint = await createTestMint(connection, mintAuthority, 6)
  asset = `${caip2}/token:${mint.toBase58()}`

  const shared = Keypair.generate().publicKey
  const destinations = [shared, shared, Keypair.generate().publicKey]
  const refundWhens: (RefundWhen | undefined)[] = ['before', 'after', undefined]
  for (let m = 0; m < 3; m++) {
    for (let i = 0; i < plan.perMerchant; i++) {
      const usdCents = 1000 + Math.floor(random() * 9000)
      const amount = BigInt(usdCents) * 10_000n
      const buyer = Keypair.generate()
      const when = pick(refundWhens)
      const full = random() < 0.3
      planned.push({
        index: planned.length,
        merchant: { id: '', name: `m${m + 1}`, destination: destinations[m]! },
        usdCents,
        amount,
        buyer,
        ...(when
          ? { refund: { when, cents: full ? usdCents : Math.floor(usdCents * between(0.2, 0.6)) } }
          : {}),
      })
    }
  }
  // Buyers hold exactly what they pay: their token accounts tell every debit and refund.
  await Promise.all(
    planned.map((p) => mintTestTokens(connection, mintAuthority, mint, p.buyer.publicKey, p.amount)),
  )

  faultProxy = await startFaultProxy(validator.rpcUrl)
  const partnerId = await createPartner(database.db)
  liveKey = (await createApiKey(database.db, { partnerId, mode: 'live', role: 'partner' })).apiKey
  walletKey = (await createApiKey(database.db, { partnerId, mode: 'live', role: 'wallet' })).apiKey
  configDir = await mkdtemp(join(tmpdir(), 'caipay-conservation-sol-'))
  const env = {
    ...process.env,
    NODE_OPTIONS: '',
    LOG_LEVEL: 'warn',
    DATABASE_URL: '',
    CAIPAY_CONSERVATION_SOLANA_KEY: encodeBase58(service.secretKey),
  }
  const processFor = async (name: string, role: 'api' | 'worker') => {
    // Each process its own balancer in front of the shared fault proxy: a trap knows whose call it holds.
    const balancer = await startRpcLoadBalancer(faultProxy.url, validator.rpcUrl)
    balancers.set(name, balancer)
    const configFile = join(configDir, `${name}.json`)
    await writeFile(configFile, JSON.stringify(serverConfig(balancer.url)))
    const args = ['--database-url', cluster.url, '--config', configFile]
    return new CaipayProcess(name, role, args, env, role === 'api' ? await freePort() : undefined)
  }
  api = await processFor('api', 'api')
  for (const name of ['worker-1', 'worker-2']) workers.push(await processFor(name, 'worker'))
  await Promise.all(all().map((p) => p.start()))

  for (const [m, name] of ['m1', 'm2', 'm3'].entries()) {
    const created = await merchantApi('POST', '/v1/merchants', `merchant-${name}`, {
      merchantName: `Conservation ${name}`,
      merchantEmail: `${name}@example.com`,
    })
    expect(created.status, JSON.stringify(created.json)).toBe(201)
    const merchant = { id: created.json.merchant.id as string, name, destination: destinations[m]! }
    merchants.push(merchant)
    const settlement = await merchantApi(
      'POST',
      `/v1/merchants/${merchant.id}/settlements/crypto`,
      `settlement-${name}`,
      { settlements: [{ asset, destination: `${caip2}:${merchant.destination.toBase58()}` }] },
      merchant.id,
    )
    expect(settlement.status, JSON.stringify(settlement.json)).toBe(201)
  }
  for (const p of planned) p.merchant = merchants.find((m) => m.name === p.merchant.name)!
}, 180_000)

afterAll(async () => {
  for (const w of workers) w.resume()
  await Promise.all(all().map((p) => p?.stop()))
  await Promise.all([...balancers.values()].map((b) => b.stop()))
  await faultProxy?.stop()
  await validator?.stop()
  await database?.close()
  await cluster?.stop()
  for (const dir of [configDir, pgDir]) if (dir) await rm(dir, { recursive: true, force: true })
})

function serverConfig(rpcUrl: string) {
  return {
    rateLimit: false,
    collectDataAtMinor: null,
    settlement: { intervalMs: 3_000 },
    // Reconciled every few seconds, under the load and the faults: a difference it finds (rightly or
    // not) stops sends and fails the run.
    jobs: { leaseMs, reconcileIntervalMs: 4_000 },
    chains: {
      [caip2]: {
        rpcUrl,
        signerKey: 'env:CAIPAY_CONSERVATION_SOLANA_KEY',
        assets: {
          // No settlement fee: `settlementFeeBps` is kept on EVM relays only.
          [asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' },
        },
      },
    },
  }
}

// biome-ignore lint/suspicious/noExplicitAny: JSON from the wire, read field by field
type Wire = any

/** The merchants' integration: retries a 5xx or a refused connection (the API may be mid-restart). */
async function merchantApi(
  method: string,
  path: string,
  idempotencyKey?: string,
  body?: unknown,
  merchantId?: string,
): Promise<{ status: number; json: Wire }> {
  const deadline = Date.now() + 60_000
  for (;;) {
    try {
      const res = await fetch(`${api.url}${path}`, {
        method,
        headers: {
          'api-key': liveKey,
          ...(merchantId ? { 'merchant-id': merchantId } : {}),
          ...(idempotencyKey ? { 'idempotency-key': `conservation-sol-${seed}-${idempotencyKey}` } : {}),
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
      const text = await res.text()
      if (res.status < 500) return { status: res.status, json: text ? JSON.parse(text) : undefined }
    } catch {
      // Not answering just now.
    }
    if (Date.now() > deadline) throw new Error(`${method} ${path}: the API did not answer`)
    await sleep(200)
  }
}

const transientCodes = ['network_error', 'internal_error', 'rate_limited', 'poll_timeout']
const resumableStates = ['signing', 'confirming', 'polling']

/** One buyer's wallet: resumes its persisted flow after a transient error, starts over after a final one. */
async function walletPays(p: Planned, link: string, deadline: number): Promise<string> {
  let snapshot: FlowSnapshot | undefined
  const signer = solanaSigner({ keypair: p.buyer, chains: [caip2] })
  for (;;) {
    const wallet = createPayClient({
      baseUrl: api.url,
      apiKey: walletKey,
      trustedHosts: [new URL(api.url).host],
      signers: [signer],
      poll: { intervalMs: 250, deadlineMs: Math.max(1_000, deadline - Date.now()) },
      retry: { attempts: 3, baseDelayMs: 150, maxDelayMs: 1_000 },
      persist: (s) => {
        if (resumableStates.includes(s.state)) snapshot = s
      },
    })
    try {
      const result = snapshot ? await wallet.resumeFlow(snapshot).execute() : await wallet.pay(link)
      return result.status
    } catch (error) {
      const code = isPayError(error) ? error.code : `unexpected: ${String(error)}`
      if (!transientCodes.includes(code)) snapshot = undefined
      if (Date.now() > deadline) return `gave up (${code})`
      await sleep(between(150, 600))
    }
  }
}

interface Paid extends Planned {
  paymentId: string
  wallet: string
  refundIds: string[]
}

const readPayment = async (p: Paid) =>
  (await merchantApi('GET', `/v1/payments/${p.paymentId}`, undefined, undefined, p.merchant.id)).json
const readRefund = async (p: Paid, id: string) =>
  (await merchantApi('GET', `/v1/refunds/${id}`, undefined, undefined, p.merchant.id)).json

async function untilPayment(p: Paid, done: (payment: Wire) => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (done(await readPayment(p))) return true
    await sleep(300)
  }
  return false
}

/** The merchant refunds `p` at its planned moment relative to the settlement. */
async function refundAsPlanned(p: Paid): Promise<void> {
  const refund = p.refund
  if (!refund) return
  if (!(await untilPayment(p, (x) => x.status === 'succeeded', 20_000))) return
  if (refund.when === 'after') await untilPayment(p, (x) => x.settlement?.successful != null, 40_000)
  const made = await merchantApi(
    'POST',
    '/v1/refunds',
    `refund-${p.index}`,
    { paymentId: p.paymentId, amount: { unit: 'iso4217/USD', value: String(refund.cents) } },
    p.merchant.id,
  )
  if (made.status !== 201) {
    note(`refund of ${p.paymentId} refused: ${made.status} ${JSON.stringify(made.json)}`)
    return
  }
  p.refundIds.push(made.json.refundId)
  note(`refund ${made.json.refundId} (${refund.when}, ${refund.cents} cents) of ${p.paymentId}`)
}

async function makePayment(p: Planned, deadline: number): Promise<Paid> {
  const created = await merchantApi(
    'POST',
    '/v1/payments',
    `payment-${p.index}`,
    {
      referenceId: `conservation-sol-${p.index}`,
      amount: { unit: 'iso4217/USD', value: String(p.usdCents) },
    },
    p.merchant.id,
  )
  if (created.status !== 201)
    throw new Error(`payment ${p.index}: ${created.status} ${JSON.stringify(created.json)}`)
  const paid: Paid = { ...p, paymentId: created.json.paymentId, wallet: '', refundIds: [] }
  paid.wallet = await walletPays(p, created.json.gatewayUrl, deadline)
  await refundAsPlanned(paid)
  return paid
}

// ---------------------------------------------------------------------------------------------------
// Fault classes.

const steps: Record<string, string> = {
  blockhash: 'getLatestBlockhash',
  send: 'sendTransaction',
  status: 'getSignatureStatuses',
}

/** `act` on `worker` at its next call of `step`'s method, or after `withinMs` if that call does not come. */
async function atStep(
  worker: CaipayProcess,
  step: string,
  withinMs: number,
  act: (trapped: boolean) => Promise<{ forward: boolean }>,
): Promise<string> {
  const balancer = balancers.get(worker.name)!
  let done: Promise<unknown> | undefined
  balancer.trap(steps[step]!, () => {
    const acted = act(true)
    done = acted
    return acted
  })
  const deadline = Date.now() + withinMs
  while (done === undefined && Date.now() < deadline) await sleep(50)
  if (done === undefined) {
    balancer.untrap(steps[step]!)
    await act(false)
    return `${worker.name} at a random moment (no ${step} within ${withinMs} ms)`
  }
  await done
  return `${worker.name} at ${step}`
}

async function pauseWorker(): Promise<string> {
  const worker = pick(workers)
  const step = pick(Object.keys(steps))
  const frozenMs = leaseMs + 3_000
  return `SIGSTOP ${frozenMs} ms: ${await atStep(worker, step, 5_000, async () => {
    worker.pause()
    await sleep(frozenMs)
    worker.resume()
    return { forward: true }
  })}`
}

async function killWorker(): Promise<string> {
  const worker = pick(workers)
  const step = pick(Object.keys(steps))
  const what = await atStep(worker, step, 5_000, async () => {
    await worker.kill()
    return { forward: false }
  })
  await sleep(between(500, 2_000))
  await worker.start()
  return `SIGKILL: ${what}`
}

async function restartPostgres(): Promise<string> {
  await cluster.stop()
  const downMs = between(1_000, 3_000)
  await sleep(downMs)
  await startCluster()
  return `PostgreSQL stopped for ${Math.round(downMs)} ms and started again`
}

async function dropSend(): Promise<string> {
  faultProxy.inject('sendTransaction', { kind: 'drop' }, { times: 1 })
  const before = faultProxy.calls('sendTransaction')
  const deadline = Date.now() + 8_000
  while (faultProxy.calls('sendTransaction') === before && Date.now() < deadline) await sleep(50)
  faultProxy.clear('sendTransaction')
  const hit = faultProxy.calls('sendTransaction') > before
  return `a send answered with its signature and dropped${hit ? '' : ' (no send came)'}`
}

/** A node `slots` behind: no status for anything (answered from an older slot), its finalized height older. */
function behind(slots: number): Record<string, Fault> {
  return {
    getSignatureStatuses: {
      kind: 'rewrite',
      fn: (answer) => {
        const result = answer.result as { context: { slot: number }; value: unknown[] }
        return {
          ...answer,
          result: { context: { slot: result.context.slot - slots }, value: result.value.map(() => null) },
        }
      },
    },
    getEpochInfo: {
      kind: 'rewrite',
      fn: (answer) => {
        const result = answer.result as { absoluteSlot: number; blockHeight: number }
        return {
          ...answer,
          result: {
            ...result,
            absoluteSlot: result.absoluteSlot - slots,
            blockHeight: result.blockHeight - slots,
          },
        }
      },
    },
  }
}

async function nodeBehind(windowMs: number): Promise<string> {
  const lagMs = Math.max(windowMs, 4_000)
  const faults = behind(200)
  for (const [method, fault] of Object.entries(faults)) faultProxy.inject(method, fault)
  await sleep(lagMs)
  for (const method of Object.keys(faults)) faultProxy.clear(method)
  return `a node 200 slots behind answered statuses and epoch info for ${Math.round(lagMs)} ms`
}

type Disruption = { cls: FaultClass; run: (windowMs: number) => Promise<string> }
const disruptions: Disruption[] = [
  { cls: 'kill', run: () => killWorker() },
  { cls: 'pause', run: () => pauseWorker() },
  { cls: 'postgres', run: () => restartPostgres() },
  { cls: 'drop', run: () => dropSend() },
  { cls: 'behind', run: (windowMs) => nodeBehind(windowMs) },
]

async function playFaults(spreadMs: number): Promise<void> {
  const lane = async (chosen: Disruption[]) => {
    const order: Disruption[] = []
    for (let r = 0; r < plan.rounds; r++) order.push(...[...chosen].sort(() => random() - 0.5))
    if (order.length === 0) return
    const slot = spreadMs / order.length
    for (const d of order) {
      const started = Date.now()
      try {
        note(`fault ${d.cls}: ${await d.run(between(0.5, 0.9) * slot)}`)
      } catch (error) {
        note(`fault ${d.cls} could not be played: ${String(error)}`)
      }
      await sleep(Math.max(0, slot - (Date.now() - started)))
    }
  }
  const processFaults = disruptions.filter(
    (d) => selected.has(d.cls) && (d.cls === 'kill' || d.cls === 'pause'),
  )
  const others = disruptions.filter((d) => selected.has(d.cls) && d.cls !== 'kill' && d.cls !== 'pause')
  await Promise.all([lane(processFaults), lane(others)])
}

function supervise(): () => Promise<void> {
  let stopped = false
  const loop = (async () => {
    while (!stopped) {
      await sleep(500)
      for (const p of all()) {
        const child = p.child
        if (child && child.exitCode !== null && child.signalCode === null) {
          note(`${p.name} exited by itself (${child.exitCode}); started again: ${p.log.slice(-300)}`)
          await p.start().catch((error) => note(`${p.name} did not start again: ${String(error)}`))
        }
      }
    }
  })()
  return async () => {
    stopped = true
    await loop
  }
}

const finalStatuses = new Set(['succeeded', 'failed', 'cancelled', 'expired'])

async function drained(paid: Paid[]): Promise<boolean> {
  for (const p of paid) {
    const payment = await readPayment(p)
    if (!finalStatuses.has(payment.status)) return false
    if (payment.status === 'succeeded') {
      const row = await database.db
        .selectFrom('payments')
        .select('settlement_status')
        .where('id', '=', p.paymentId)
        .executeTakeFirstOrThrow()
      if (row.settlement_status === 'pending') return false
    }
    for (const id of p.refundIds) if ((await readRefund(p, id)).status === 'pending') return false
  }
  return true
}

/** Oldest first, per transaction touching `owner`'s token account: its signature and what it moved there (+ in, - out). */
async function movements(owner: PublicKey): Promise<{ signature: string; delta: bigint }[]> {
  const { connection } = validator
  const account = getAssociatedTokenAddressSync(mint, owner, true)
  const listed = await connection.getSignaturesForAddress(account, { limit: 1000 }, 'confirmed')
  const found: { signature: string; delta: bigint }[] = []
  for (const entry of listed.filter((e) => !e.err).reverse()) {
    const tx = await connection.getTransaction(entry.signature, {
      commitment: 'confirmed',
      maxSupportedTransactionVersion: 0,
    })
    const keys = tx!.transaction.message.staticAccountKeys
    const held = (
      balances: { accountIndex: number; uiTokenAmount: { amount: string } }[] | null | undefined,
    ) => BigInt(balances?.find((b) => keys[b.accountIndex]!.equals(account))?.uiTokenAmount.amount ?? '0')
    const delta = held(tx!.meta!.postTokenBalances) - held(tx!.meta!.preTokenBalances)
    if (delta !== 0n) found.push({ signature: entry.signature, delta })
  }
  return found
}

describe(`conservation: live Solana payments and refunds through 1 API and 2 workers, judged from the chain (seed ${seed})`, () => {
  it('every unit is accounted for: buyers, destinations, refunds and the service token account', {
    timeout: plan.timeoutMs,
  }, async () => {
    const startedAt = Date.now()
    const serviceBefore = await balanceOf(service.publicKey)
    const stopSupervising = supervise()
    const walletDeadline = startedAt + plan.spreadMs + 30_000
    const order = [...planned].sort(() => random() - 0.5)
    const gap = plan.spreadMs / Math.ceil(order.length / 3)
    const payments = Promise.all(
      order.map((p, i) => sleep(Math.floor(i / 3) * gap).then(() => makePayment(p, walletDeadline))),
    )
    const faults = playFaults(plan.spreadMs)
    const paid = await payments
    await faults
    faultProxy.clear()
    for (const b of balancers.values()) b.untrap()
    note(`payments made: ${paid.map((p) => p.wallet).join(', ')}`)

    // The float is funded late, by an operator's top-up to the service's token account. Enough for every
    // refund, as on EVM: a refund asked "before" settlement draws on the float too when the batch closed
    // first (under faults it often does), and a float short of it leaves the refund waiting, rightly.
    await sleep(plan.floatDelayMs)
    const topUp = paid.reduce((n, p) => n + (p.refund ? BigInt(p.refund.cents) * 10_000n : 0n), 0n)
    // A connection of its own: web3.js waits for a blockhash newer than the one it cached over 30 s ago,
    // and the harness keeps one blockhash for as long as nothing expires it.
    const operator = new Connection(validator.rpcUrl, 'confirmed')
    if (topUp > 0n) await mintTestTokens(operator, mintAuthority, mint, service.publicKey, topUp)
    note(`float funded: ${topUp}`)

    const drainDeadline = Date.now() + plan.drainMs
    while (!(await drained(paid)) && Date.now() < drainDeadline) await sleep(500)
    await stopSupervising()
    // A few slots: everything the service counted as confirmed is confirmed on the node read here.
    await sleep(1_500)

    const violations: string[] = []
    let debited = 0n
    let delivered = 0n
    let refunded = 0n
    const settled = new Map<string, bigint>()
    const settlementTxs = new Map<string, Set<string>>()
    for (const p of paid) {
      const view = await readPayment(p)
      const row = await database.db
        .selectFrom('payments')
        .select(['settlement_value', 'settlement_status'])
        .where('id', '=', p.paymentId)
        .executeTakeFirstOrThrow()
      if (!finalStatuses.has(view.status)) violations.push(`payment ${p.paymentId} still ${view.status}`)
      if (row.settlement_status === 'pending') violations.push(`payment ${p.paymentId}: settlement pending`)
      const moves = await movements(p.buyer.publicKey)
      const debits = moves.filter((m) => m.delta < 0n)
      // Oldest first, the buyer's own mint is its first credit; every later one is a refund.
      const credits = moves.filter((m) => m.delta > 0n).slice(1)
      const succeeded = view.status === 'succeeded'
      // The buyer's own mint is its first credit of exactly `amount`; anything else is a refund.
      if (succeeded) {
        if (debits.length !== 1 || debits[0]!.delta !== -p.amount)
          violations.push(
            `buyer of ${p.paymentId} (succeeded) debited ${JSON.stringify(debits.map((d) => String(d.delta)))}`,
          )
        else if (debits[0]!.signature !== view.info?.txId)
          violations.push(
            `payment ${p.paymentId}: API txId ${view.info?.txId}, chain ${debits[0]!.signature}`,
          )
        debited += p.amount
      } else if (debits.length > 0)
        violations.push(`buyer of ${p.paymentId} (${view.status}) debited ${debits.length} times`)
      const refunds: { id: string; txId: string; value: bigint }[] = []
      for (const id of p.refundIds) {
        const refund = await readRefund(p, id)
        const record = await database.db
          .selectFrom('refunds')
          .select('asset_value')
          .where('id', '=', id)
          .executeTakeFirstOrThrow()
        if (refund.status === 'pending')
          violations.push(`refund ${id} still pending: ${await whyPending(id)}`)
        if (refund.status === 'succeeded')
          refunds.push({ id, txId: refund.txId as string, value: BigInt(record.asset_value ?? 0) })
      }
      const refundCredits = credits.filter((m) => refunds.some((r) => r.txId === m.signature))
      const unexplained = credits.filter((c) => !refunds.some((r) => r.txId === c.signature))
      if (refundCredits.length !== refunds.length || unexplained.length > 0)
        violations.push(
          `buyer of ${p.paymentId}: refunds ${JSON.stringify(refunds.map((r) => `${r.txId}:${r.value}`))}, chain credits ${JSON.stringify(credits.map((m) => `${m.signature}:${m.delta}`))}`,
        )
      for (const r of refunds) {
        const credit = moves.find((m) => m.signature === r.txId)
        if (credit?.delta !== r.value)
          violations.push(`refund ${r.id}: ${r.value} asked, chain ${credit?.delta}`)
        refunded += r.value
      }
      const destination = p.merchant.destination.toBase58()
      if (row.settlement_status === 'succeeded') {
        settled.set(destination, (settled.get(destination) ?? 0n) + BigInt(row.settlement_value ?? 0))
        const txId = view.settlement?.successful?.txId as string | undefined
        if (txId) settlementTxs.set(destination, (settlementTxs.get(destination) ?? new Set()).add(txId))
      }
    }
    for (const m of merchants) {
      const destination = m.destination.toBase58()
      if (merchants.find((x) => x.destination.equals(m.destination)) !== m) continue
      const moves = await movements(m.destination)
      const received = moves.reduce((n, x) => n + x.delta, 0n)
      delivered += received
      if (received !== (settled.get(destination) ?? 0n))
        violations.push(
          `destination ${destination}: received ${received}, settlements say ${settled.get(destination) ?? 0n}`,
        )
      const named = settlementTxs.get(destination) ?? new Set()
      for (const x of moves)
        if (!named.has(x.signature))
          violations.push(`destination ${destination}: transfer ${x.signature} no settlement names`)
    }
    // What the service kept: its fees, and what is left of the operator's top-up after the refunds it paid.
    const serviceAfter = await balanceOf(service.publicKey)
    const kept = serviceAfter - serviceBefore
    if (debited + topUp !== delivered + refunded + kept || kept < 0n)
      violations.push(
        `debited ${debited} + top-up ${topUp} != delivered ${delivered} + refunded ${refunded} + kept ${kept}`,
      )

    const holder = holderOf(caip2, service.publicKey.toBase58())
    const ledger = await ledgerAgrees(() => merchantApi('GET', '/v1/balances'), {
      asset,
      collection: service.publicKey.toBase58(),
      payments: [],
      refunds: [],
      collectionBalance: serviceAfter,
      book: (
        await database.db
          .selectFrom('ledger_accounts')
          .select(['kind', 'owner', 'balance'])
          .where('mode', '=', 'live')
          .where('holder', '=', holder)
          .where(sql<boolean>`lower(asset) = ${asset.toLowerCase()}`)
          .execute()
      ).map((a) => ({ kind: a.kind, owner: a.owner, balance: BigInt(a.balance) })),
    })
    violations.push(...ledger.violations)

    const count = (values: string[]) =>
      Object.fromEntries([...new Set(values)].map((v) => [v, values.filter((x) => x === v).length]))
    console.info(
      [
        `conservation (Solana): seed ${seed}, faults ${[...selected].join(',') || 'none'}; ${paid.length} payments, ${paid.reduce((n, p) => n + p.refundIds.length, 0)} refunds in ${Math.round((Date.now() - startedAt) / 1000)} s`,
        `wallets: ${JSON.stringify(count(paid.map((p) => p.wallet)))}; debited ${debited}, delivered ${delivered}, refunded ${refunded}, kept ${kept}, top-up ${topUp}`,
        `ledger: ${ledger.note}`,
        `process starts: ${all()
          .map((p) => `${p.name} ${p.starts}`)
          .join(', ')}`,
        ...events,
      ].join('\n'),
    )
    expect(violations, `conservation on Solana (seed ${seed}, faults ${[...selected].join(',')})`).toEqual([])
  })
})

/** What the service holds about a refund still pending: its job and its transactions, for the report. */
async function whyPending(refundId: string): Promise<string> {
  const jobs = await database.db
    .selectFrom('jobs')
    .select(['state', 'attempts', 'last_error', 'run_at'])
    .where('refund_id', '=', refundId)
    .execute()
  const transactions = await database.db
    .selectFrom('solana_transactions')
    .select(['signature', 'state', 'error', 'first_sent_at'])
    .where('refund_id', '=', refundId)
    .execute()
  const refund = await database.db
    .selectFrom('refunds')
    .select(['failure_code'])
    .where('id', '=', refundId)
    .executeTakeFirst()
  return JSON.stringify({ refund, jobs, transactions })
}
