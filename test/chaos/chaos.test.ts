import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { type Address, createPublicClient, http, parseAbiItem } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import { permit2Address } from '../../protocol/evm/index.js'
import type { Signer } from '../../src/actions/types.js'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { isPayError } from '../../src/errors/PayError.js'
import type { FlowSnapshot } from '../../src/flow/snapshot.js'
import { createPayClient } from '../../src/pay/createPayClient.js'
import { createApiKey, createPartner } from '../../src/server/accounts/accounts.js'
import { encodeBase58 } from '../../src/server/chains/solana/index.js'
import {
  type AnvilInstance,
  anvilControl,
  anvilPrivateKeys,
  deployTestToken,
  mintTestToken,
  startAnvil,
} from '../anvil.js'
import { coinbaseFactoryAddress, deployPayers, deployTetherAndPermit2 } from '../evm/payers.js'
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
import { type ChaosFault, type ChaosTargets, chaosFaults } from './faults.js'
import { CaipayProcess } from './processes.js'

/**
 * The chaos suite of issue 17. A batch of live payments, made the way wallets make them (the caipay
 * wallet library with real viem and web3.js keys, gasless EIP-3009 on Anvil relayed by the service, and
 * Solana on the litesvm harness; among the EVM payers a deployed Coinbase-style smart account (ERC-1271),
 * an undeployed one paying through the allow-listed factory (ERC-6492), and an EOA paying a USDT-style
 * token through Permit2, approve included), goes through 3 `caipay serve --api-only` and 2 `--worker-only`
 * processes on one PostgreSQL, while the fault proxies in front of both chains inject every fault class
 * of the issue and processes are SIGKILLed at random moments and started again.
 *
 * Afterwards: every payment is final, or still `processing` with a recorded transaction; no transfer
 * happened twice (each buyer pays one payment, so its balance moved by that amount or not at all, and
 * each payment has at most one Transfer); the tokens that moved on chain are exactly the succeeded
 * payments and the recorded settlements, to the unit; and every final state reached the merchant's
 * webhook endpoint.
 *
 * The kills and faults are drawn from a seeded PRNG: the seed is printed, and `CHAOS_SEED=<seed>`
 * replays the same schedule (timing on a shared machine still varies). `CHAOS=long` (`npm run chaos`)
 * runs a longer batch with more kills and every fault several times.
 */
const long = process.env.CHAOS === 'long'
const seed = Number(process.env.CHAOS_SEED ?? Math.floor(Math.random() * 2 ** 31))
const plan = long
  ? {
      gasless: 24,
      smart: 2,
      solana: 30,
      spreadMs: 75_000,
      faultRounds: 3,
      drainMs: 120_000,
      timeoutMs: 600_000,
    }
  : { gasless: 4, smart: 1, solana: 7, spreadMs: 18_000, faultRounds: 1, drainMs: 40_000, timeoutMs: 115_000 }
/** A killed worker stays down longer than a job lease (10 s), so its jobs must move to the other worker. */
const workerDownMs = 11_000

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
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

let pg: TestDatabase
let anvil: AnvilInstance
let validator: SolanaValidator
let evmProxy: FaultProxy
let solanaProxy: FaultProxy
let configDir: string
let webhookReceiver: Server
const apis: CaipayProcess[] = []
const workers: CaipayProcess[] = []
const all = () => [...apis, ...workers]

const evm = {
  token: '' as Address,
  asset: '',
  /** The USDT-style token (no EIP-3009), collected through Permit2. */
  tether: '' as Address,
  tetherAsset: '',
  collection: privateKeyToAccount(anvilPrivateKeys[1]).address,
  merchant: privateKeyToAccount(generatePrivateKey()).address,
}
const sol = {
  service: Keypair.generate(),
  mintAuthority: Keypair.generate(),
  mint: undefined as unknown as PublicKey,
  asset: '',
  merchant: Keypair.generate().publicKey,
}
let liveKey = ''
let walletKey = ''
let merchantId = ''
/** Event types the merchant's webhook endpoint received, by payment id. */
const webhookEvents = new Map<string, Set<string>>()

/**
 * gasless: an EOA signing EIP-3009; erc1271 / erc6492: a deployed / undeployed Coinbase-style smart
 * account signing EIP-3009 as itself; permit2: an EOA paying the USDT-style token (approve, then the
 * witness transfer).
 */
type Kind = 'gasless' | 'erc1271' | 'erc6492' | 'permit2' | 'solana'
const evmKinds: readonly Kind[] = ['gasless', 'erc1271', 'erc6492', 'permit2']

interface Planned {
  index: number
  kind: Kind
  usdCents: number
  /** Token minor units (6 decimals, 1 USD a token). */
  amount: bigint
  /** Each payment has its own buyer: its balance tells whether it paid once, never or twice. */
  signer: Signer
  buyer: string
  evmBuyer?: Address
  /** The token an EVM buyer pays in. */
  token?: Address
  /** Which of the offered options the buyer taps. */
  selectOption?: (options: readonly PaymentOption[]) => string
  solanaBuyer?: PublicKey
}

