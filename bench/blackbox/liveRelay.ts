/**
 * An independent measurement of caipay's live gasless payments against the chain's ceiling, taking
 * caipay as a black box: its own Anvil (a block every second), its own TestUSDC deployment and
 * buyers, `caipay serve` started as an operator starts it (config file, `caipay keys create`), the
 * merchant set up through the merchant API, and every buyer paying with the wallet library as a wallet
 * does (`createPayClient` + `evmSigner` over a viem account, the payment link as the merchant got it).
 *
 *   npm run bench:blackbox -- [--payers 100] [--poll-ms 250]
 *
 * Each wallet loads its options, signs its EIP-3009 authorization and waits at the checkpoint before
 * confirm (the library's `persist` hook); then, right after a block, all confirm at once and poll
 * their status (at the server's `pollInMs`, capped at `--poll-ms`). The ceiling in the same run: one
 * key relaying the same number of `receiveWithAuthorization` calls, signed beforehand with nonces
 * counted locally, sent in one batch right after a block, timed to the last receipt (read in one batch).
 * Everything else is read from the chain: the relays and settlements are the token's Transfer logs
 * into and out of the executor's address.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import {
  type Address,
  decodeFunctionResult,
  encodeEventTopics,
  encodeFunctionData,
  type Hash,
  type Hex,
  hexToBigInt,
  numberToHex,
  toHex,
} from 'viem'
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts'
import { evmSigner } from '../../adapters/evm/index.js'
import { testUsdcAbi, testUsdcBytecode } from '../../fixtures/token/index.js'
import { createPayClient, type PaymentOption } from '../../src/index.js'
import { broadcast, type Chain, receiptsOf, setBalance, signPipelined, sleep, startChain } from './chain.js'
import { cpuSeconds, type Operator, startOperator } from './operator.js'

export interface BlackboxOptions {
  payers: number
  /** The longest a wallet waits between status reads, ms (default 250; the server suggests 1000). */
  pollMs?: number
  /**
   * Diagnostic: drop the `Idempotency-Key` the wallet library sends with every confirm, as a client
   * calling the gateway by hand may (the server then confirms without its idempotency record).
   */
  confirmWithoutKey?: boolean
}

export interface BlackboxResult {
  payers: number
  load: { before: number; after: number }
  ceiling: { paymentsPerSecond: number; seconds: number; blocks: number }
  caipay: {
    paymentsPerSecond: number
    /** From the block the confirms followed to the last wallet seeing `succeeded`. */
    seconds: number
    /** From the same start to the arrival of the block holding the last relay. */
    relaysLandedSeconds: number
    succeeded: number
    failed: number
    failures: string[]
    confirmMs: { p50: number; max: number }
    blocksToSucceeded: { p50: number; p95: number; max: number }
    relayBlocks: number
    relaysPerBlock: number
    settlementTxs: number
    executorTxs: number
    gasPerPayment: number
    /** CPU seconds during the run: the server process, and the processes below it (PostgreSQL). */
    cpuSeconds: { server: number; postgres: number }
    /** When the relays reached the node, seconds after the start: first, median, last. */
    relaysBroadcast: { first: number; p50: number; last: number }
    /** The blocks holding relays: when each arrived (seconds after the start) and how many it held. */
    relayBlockTimes: { at: number; relays: number }[]
    money: MoneyCheck
  }
  ratio: number
}

export interface MoneyCheck {
  /** Every buyer whose payment succeeded lost exactly the amount; the others lost nothing. */
  buyersDebitedOnce: boolean
  buyersDebited: bigint
  destinationCredited: bigint
  /** The executor's (collection) token balance after settlement, as before the run. */
  collectionBack: boolean
  /** Every succeeded payment's merchant view names a settlement transaction found on chain. */
  settlementsRecorded: boolean
  /** The txId each wallet was given is a relay found on chain, one per payment. */
  txIdsOnChain: boolean
  exactlyOnce: boolean
}

const amountMinor = 1_000_000n // USD 1.00 of a 6-decimal token at usdRate 1
const fundedMinor = 5n * amountMinor
const prepareWidth = 16