/**
 * The option whose actions carry `marker` (a typed-data primary type). None (the service offered nothing
 * it could serve just then) leaves the choice empty, and the wallet library answers `no_options`.
 */
const optionWith = (marker: string) => (options: readonly PaymentOption[]) =>
  options.find((o) => o.actions.some((a) => a.type === 'walletRpc' && a.walletRpc.params.includes(marker)))
    ?.id as string

const planned: Planned[] = []
const publicClient = () => createPublicClient({ transport: http(anvil.rpcUrl) })
const anvilRpc = (method: string, params: unknown[] = []) =>
  publicClient().request({ method, params } as never) as Promise<unknown>
const evmBalance = (address: Address, token = evm.token): Promise<bigint> =>
  publicClient().readContract({
    address: token,
    // Both tokens answer ERC-20's balanceOf.
    abi: testUsdcAbi,
    functionName: 'balanceOf',
    args: [address],
  })
const solanaBalance = (owner: PublicKey) => tokenBalance(validator.connection, owner, sol.mint)

beforeAll(async () => {
  console.info(`chaos: seed ${seed} (replay with CHAOS_SEED=${seed}${long ? ' CHAOS=long' : ''})`)
  ;[pg, anvil, validator] = await Promise.all([
    createTestDatabase(),
    startAnvil({ args: ['--hardfork', 'prague'] }),
    startSolanaValidator({ backend: 'litesvm' }),
  ])
  evm.token = await deployTestToken(anvil.rpcUrl)
  evm.asset = `${anvil.caip2}/erc20:${evm.token}`
  const payers = await deployPayers({ anvil, publicClient: publicClient() })
  evm.tether = (await deployTetherAndPermit2(anvil.rpcUrl)).tether
  evm.tetherAsset = `${anvil.caip2}/erc20:${evm.tether}`
  const { connection } = validator
  await airdrop(connection, sol.service.publicKey, 10 * LAMPORTS_PER_SOL)
  await airdrop(connection, sol.mintAuthority.publicKey, 10 * LAMPORTS_PER_SOL)
  sol.mint = await createTestMint(connection, sol.mintAuthority, 6)
  sol.asset = `${validator.caip2}/token:${sol.mint.toBase58()}`

  const kinds: Kind[] = [
    ...Array<Kind>(plan.gasless).fill('gasless'),
    ...(['erc1271', 'erc6492', 'permit2'] as const).flatMap((k) => Array<Kind>(plan.smart).fill(k)),
    ...Array<Kind>(plan.solana).fill('solana'),
  ]
  const chains = { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } }
  for (const [i, kind] of kinds.entries()) {
    const usdCents = 1000 + Math.floor(random() * 9000)
    const amount = BigInt(usdCents) * 10_000n
    if (kind === 'gasless' || kind === 'erc1271' || kind === 'erc6492') {
      // Gasless buyers hold tokens and no ether: the service's executor pays the gas (and deploys the
      // undeployed account through the allow-listed factory).
      const account =
        kind === 'gasless'
          ? privateKeyToAccount(generatePrivateKey())
          : (await payers.coinbase(kind === 'erc1271')).account
      await mintTestToken(anvil.rpcUrl, evm.token, account.address, amount * 2n)
      planned.push({
        index: i,
        kind,
        usdCents,
        amount,
        signer: evmSigner({ account, chains }),
        buyer: `${anvil.caip2}:${account.address}`,
        evmBuyer: account.address,
        token: evm.token,
        selectOption: optionWith('WithAuthorization'),
      })
    } else if (kind === 'permit2') {
      // The Permit2 payer sends its own approve (ether for that gas), then signs the witness transfer.
      const account = privateKeyToAccount(generatePrivateKey())
      await anvilRpc('anvil_setBalance', [account.address, '0xde0b6b3a7640000'])
      // The USDT-style token's open mint has TestUSDC's signature.
      await mintTestToken(anvil.rpcUrl, evm.tether, account.address, amount * 2n)
      planned.push({
        index: i,
        kind,
        usdCents,
        amount,
        signer: evmSigner({ account, chains, spenders: [`${anvil.caip2}:${permit2Address}`] }),
        buyer: `${anvil.caip2}:${account.address}`,
        evmBuyer: account.address,
        token: evm.tether,
        selectOption: optionWith('PermitWitnessTransferFrom'),
      })
    } else {
      const keypair = Keypair.generate()
      await mintTestTokens(connection, sol.mintAuthority, sol.mint, keypair.publicKey, amount * 2n)
      planned.push({
        index: i,
        kind,
        usdCents,
        amount,
        // The wallet's own node: blockhashes are checked before signing and earlier signatures read.
        signer: solanaSigner({ keypair, chains: [validator.caip2], connection }),
        buyer: `${validator.caip2}:${keypair.publicKey.toBase58()}`,
        solanaBuyer: keypair.publicKey,
      })
    }
  }
  // From here on a block every second: confirmations take time, and mining can be paused and resumed.
  await anvilRpc('evm_setAutomine', [false])
  await anvilRpc('evm_setIntervalMining', [1])

  ;[evmProxy, solanaProxy] = await Promise.all([
    startFaultProxy(anvil.rpcUrl),
    startFaultProxy(validator.rpcUrl),
  ])
  const usdc = { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' }
  configDir = await mkdtemp(join(tmpdir(), 'caipay-chaos-'))
  const configFile = join(configDir, 'caipay.config.json')
  await writeFile(
    configFile,
    JSON.stringify({
      rateLimit: false,
      collectDataAtMinor: null,
      webhooks: { allowPrivateUrls: true, timeoutMs: 2_000 },
      // Short batches: several payments' settlements share a transfer while processes are killed.
      settlement: { intervalMs: 1000 },
      chains: {
        [anvil.caip2]: {
          rpcUrl: evmProxy.url,
          signerKey: 'env:CAIPAY_CHAOS_EVM_KEY',
          feeBumpAfterMs: 1_000,
          confirmations: 2,
          eip6492Factories: [coinbaseFactoryAddress],
          assets: {
            [evm.asset]: { ...usdc, methods: ['eip3009'] },
            [evm.tetherAsset]: {
              ...usdc,
              symbol: 'USDT',
              name: 'Tether USD',
              methods: ['eip3009'],
              transferMethod: 'permit2',
            },
          },
        },
        [validator.caip2]: {
          rpcUrl: solanaProxy.url,
          signerKey: 'env:CAIPAY_CHAOS_SOLANA_KEY',
          assets: { [sol.asset]: usdc },
        },
      },
    }),
  )
  const partnerId = await createPartner(pg.db)
  liveKey = (await createApiKey(pg.db, { partnerId, mode: 'live', role: 'partner' })).apiKey
  walletKey = (await createApiKey(pg.db, { partnerId, mode: 'live', role: 'wallet' })).apiKey

  const env = {
    ...process.env,
    NODE_OPTIONS: '',
    LOG_LEVEL: 'warn',
    DATABASE_URL: '',
    CAIPAY_CHAOS_EVM_KEY: anvilPrivateKeys[1],
    CAIPAY_CHAOS_SOLANA_KEY: encodeBase58(sol.service.secretKey),
  }
  const args = ['--database-url', pg.url, '--config', configFile]
  for (let i = 0; i < 3; i++) apis.push(new CaipayProcess(`api-${i + 1}`, 'api', args, env, await freePort()))
  for (let i = 0; i < 2; i++) workers.push(new CaipayProcess(`worker-${i + 1}`, 'worker', args, env))
  await Promise.all(all().map((p) => p.start()))

  const merchant = await merchantApi(
    'POST',
    '/v1/merchants',
    { 'idempotency-key': 'chaos-merchant' },
    {
      merchantName: 'Chaos Cafe',
      merchantEmail: 'chaos@example.com',
    },
  )
  expect(merchant.status, JSON.stringify(merchant.json)).toBe(201)
  merchantId = merchant.json.merchant.id
  const settlements = await merchantApi(
    'POST',
    `/v1/merchants/${merchantId}/settlements/crypto`,
    { 'idempotency-key': 'chaos-settlements' },
    {
      settlements: [
        { asset: evm.asset, destination: `${anvil.caip2}:${evm.merchant}` },
        { asset: evm.tetherAsset, destination: `${anvil.caip2}:${evm.merchant}` },
        { asset: sol.asset, destination: `${validator.caip2}:${sol.merchant.toBase58()}` },
      ],
    },
  )
  expect(settlements.status, JSON.stringify(settlements.json)).toBe(201)

  webhookReceiver = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk) => {
      body += chunk
    })
    req.on('end', () => {
      try {
        const event = JSON.parse(body) as { type: string; data: { payment_id: string } }
        const seen = webhookEvents.get(event.data.payment_id) ?? new Set<string>()
        seen.add(event.type)
        webhookEvents.set(event.data.payment_id, seen)
      } catch {
        // Not an event: nothing to count.
      }
      res.writeHead(204).end()
    })
  })
  await new Promise<void>((resolve) => webhookReceiver.listen(0, '127.0.0.1', resolve))
  const endpoint = await merchantApi(
    'POST',
    '/v1/webhook-endpoints',
    { 'idempotency-key': 'chaos-hook' },
    {
      url: `http://127.0.0.1:${(webhookReceiver.address() as AddressInfo).port}/hooks`,
    },
  )
  expect(endpoint.status, JSON.stringify(endpoint.json)).toBe(201)
}, 120_000)

afterAll(async () => {
  await Promise.all(all().map((p) => p.stop()))
  await evmProxy?.stop()
  await solanaProxy?.stop()
  await validator?.stop()
  await anvil?.stop()
  await pg?.drop()
  webhookReceiver?.close()
  if (configDir) await rm(configDir, { recursive: true, force: true })
})

// biome-ignore lint/suspicious/noExplicitAny: JSON from the wire, read field by field
type Wire = any

/**
 * The merchant's integration: a request that finds its API instance dead goes to the next one (as
 * behind a load balancer), and writes carry an Idempotency-Key, so a retry replays a committed answer.
 */
async function merchantApi(
  method: string,
  path: string,
  headers: Record<string, string>,
  body?: unknown,
): Promise<{ status: number; json: Wire }> {
  const deadline = Date.now() + 60_000
  for (let attempt = Math.floor(random() * apis.length); ; attempt++) {
    const instance = apis[attempt % apis.length]!
    try {
      const res = await fetch(`${instance.url}${path}`, {
        method,
        headers: {
          'api-key': liveKey,
          ...(merchantId ? { 'merchant-id': merchantId } : {}),
          ...headers,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
      const text = await res.text()
      if (res.status < 500) return { status: res.status, json: text ? JSON.parse(text) : undefined }
    } catch (error) {
      if (Date.now() > deadline) throw error
    }
    if (Date.now() > deadline) throw new Error(`${method} ${path}: no API instance answered`)
    await sleep(100)
  }
}

/** `promise`, or an error saying `why()` when it has not settled by the time `at`. */
async function settleBy<T>(promise: Promise<T>, at: number, why: () => string): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(why())), at - Date.now())
  })
  try {
    return await Promise.race([promise, late])
  } finally {
    clearTimeout(timer)
  }
}