export async function runBlackbox(options: BlackboxOptions): Promise<BlackboxResult> {
  const n = options.payers
  const pollMs = options.pollMs ?? 250
  const loadBefore = os.loadavg()[0]!
  const chain = await startChain(1)
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-blackbox-'))
  let operator: Operator | undefined
  try {
    const caip2 = `eip155:${chain.chainId}`
    const deployer = privateKeyToAccount(generatePrivateKey())
    const executorKey = generatePrivateKey()
    const executor = privateKeyToAccount(executorKey).address
    const relayer = privateKeyToAccount(generatePrivateKey())
    const destination = privateKeyToAccount(generatePrivateKey()).address
    for (const who of [deployer.address, executor, relayer.address]) await setBalance(chain, who, 10n ** 21n)

    const [deployHash] = await broadcast(
      chain,
      await signPipelined(chain, deployer, [{ data: testUsdcBytecode, gas: 6_000_000n }]),
    )
    const token = (await receiptsOf(chain, [deployHash!]))[0]!.contractAddress!
    const asset = `${caip2}/erc20:${token}`
    const buyers = Array.from({ length: n }, () => privateKeyToAccount(generatePrivateKey()))
    const ceilingBuyers = Array.from({ length: n }, () => privateKeyToAccount(generatePrivateKey()))
    const mints = [...buyers, ...ceilingBuyers].map((buyer) => ({
      to: token,
      data: encodeFunctionData({
        abi: testUsdcAbi,
        functionName: 'mint',
        args: [buyer.address, fundedMinor],
      }),
      gas: 120_000n,
    }))
    await receiptsOf(chain, await broadcast(chain, await signPipelined(chain, deployer, mints)))

    operator = await startOperator({
      dir,
      env: { BLACKBOX_EXECUTOR_KEY: executorKey },
      config: {
        // N wallets share one wallet key; the default per-credential limit (100/s) would throttle them.
        rateLimit: false,
        chains: {
          [caip2]: {
            rpcUrl: chain.rpcUrl,
            signerKey: 'env:BLACKBOX_EXECUTOR_KEY',
            assets: { [asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
          },
        },
      },
    })
    const op = operator
    const { merchant } = await op.merchant<{ merchant: { id: string } }>('POST', '/v1/merchants', {
      body: { merchantName: 'Black box', merchantEmail: 'blackbox@example.com' },
    })
    await op.merchant('POST', `/v1/merchants/${merchant.id}/settlements/crypto`, {
      body: { settlements: [{ asset, destination: `${caip2}:${destination}` }] },
    })

    // Every wallet pays up to the confirm and waits there for the start.
    let fire!: () => void
    const gun = new Promise<void>((resolve) => {
      fire = resolve
    })
    const wallets: Wallet[] = new Array(n)
    let next = 0
    await Promise.all(
      Array.from({ length: Math.min(prepareWidth, n) }, async () => {
        while (next < n) {
          const i = next++
          wallets[i] = await startWallet(op, merchant.id, caip2, chain.rpcUrl, buyers[i]!, i, gun, {
            pollMs,
            confirmWithoutKey: options.confirmWithoutKey ?? false,
          })
          await Promise.race([wallets[i]!.ready, wallets[i]!.done])
        }
      }),
    )
    const ceilingRaws = await signCeiling(chain, token, relayer, ceilingBuyers)
    const balancesBefore = await balancesOf(chain, token, [
      ...buyers.map((b) => b.address),
      destination,
      executor,
    ])

    const ceiling = await measureCeiling(chain, ceilingRaws)

    const executorNonce = Number(await chain.call<Hex>('eth_getTransactionCount', [executor, 'latest']))
    const startHead = (await chain.heads.next()).number
    const started = Date.now()
    const cpuBefore = cpuSeconds(op.pid)
    fire()
    const outcomes = await Promise.all(wallets.map((w) => w.done))
    const cpuAfter = cpuSeconds(op.pid)
    const succeeded = outcomes.filter((o) => o.status === 'succeeded')
    const seconds = (Math.max(...outcomes.map((o) => o.seenAt)) - started) / 1000

    // The chain's record: relays are transfers into the executor's address, settlements out of it.
    const transfers = (from: Address | null, to: Address | null) =>
      transferLogs(chain, token, startHead, from, to)
    const collection = executor.toLowerCase()
    const relayLogs = (await transfers(null, executor)).filter((log) => log.from !== collection)
    const relayBlocks = [...new Set(relayLogs.map((log) => log.block))]
    const lastRelayArrival = chain.heads.arrivalOf(Math.max(...relayBlocks)) ?? Number.NaN

    const expectedCredit = amountMinor * BigInt(succeeded.length)
    const settlementLogs = await waitForSettlement(
      chain,
      token,
      destination,
      balancesBefore.at(-2)!,
      expectedCredit,
    )
    const views = await merchantViews(op, merchant.id, succeeded)
    const balancesAfter = await balancesOf(chain, token, [
      ...buyers.map((b) => b.address),
      destination,
      executor,
    ])
    const settlementHashes = [
      ...new Set(settlementLogs.filter((log) => log.from === collection).map((l) => l.tx)),
    ]
    const receipts = await receiptsOf(chain, [...relayLogs.map((l) => l.tx), ...settlementHashes] as Hash[])
    const gas = receipts.reduce((sum, r) => sum + hexToBigInt(r.gasUsed), 0n)
    const executorTxs =
      Number(await chain.call<Hex>('eth_getTransactionCount', [executor, 'latest'])) - executorNonce

    const debits = buyers.map((_, i) => balancesBefore[i]! - balancesAfter[i]!)
    const relayTxs = new Set(relayLogs.map((l) => l.tx))
    const money: MoneyCheck = {
      buyersDebitedOnce: outcomes.every(
        (o, i) => debits[i] === (o.status === 'succeeded' ? amountMinor : 0n),
      ),
      buyersDebited: debits.reduce((a, b) => a + b, 0n),
      destinationCredited: balancesAfter.at(-2)! - balancesBefore.at(-2)!,
      collectionBack: balancesAfter.at(-1) === balancesBefore.at(-1),
      settlementsRecorded: views.every(
        (txId) => txId !== undefined && settlementHashes.includes(txId as Hash),
      ),
      txIdsOnChain:
        relayTxs.size === succeeded.length &&
        succeeded.every((o) => o.txId && relayTxs.has(o.txId.toLowerCase() as Hash)),
      exactlyOnce: false,
    }
    money.exactlyOnce =
      money.buyersDebitedOnce &&
      money.buyersDebited === expectedCredit &&
      money.destinationCredited === expectedCredit &&
      money.collectionBack &&
      money.settlementsRecorded &&
      money.txIdsOnChain

    const confirmMs = outcomes.map((o) => o.answeredAt - o.sentAt).sort((a, b) => a - b)
    const blocks = succeeded
      .map((o) => chain.heads.at(o.seenAt) - chain.heads.at(o.sentAt))
      .sort((a, b) => a - b)
    const broadcastAt = relayLogs
      .map((log) => ((chain.heads.sentAt(log.tx) ?? Number.NaN) - started) / 1000)
      .sort((a, b) => a - b)
    const paymentsPerSecond = succeeded.length / seconds
    return {
      payers: n,
      load: { before: loadBefore, after: os.loadavg()[0]! },
      ceiling,
      caipay: {
        paymentsPerSecond,
        seconds,
        relaysLandedSeconds: (lastRelayArrival - started) / 1000,
        succeeded: succeeded.length,
        failed: n - succeeded.length,
        failures: outcomes.filter((o) => o.status !== 'succeeded').map((o) => o.status),
        confirmMs: { p50: pick(confirmMs, 0.5), max: confirmMs.at(-1) ?? Number.NaN },
        blocksToSucceeded: {
          p50: pick(blocks, 0.5),
          p95: pick(blocks, 0.95),
          max: blocks.at(-1) ?? Number.NaN,
        },
        relayBlocks: relayBlocks.length,
        relaysPerBlock: relayLogs.length / Math.max(1, relayBlocks.length),
        settlementTxs: settlementHashes.length,
        executorTxs,
        gasPerPayment: Number(gas) / Math.max(1, succeeded.length),
        cpuSeconds: {
          server: cpuAfter.server - cpuBefore.server,
          postgres: cpuAfter.below - cpuBefore.below,
        },
        relaysBroadcast: {
          first: pick(broadcastAt, 0),
          p50: pick(broadcastAt, 0.5),
          last: broadcastAt.at(-1) ?? Number.NaN,
        },
        relayBlockTimes: relayBlocks
          .sort((a, b) => a - b)
          .map((block) => ({
            at: ((chain.heads.arrivalOf(block) ?? Number.NaN) - started) / 1000,
            relays: relayLogs.filter((log) => log.block === block).length,
          })),
        money,
      },
      ratio: paymentsPerSecond / ceiling.paymentsPerSecond,
    }
  } finally {
    await operator?.stop()
    await chain.stop()
    await fs.rm(dir, { recursive: true, force: true })
  }
}

interface Outcome {
  paymentId: string
  status: string
  txId?: string
  sentAt: number
  answeredAt: number
  seenAt: number
}

interface Wallet {
  /** Resolves once the wallet has signed and waits to confirm. */
  ready: Promise<void>
  done: Promise<Outcome>
}

/** A merchant creates a payment; a buyer's wallet pays its link up to the confirm, then waits for `gun`. */
async function startWallet(
  op: Operator,
  merchantId: string,
  caip2: string,
  rpcUrl: string,
  buyer: PrivateKeyAccount,
  index: number,
  gun: Promise<void>,
  { pollMs, confirmWithoutKey }: { pollMs: number; confirmWithoutKey: boolean },
): Promise<Wallet> {
  const payment = await op.merchant<{ paymentId: string; gatewayUrl: string }>('POST', '/v1/payments', {
    merchantId,
    body: { referenceId: `blackbox-${index}`, amount: { unit: 'iso4217/USD', value: '100' } },
  })
  let markReady!: () => void
  const ready = new Promise<void>((resolve) => {
    markReady = resolve
  })
  const times = { sentAt: Number.NaN, answeredAt: Number.NaN }
  const wallet = createPayClient({
    baseUrl: op.baseUrl,
    apiKey: op.walletKey,
    ...(confirmWithoutKey && { fetch: withoutConfirmKey }),
    signers: [evmSigner({ account: buyer, chains: { [caip2]: { rpcUrl } } })],
    poll: { sleep: (ms) => sleep(Math.min(ms, pollMs)) },
    persist: async (snapshot) => {
      if (snapshot.state !== 'confirming' || !Number.isNaN(times.sentAt)) return
      markReady()
      await gun
      times.sentAt = Date.now()
    },
  })
  const done = wallet
    .pay(payment.gatewayUrl, {
      selectOption: gaslessOption,
      onFlow: (flow) =>
        flow.on('state', ({ from }) => {
          if (from === 'confirming') times.answeredAt = Date.now()
        }),
    })
    .then(
      (result): Outcome => ({
        paymentId: payment.paymentId,
        status: result.status,
        ...(result.txId !== undefined && { txId: result.txId }),
        ...times,
        seenAt: Date.now(),
      }),
      (error: unknown): Outcome => ({
        paymentId: payment.paymentId,
        status: `error ${(error as { code?: string }).code ?? String(error)}`,
        ...times,
        seenAt: Date.now(),
      }),
    )
  return { ready, done }
}

function withoutConfirmKey(input: string, init: RequestInit): Promise<Response> {
  if (!input.endsWith('/confirm')) return fetch(input, init)
  const headers = new Headers(init.headers)
  headers.delete('idempotency-key')
  return fetch(input, { ...init, headers })
}

/** The gasless option: an EIP-3009 authorization to sign (typed data), not a transaction to send. */
function gaslessOption(options: readonly PaymentOption[]): string {
  const option = options.find((o) =>
    o.actions.some((a) => a.type === 'walletRpc' && a.walletRpc.method === 'eth_signTypedData_v4'),
  )
  if (!option) throw new Error(`No gasless option among ${options.length}.`)
  return option.id
}

/** EIP-3009's struct, parsed from the standard's own type string. */
const receiveWithAuthorizationFields =
  'address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce'
    .split(',')
    .map((field) => {
      const [type, name] = field.split(' ') as [string, string]
      return { name, type }
    })

/** The ceiling's relays: each ceiling buyer's authorization to `relayer`, in one transaction each. */
async function signCeiling(
  chain: Chain,
  token: Address,
  relayer: PrivateKeyAccount,
  buyers: readonly PrivateKeyAccount[],
): Promise<Hex[]> {
  const validBefore = BigInt(Math.floor(Date.now() / 1000) + 3600)
  const calls = await Promise.all(
    buyers.map(async (buyer) => {
      const message = {
        from: buyer.address,
        to: relayer.address,
        value: amountMinor,
        validAfter: 0n,
        validBefore,
        nonce: toHex(crypto.getRandomValues(new Uint8Array(32))),
      }
      const signature = await buyer.signTypedData({
        domain: { name: 'USD Coin', version: '2', chainId: chain.chainId, verifyingContract: token },
        types: { ReceiveWithAuthorization: receiveWithAuthorizationFields },
        primaryType: 'ReceiveWithAuthorization',
        message,
      })
      const { from, to, value, validAfter, nonce } = message
      return {
        to: token,
        data: encodeFunctionData({
          abi: testUsdcAbi,
          functionName: 'receiveWithAuthorization',
          args: [from, to, value, validAfter, validBefore, nonce, signature],
        }),
        gas: 150_000n,
      }
    }),
  )
  return signPipelined(chain, relayer, calls)
}

/**
 * Sends the pre-signed relays in one batch right after a block; timed to the last receipt, read in one
 * batch once the head holding the last relay has arrived.
 */
async function measureCeiling(chain: Chain, raws: readonly Hex[]): Promise<BlackboxResult['ceiling']> {
  let block = (await chain.heads.next()).number
  const started = Date.now()
  const hashes = await broadcast(chain, raws)
  const pending = new Set(hashes)
  let blocks = 0
  while (pending.size > 0) {
    block++
    if (block > chain.heads.at(started) + 60) throw new Error('The ceiling relays did not land in 60 blocks.')
    while (chain.heads.at(Date.now()) < block) await Promise.race([chain.heads.next(), sleep(2_000)])
    const { transactions } = await chain.call<{ transactions: Hash[] }>('eth_getBlockByNumber', [
      numberToHex(block),
      false,
    ])
    const before = pending.size
    for (const hash of transactions) pending.delete(hash)
    if (pending.size < before) blocks++
  }
  await receiptsOf(chain, hashes)
  const seconds = (Date.now() - started) / 1000
  return { paymentsPerSecond: raws.length / seconds, seconds, blocks }
}

interface TransferLog {
  from: Address
  to: Address
  tx: Hash
  block: number
}

async function transferLogs(
  chain: Chain,
  token: Address,
  fromBlock: number,
  from: Address | null,
  to: Address | null,
): Promise<TransferLog[]> {
  const topics = encodeEventTopics({ abi: testUsdcAbi, eventName: 'Transfer', args: { from, to } })
  const logs = await chain.call<{ topics: Hex[]; transactionHash: Hash; blockNumber: Hex }[]>('eth_getLogs', [
    { address: token, fromBlock: numberToHex(fromBlock), toBlock: 'latest', topics },
  ])
  const address = (topic: Hex) => `0x${topic.slice(26)}`.toLowerCase() as Address
  return logs.map((log) => ({
    from: address(log.topics[1]!),
    to: address(log.topics[2]!),
    tx: log.transactionHash.toLowerCase() as Hash,
    block: Number(log.blockNumber),
  }))
}

async function balancesOf(chain: Chain, token: Address, owners: readonly Address[]): Promise<bigint[]> {
  const answers = await chain.batch<Hex>(
    owners.map((owner) => ({
      method: 'eth_call',
      params: [
        {
          to: token,
          data: encodeFunctionData({ abi: testUsdcAbi, functionName: 'balanceOf', args: [owner] }),
        },
        'latest',
      ],
    })),
  )
  return answers.map((data) => decodeFunctionResult({ abi: testUsdcAbi, functionName: 'balanceOf', data }))
}

/**
 * Waits until the destination holds `credit` more than before (or two minutes pass), then two more
 * blocks, so a second settlement would show; returns the transfers into the destination.
 */
async function waitForSettlement(
  chain: Chain,
  token: Address,
  destination: Address,
  before: bigint,
  credit: bigint,
): Promise<TransferLog[]> {
  const deadline = Date.now() + 120_000
  while ((await balancesOf(chain, token, [destination]))[0]! - before < credit && Date.now() < deadline) {
    await Promise.race([chain.heads.next(), sleep(1_500)])
  }
  await chain.heads.next()
  await chain.heads.next()
  return transferLogs(chain, token, 0, null, destination.toLowerCase() as Address)
}

/** Each succeeded payment's settlement transaction as the merchant API shows it (waits for it up to 60 s). */
function merchantViews(
  op: Operator,
  merchantId: string,
  succeeded: readonly Outcome[],
): Promise<(string | undefined)[]> {
  return Promise.all(
    succeeded.map(async ({ paymentId }) => {
      for (let waited = 0; waited <= 60_000; waited += 500) {
        const view = await op.merchant<{ settlement?: { successful?: { txId?: string } } }>(
          'GET',
          `/v1/payments/${paymentId}`,
          { merchantId },
        )
        const txId = view.settlement?.successful?.txId
        if (txId) return txId.toLowerCase()
        await sleep(500)
      }
      return undefined
    }),
  )
}

function pick(sorted: readonly number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] ?? Number.NaN
}

export function formatBlackbox(r: BlackboxResult): string {
  const c = r.caipay
  const m = c.money
  const usd = (minor: bigint) => (Number(minor) / 1e6).toFixed(2)
  return [
    `Black-box live gasless relay: own Anvil (block time 1 s), ${r.payers} wallets confirming at once, caipay serve as shipped`,
    `  load average (1 min): ${r.load.before.toFixed(1)} before, ${r.load.after.toFixed(1)} after`,
    `  ceiling (one key, pre-signed, one batch): ${r.ceiling.paymentsPerSecond.toFixed(1)} payments/s (${r.ceiling.seconds.toFixed(2)} s, ${r.ceiling.blocks} block(s))`,
    `  caipay: ${c.paymentsPerSecond.toFixed(1)} payments/s (${c.seconds.toFixed(2)} s to the last succeeded; relays landed by ${c.relaysLandedSeconds.toFixed(2)} s) = ${r.ratio.toFixed(2)} of the ceiling`,
    `  succeeded ${c.succeeded}, failed ${c.failed}${c.failures.length ? ` (${[...new Set(c.failures)].join(', ')})` : ''}`,
    `  confirm answered in p50 ${c.confirmMs.p50} ms, max ${c.confirmMs.max} ms`,
    `  confirm -> succeeded seen by the wallet: p50 ${c.blocksToSucceeded.p50} blocks, p95 ${c.blocksToSucceeded.p95}, max ${c.blocksToSucceeded.max}`,
    `  relays over ${c.relayBlocks} block(s), ${c.relaysPerBlock.toFixed(1)} per block; settlement txs ${c.settlementTxs}; executor txs ${c.executorTxs}; gas per payment ${Math.round(c.gasPerPayment)}`,
    `  relays reached the node at +${c.relaysBroadcast.first.toFixed(2)} s (first), +${c.relaysBroadcast.p50.toFixed(2)} s (median), +${c.relaysBroadcast.last.toFixed(2)} s (last); blocks with relays: ${c.relayBlockTimes.map((b) => `+${b.at.toFixed(1)} s x${b.relays}`).join(', ')}`,
    `  CPU during the run: caipay serve ${c.cpuSeconds.server.toFixed(1)} s, PostgreSQL ${c.cpuSeconds.postgres.toFixed(1)} s (over ${c.seconds.toFixed(1)} s)`,
    `  money: buyers debited ${usd(m.buyersDebited)} (each once: ${m.buyersDebitedOnce ? 'yes' : 'NO'}), destination credited ${usd(m.destinationCredited)}, collection back: ${m.collectionBack ? 'yes' : 'NO'}, settlements recorded: ${m.settlementsRecorded ? 'yes' : 'NO'}, txIds on chain: ${m.txIdsOnChain ? 'yes' : 'NO'}`,
    `  money moved exactly once: ${m.exactlyOnce ? 'yes' : 'NO'}`,
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      payers: { type: 'string', default: '100' },
      'poll-ms': { type: 'string', default: '250' },
      'confirm-without-key': { type: 'boolean', default: false },
    },
  })
  const confirmWithoutKey = values['confirm-without-key']
  const result = await runBlackbox({
    payers: Number(values.payers),
    pollMs: Number(values['poll-ms']),
    confirmWithoutKey,
  })
  console.log(formatBlackbox(result))
  console.log(
    `Command: npm run bench:blackbox -- --payers ${values.payers} --poll-ms ${values['poll-ms']}${confirmWithoutKey ? ' --confirm-without-key' : ''}`,
  )
}