/** Each wallet still paying, by payment id: its kind and last flow state (for a wedged run's message). */
const walletStates = new Map<string, string>()

const transientCodes = ['network_error', 'internal_error', 'rate_limited', 'poll_timeout']
const resumableStates = ['signing', 'confirming', 'polling']

interface WalletOutcome {
  paymentId: string
  /** The status the wallet library reported, or `gave up` when it never got a final one. */
  status: string
  /** PayError codes the wallet met on the way (each followed by a resume or a fresh attempt). */
  errors: string[]
}

/**
 * One buyer's wallet: the wallet library against one API instance's gateway. When the instance dies or
 * answers an error, it continues where it was (the persisted flow snapshot: results are reused, never
 * signed again) against the next instance; when the flow itself ended (say a quote expired twice) it
 * starts over on the same link, as a buyer tapping "pay" again would.
 */
async function walletPays(
  p: Planned,
  link: string,
  paymentId: string,
  deadline: number,
): Promise<WalletOutcome> {
  const errors: string[] = []
  let snapshot: FlowSnapshot | undefined
  for (let attempt = Math.floor(random() * apis.length); ; attempt++) {
    const instance = apis[attempt % apis.length]!
    const wallet = createPayClient({
      baseUrl: instance.url,
      apiKey: walletKey,
      trustedHosts: apis.map((a) => new URL(a.url).host),
      signers: [p.signer],
      poll: { intervalMs: 250, deadlineMs: Math.max(1_000, deadline - Date.now()) },
      retry: { attempts: 3, baseDelayMs: 150, maxDelayMs: 1_000 },
      persist: (s) => {
        walletStates.set(paymentId, `${p.kind} ${s.state}`)
        if (resumableStates.includes(s.state)) snapshot = s
      },
    })
    try {
      const result = snapshot
        ? await wallet.resumeFlow(snapshot).execute()
        : await wallet.pay(link, p.selectOption ? { selectOption: p.selectOption } : {})
      walletStates.delete(paymentId)
      return { paymentId, status: result.status, errors }
    } catch (error) {
      const code = isPayError(error) ? error.code : `unexpected: ${String(error)}`
      errors.push(code)
      if (!transientCodes.includes(code)) snapshot = undefined
      if (Date.now() > deadline) {
        walletStates.delete(paymentId)
        return { paymentId, status: 'gave up', errors }
      }
      await sleep(between(150, 600))
    }
  }
}

interface Paid extends Planned {
  paymentId: string
  wallet: WalletOutcome
}

async function makePayment(p: Planned, deadline: number): Promise<Paid> {
  const created = await merchantApi(
    'POST',
    '/v1/payments',
    { 'idempotency-key': `chaos-payment-${p.index}` },
    {
      referenceId: `chaos-${p.index}`,
      amount: { unit: 'iso4217/USD', value: String(p.usdCents) },
    },
  )
  if (created.status !== 201)
    throw new Error(`payment ${p.index}: ${created.status} ${JSON.stringify(created.json)}`)
  const { paymentId, gatewayUrl } = created.json as { paymentId: string; gatewayUrl: string }
  return { ...p, paymentId, wallet: await walletPays(p, gatewayUrl, paymentId, deadline) }
}

// ---------------------------------------------------------------------------------------------------
// The killer: SIGKILLs a random live process every few seconds and starts it again. A killed worker
// stays down longer than a lease, and the time until another process takes over the jobs it held is
// measured from the jobs table: a job still `running` under the claim it had at the kill, whose lease
// nobody renewed, was the dead worker's; "progress" is when it is claimed again or finished.

interface Kill {
  at: number
  victim: string
  /** ms from SIGKILL to the first of its jobs making progress elsewhere; undefined: it held none. */
  takeoverMs?: number
  heldJobs?: number
}

async function runningJobs() {
  return pg.db
    .selectFrom('jobs')
    .select(['id', 'kind', 'attempts', 'locked_until', 'state'])
    .where('state', '=', 'running')
    .execute()
}

async function measureTakeover(kill: Kill, before: Awaited<ReturnType<typeof runningJobs>>): Promise<void> {
  if (before.length === 0) return
  const ids = before.map((j) => j.id)
  const start = new Map(before.map((j) => [j.id, j]))
  const progressed = new Map<string, number>()
  const orphans = new Set<string>()
  const deadline = kill.at + 25_000
  while (Date.now() < deadline) {
    const now = await pg.db
      .selectFrom('jobs')
      .select(['id', 'attempts', 'locked_until', 'state'])
      .where('id', 'in', ids)
      .execute()
    for (const job of now) {
      const was = start.get(job.id)!
      const untouched =
        job.state === 'running' &&
        job.attempts === was.attempts &&
        job.locked_until?.getTime() === was.locked_until?.getTime()
      // A live worker renews every ~3.3 s: a lease still as it was 4 s after the kill is the dead one's.
      if (untouched && Date.now() - kill.at > 4_000) orphans.add(job.id)
      if (!untouched && !progressed.has(job.id)) progressed.set(job.id, Date.now())
    }
    if (orphans.size > 0 && [...orphans].every((id) => progressed.has(id))) break
    if (orphans.size === 0 && progressed.size === ids.length) return
    await sleep(100)
  }
  if (orphans.size === 0) return
  kill.heldJobs = orphans.size
  const times = [...orphans].map((id) => progressed.get(id)).filter((t): t is number => t !== undefined)
  if (times.length > 0) kill.takeoverMs = Math.min(...times) - kill.at
}

async function killer(until: () => boolean): Promise<Kill[]> {
  const kills: Kill[] = []
  const restarts: Promise<void>[] = []
  const measures: Promise<void>[] = []
  while (!until()) {
    await sleep(between(2_000, 4_500))
    if (until()) break
    const candidates = all().filter(
      (p) =>
        p.alive &&
        (p.role === 'api' ? apis.filter((a) => a.alive).length > 1 : workers.every((w) => w.alive)),
    )
    // The second kill of a run is a worker's, at a moment when jobs run, so every run measures a
    // takeover (when that worker held one of them); the others fall where they fall.
    const forced = kills.length === 1 ? candidates.filter((p) => p.role === 'worker') : []
    const pool = forced.length > 0 ? forced : candidates
    if (pool.length === 0) continue
    const victim = pool[Math.floor(random() * pool.length)]!
    if (forced.length > 0) {
      const busyBy = Date.now() + 4_000
      while ((await runningJobs()).length < 2 && Date.now() < busyBy) await sleep(50)
    }
    const before = victim.role === 'worker' ? await runningJobs() : []
    await victim.kill()
    const kill: Kill = { at: Date.now(), victim: victim.name }
    kills.push(kill)
    if (victim.role === 'worker') measures.push(measureTakeover(kill, before))
    const downMs = victim.role === 'worker' ? workerDownMs : between(200, 1_500)
    restarts.push(sleep(downMs).then(() => victim.start()))
  }
  await Promise.all(restarts)
  await Promise.all(measures)
  return kills
}

// ---------------------------------------------------------------------------------------------------

/** Plays the fault catalogue `rounds` times in a seeded order: EVM and Solana faults in two lanes. */
async function faultLanes(rounds: number, targets: ChaosTargets, spreadMs: number): Promise<string[]> {
  const played: string[] = []
  const lane = async (faults: ChaosFault[]) => {
    const order: ChaosFault[] = []
    for (let r = 0; r < rounds; r++) order.push(...[...faults].sort(() => random() - 0.5))
    const slot = spreadMs / order.length
    for (const fault of order) {
      const windowMs = between(0.4, 0.8) * slot
      played.push(fault.name)
      await fault.apply(targets, windowMs)
      await sleep(slot - windowMs)
    }
  }
  await Promise.all([
    lane(chaosFaults.filter((f) => f.chain === 'evm')),
    lane(chaosFaults.filter((f) => f.chain === 'solana')),
  ])
  return played
}

const finalStatuses = new Set(['succeeded', 'failed', 'cancelled', 'expired'])

async function paymentRows(ids: string[]) {
  return pg.db
    .selectFrom('payments')
    .select([
      'id',
      'status',
      'failure_code',
      'tx_id',
      'settlement_status',
      'settlement_tx_id',
      'settlement_value',
    ])
    .where('id', 'in', ids)
    .execute()
}

/** Until every payment is final and settled, or the drain time is up. */
async function drain(ids: string[], timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const rows = await paymentRows(ids)
    const open = rows.filter((r) => !finalStatuses.has(r.status) || r.settlement_status === 'pending')
    if (open.length === 0 || Date.now() > deadline) return rows
    await sleep(250)
  }
}

describe(`chaos: live payments through 3 API instances and 2 workers under chain faults and SIGKILLs (seed ${seed})`, () => {
  it('every payment ends final or honestly processing with its hash, nothing moves twice, and the chains balance to the unit', {
    timeout: plan.timeoutMs,
  }, async () => {
    const startedAt = Date.now()
    const buyerBalance = (p: Planned) =>
      p.evmBuyer ? evmBalance(p.evmBuyer, p.token) : solanaBalance(p.solanaBuyer!)
    const before = new Map(
      await Promise.all(planned.map(async (p) => [p.index, await buyerBalance(p)] as const)),
    )
    const evmTokens = [evm.token, evm.tether]
    const collectionBefore = new Map(
      await Promise.all(evmTokens.map(async (t) => [t, await evmBalance(evm.collection, t)] as const)),
    )
    const firstBlock = await publicClient().getBlockNumber()

    const walletDeadline = startedAt + plan.spreadMs + plan.drainMs - 5_000
    const order = [...planned].sort(() => random() - 0.5)
    const gap = plan.spreadMs / order.length
    const payments = Promise.all(
      order.map((p, i) => sleep(i * gap).then(() => makePayment(p, walletDeadline))),
    )
    let chaosOver = false
    const targets: ChaosTargets = {
      evm: evmProxy,
      solana: solanaProxy,
      anvil: anvilControl(anvil.rpcUrl),
      anvilRpc,
      validator,
    }
    const faults = faultLanes(plan.faultRounds, targets, plan.spreadMs).finally(() => {
      chaosOver = true
    })
    const kills = killer(() => chaosOver)
    const played = await faults
    evmProxy.clear()
    solanaProxy.clear()
    const killed = await kills
    const chaosMs = Date.now() - startedAt
    // Every process is up again; the chain is healthy. Now the service must finish what it started.
    expect(
      all()
        .filter((p) => !p.alive)
        .map((p) => p.name),
    ).toEqual([])

    // Every wallet gives up by its deadline; one still busy well past it is wedged (say, waiting for a
    // transaction that vanished): fail with what it waits for, not with the test's timeout.
    const paid = await settleBy(
      payments,
      walletDeadline + 15_000,
      () => `wallets wedged past their deadline: ${JSON.stringify(Object.fromEntries(walletStates))}`,
    )
    const ids = paid.map((p) => p.paymentId)
    const rows = await drain(ids, Math.max(5_000, walletDeadline + 5_000 - Date.now()))
    const byId = new Map(rows.map((r) => [r.id, r]))
    const evmTxs = await pg.db
      .selectFrom('evm_transactions')
      .selectAll()
      .where('payment_id', 'in', ids)
      .execute()
    const solanaTxs = await pg.db
      .selectFrom('solana_transactions')
      .selectAll()
      .where('payment_id', 'in', ids)
      .execute()
    // EVM settlements in batches: each item (a payment's settlement) in one batch, whose one transfer is
    // recorded under the batch's first payment.
    const items = await pg.db
      .selectFrom('settlement_items')
      .selectAll()
      .where('payment_id', 'in', ids)
      .execute()
    const batches = await pg.db
      .selectFrom('settlement_batches')
      .selectAll()
      .where('payment_id', 'in', ids)
      .execute()
    const batchOf = new Map(items.map((i) => [i.payment_id, batches.find((b) => b.id === i.batch_id)!]))

    // --- Report.
    const count = (values: string[]) =>
      Object.fromEntries([...new Set(values)].map((v) => [v, values.filter((x) => x === v).length]))
    const outcomes = count(
      paid.map((p) => {
        const row = byId.get(p.paymentId)!
        return `${p.kind} ${row.status}${row.failure_code ? ` (${row.failure_code})` : ''}`
      }),
    )
    const takeovers = killed.filter((k) => k.takeoverMs !== undefined)
    console.info(
      [
        `chaos: seed ${seed}; ${paid.length} payments in ${Math.round((Date.now() - startedAt) / 1000)} s (chaos phase ${Math.round(chaosMs / 1000)} s)`,
        `outcomes: ${JSON.stringify(outcomes)}`,
        `wallet: ${JSON.stringify(count(paid.map((p) => p.wallet.status)))}, errors met and recovered: ${JSON.stringify(count(paid.flatMap((p) => p.wallet.errors)))}`,
        `faults played (${played.length}): ${played.join('; ')}`,
        `kills (${killed.length}): ${killed.map((k) => `${k.victim}${k.heldJobs ? ` holding ${k.heldJobs} job(s), taken over after ${k.takeoverMs ?? '?'} ms` : ''}`).join('; ')}`,
        `SIGKILL -> progress elsewhere: ${takeovers.map((k) => `${k.takeoverMs} ms`).join(', ') || 'no worker held a job when killed'}`,
        `EVM transactions: ${evmTxs.length} recorded (${evmTxs.filter((t) => t.status === 'dropped').length} dropped/replaced); Solana: ${solanaTxs.length} recorded (${count(solanaTxs.map((t) => t.state)) && JSON.stringify(count(solanaTxs.map((t) => t.state)))})`,
        `process starts: ${all()
          .map((p) => `${p.name} ${p.starts}`)
          .join(', ')}`,
      ].join('\n'),
    )

    // --- Every payment final, or processing with its transaction recorded.
    const recorded = (id: string) =>
      evmTxs.some((t) => t.payment_id === id && t.purpose === 'relay') ||
      solanaTxs.some((t) => t.payment_id === id && t.purpose === 'payment')
    const dishonest = rows.filter(
      (r) => !finalStatuses.has(r.status) && !(r.status === 'processing' && recorded(r.id)),
    )
    expect(dishonest, 'payments neither final nor processing with a recorded transaction').toEqual([])
    // A succeeded payment names its transaction; its settlement is recorded or still has one in flight.
    for (const r of rows.filter((x) => x.status === 'succeeded')) {
      expect(r.tx_id, r.id).toBeTruthy()
      if (r.settlement_status === 'pending') {
        const batch = batchOf.get(r.id)
        const inFlight =
          (batch !== undefined && batch.status !== 'succeeded') ||
          solanaTxs.some((t) => t.payment_id === r.id && t.purpose === 'settlement')
        expect(inFlight, `settlement of ${r.id} pending with nothing recorded`).toBe(true)
      }
      if (r.settlement_status === 'succeeded' && batchOf.has(r.id))
        expect([r.id, r.settlement_tx_id]).toEqual([r.id, batchOf.get(r.id)!.tx_id])
    }

    // --- Per payment: the buyer paid its amount exactly once if it succeeded, else not at all.
    const moved = await Promise.all(
      paid.map(async (p) => ({
        id: p.paymentId,
        status: byId.get(p.paymentId)!.status,
        paid: before.get(p.index)! - (await buyerBalance(p)),
        amount: p.amount,
      })),
    )
    const misdebited = moved.filter((m) => m.paid !== (m.status === 'succeeded' ? m.amount : 0n))
    // What the next reader needs to tell a slow payment from a wrong one: its jobs and transactions.
    for (const m of misdebited) console.error(`chaos: payment ${m.id}`, await paymentTrail(m.id))
    expect(misdebited, 'buyers debited other than once per succeeded payment').toEqual([])

    // --- EVM on chain, per token: every Transfer since the start is a payment's relay (one each, of
    // exactly the amount) or a settlement batch's transfer (one each, of exactly its payments' sum). The sums, to the unit: the merchant holds what was settled; the
    // collection address keeps the rest.
    const sum = (xs: bigint[]) => xs.reduce((a, b) => a + b, 0n)
    const isSucceeded = (p: Paid) => byId.get(p.paymentId)!.status === 'succeeded'
    const isSettled = (p: Paid) => byId.get(p.paymentId)!.settlement_status === 'succeeded'
    const settledValue = (p: Paid) => BigInt(byId.get(p.paymentId)!.settlement_value!)
    for (const token of evmTokens) {
      const logs = await publicClient().getLogs({
        address: token,
        event: parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
        fromBlock: firstBlock,
        toBlock: 'latest',
      })
      const payers = paid.filter((p) => p.token === token)
      const expected = new Map<string, string>()
      const settledBy = new Map<string, bigint>()
      for (const p of payers) {
        const r = byId.get(p.paymentId)!
        if (r.status === 'succeeded') expected.set(r.tx_id!.toLowerCase(), `relay ${p.paymentId} ${p.amount}`)
        if (r.settlement_status === 'succeeded') {
          const hash = r.settlement_tx_id!.toLowerCase()
          settledBy.set(hash, (settledBy.get(hash) ?? 0n) + settledValue(p))
          expected.set(hash, `settle ${settledBy.get(hash)}`)
        }
      }
      const onChain = logs.map((l) => {
        const settle = l.args.from!.toLowerCase() === evm.collection.toLowerCase()
        const payment = payers.find(
          (p) => byId.get(p.paymentId)!.tx_id?.toLowerCase() === l.transactionHash!.toLowerCase(),
        )
        return {
          hash: l.transactionHash!.toLowerCase(),
          what: settle ? `settle ${l.args.value}` : `relay ${payment?.paymentId} ${l.args.value}`,
        }
      })
      // Settlement batches still in flight at the end may have landed without being recorded yet: not
      // counted as recorded, but each at most once, of its batch's amount.
      const unrecorded = onChain.filter((t) => !expected.has(t.hash))
      const inFlightSettlements = new Map(
        evmTxs
          .filter((t) => t.purpose === 'settle' && payers.some((p) => p.paymentId === t.payment_id))
          .flatMap((t) => {
            const batch = batches.find((b) => b.payment_id === t.payment_id && b.status === 'closed')
            return batch ? [[t.hash.toLowerCase(), BigInt(batch.amount!)] as const] : []
          }),
      )
      expect(
        unrecorded.filter((t) => !inFlightSettlements.has(t.hash)),
        `${token} transfers nobody recorded`,
      ).toEqual([])
      expect(
        onChain.filter((t) => expected.has(t.hash)).sort((a, b) => a.hash.localeCompare(b.hash)),
      ).toEqual(
        [...expected].map(([hash, what]) => ({ hash, what })).sort((a, b) => a.hash.localeCompare(b.hash)),
      )
      const succeededHere = sum(payers.filter(isSucceeded).map((p) => p.amount))
      const settledHere = sum(payers.filter(isSettled).map(settledValue))
      const landedUnrecorded = sum(unrecorded.map((t) => inFlightSettlements.get(t.hash)!))
      expect(await evmBalance(evm.merchant, token), `${token} at the merchant`).toBe(
        settledHere + landedUnrecorded,
      )
      expect(
        (await evmBalance(evm.collection, token)) - collectionBefore.get(token)!,
        `${token} at the collection address`,
      ).toBe(succeededHere - settledHere - landedUnrecorded)
    }

    // --- Buyers' losses are the succeeded payments; Solana's service and merchant hold them.
    const succeeded = (kinds: readonly Kind[]) =>
      sum(paid.filter((p) => kinds.includes(p.kind) && isSucceeded(p)).map((p) => p.amount))
    const settled = (kind: Kind) => sum(paid.filter((p) => p.kind === kind && isSettled(p)).map(settledValue))
    expect(sum(moved.map((m) => m.paid))).toBe(succeeded(evmKinds) + succeeded(['solana']))
    const solanaMerchant = await solanaBalance(sol.merchant)
    const solanaService = await solanaBalance(sol.service.publicKey)
    expect(solanaMerchant + solanaService).toBe(succeeded(['solana']))
    const pendingSolanaSettlements = paid.filter(
      (p) => p.kind === 'solana' && byId.get(p.paymentId)!.settlement_status === 'pending',
    )
    if (pendingSolanaSettlements.length === 0) expect(solanaMerchant).toBe(settled('solana'))
    else expect(solanaMerchant).toBeGreaterThanOrEqual(settled('solana'))

    // --- Solana: every landed transaction the service recorded is on chain without error; each payment
    // has at most one landed payment transaction and one landed settlement.
    const landedPer = count(
      solanaTxs.filter((t) => t.state === 'landed').map((t) => `${t.payment_id} ${t.purpose}`),
    )
    expect(Object.entries(landedPer).filter(([, n]) => n > 1)).toEqual([])
    const statuses = await validator.connection.getSignatureStatuses(
      solanaTxs.map((t) => t.signature),
      {
        searchTransactionHistory: true,
      },
    )
    solanaTxs.forEach((tx, i) => {
      const s = statuses.value[i]
      if (tx.state === 'landed')
        expect([tx.signature, s !== null && s.err === null]).toEqual([tx.signature, true])
      if (tx.state === 'dropped') expect([tx.signature, s]).toEqual([tx.signature, null])
    })

    // --- Webhooks: every final state reached the merchant's endpoint (at least once).
    const wantedEvents = (r: (typeof rows)[number]) => [
      ...(finalStatuses.has(r.status) ? [`payment.${r.status}`] : []),
      ...(r.settlement_status === 'succeeded' ? ['payment.settled'] : []),
    ]
    const missing = () =>
      rows.flatMap((r) =>
        wantedEvents(r)
          .filter((type) => !webhookEvents.get(r.id)?.has(type))
          .map((type) => `${r.id} ${type}`),
      )
    const webhookDeadline = Date.now() + 15_000
    while (missing().length > 0 && Date.now() < webhookDeadline) await sleep(200)
    expect(missing(), 'webhook events not delivered').toEqual([])
  })
})

/** A payment's jobs and EVM transactions, for the failure message of a payment the checks single out. */
async function paymentTrail(paymentId: string) {
  const [jobs, transactions] = await Promise.all([
    pg.db
      .selectFrom('jobs')
      .select(['kind', 'state', 'attempts', 'run_at', 'last_error'])
      .where('payment_id', '=', paymentId)
      .execute(),
    pg.db
      .selectFrom('evm_transactions')
      .select(['purpose', 'nonce', 'hash', 'status', 'created_at'])
      .where('payment_id', '=', paymentId)
      .orderBy('created_at')
      .execute(),
  ])
  return JSON.stringify({ jobs, transactions, at: new Date().toISOString() }, null, 1)
}
