/**
 * Live gasless payments at the chain's speed: Anvil mining a block every second, N payers confirming
 * gasless (EIP-3009) payments at once against the server as shipped (`caipay serve` through bin/caipay.js,
 * default settings, embedded PostgreSQL in a temporary directory), and in the same run the chain's
 * ceiling for one key: the same `receiveWithAuthorization` calls, pre-signed with locally counted
 * nonces, sent pipelined without waiting for receipts.
 *
 *   npm run bench:live -- [--payers 200] [--chain evm|solana]   (solana: liveRelaySolana.ts)
 *
 * Reported: payments per second as a share of the ceiling's, confirm -> `succeeded` in blocks (p50,
 * p95), the blocks the relays spread over and transactions per block, settlement transactions and gas
 * per payment, and whether the money moved exactly once. Payments are created, quoted and signed before
 * the clock starts, as the ceiling's calls are signed before its clock starts.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { type Address, createPublicClient, encodeFunctionData, type Hash, type Hex, http } from 'viem'
import { generatePrivateKey, type PrivateKeyAccount, privateKeyToAccount } from 'viem/accounts'
import { eip3009Abi } from '../../src/server/chains/evm/abi.js'
import {
  anvilChain,
  anvilPrivateKeys,
  authorizationTypedData,
  deployTestToken,
  mintTestToken,
  signAuthorization,
  startAnvil,
} from '../../test/anvil.js'
import {
  type CliServer,
  inParallel,
  profileWindow,
  quantile,
  readUntilFinal,
  settledViews,
  sleep,
  startCliServer,
} from '../cliServer.js'
import { processCpuMs } from '../cpu.js'
import { type StatementPhases, statementPhases } from '../statements.js'

export interface LiveRelayOptions {
  /** Payers confirming at once (and relays in the ceiling run). */
  payers: number
  /** Plain status reads every this many ms instead of the library's held reads (readUntilFinal). */
  statusPollMs?: number
  /** Count statements per step with pg_stat_statements (bench/statements.ts); 'all' lists every text. */
  statements?: boolean | 'all'
}

export interface LiveRelayResult {
  payers: number
  ceiling: { paymentsPerSecond: number; seconds: number; blocks: number }
  caipay: {
    paymentsPerSecond: number
    seconds: number
    failed: number
    /** How long the confirm request itself took, ms. */
    confirmMs: { p50: number; max: number }
    blocksToSucceeded: { p50: number; p95: number; max: number }
    relayBlocks: number
    relaysPerBlock: number
    settlementTxsPerPayment: number
    gasPerPayment: number
    /**
     * CPU milliseconds per payment of the server and its embedded PostgreSQL, from the first confirm to
     * the last payment final (status reads included); Linux only.
     */
    serverCpuMsPerPayment: { server: number; postgres: number } | undefined
    /** The chain node's (Anvil's) CPU milliseconds per payment in the same window: what the server asks of it. */
    nodeCpuMsPerPayment: number | undefined
    movedExactlyOnce: boolean
    /** Status requests the payers sent from the confirm's answer to final (held reads: one per change they wait for). */
    statusRequestsPerPayment: number
  }
  ratio: number
  /** Per-step statement tables (options.statements), printed as they are. */
  statements?: string[]
}

const amountMinor = 1_000_000n // USD 1.00 of a 6-decimal stablecoin

export async function runLiveRelay(options: LiveRelayOptions): Promise<LiveRelayResult> {
  const n = options.payers
  const anvil = await startAnvil()
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-relay-'))
  let server: CliServer | undefined
  let stats: StatementPhases | undefined
  try {
    const chain = anvilChain(anvil.chainId, anvil.rpcUrl)
    const client = createPublicClient({ chain, transport: http(anvil.rpcUrl, { batch: true }) })
    const rpc = (method: string, params: unknown[]) => client.request({ method, params } as never)
    const token = await deployTestToken(anvil.rpcUrl)
    const asset = `${anvil.caip2}/erc20:${token}`
    const buyers = Array.from({ length: n }, () => privateKeyToAccount(generatePrivateKey()))
    // Funded while Anvil mines on demand; from here on, a block every second.
    for (const buyer of buyers) await mintTestToken(anvil.rpcUrl, token, buyer.address, 10n * amountMinor)
    const collection = privateKeyToAccount(anvilPrivateKeys[1]).address
    const destination = privateKeyToAccount(generatePrivateKey()).address
    await rpc('evm_setAutomine', [false])
    await rpc('evm_setIntervalMining', [1])

    const ceiling = await measureCeiling(client, token, buyers, anvil.chainId)

    server = await startCliServer(
      {
        rateLimit: false,
        chains: {
          [anvil.caip2]: {
            rpcUrl: anvil.rpcUrl,
            signerKey: anvilPrivateKeys[1],
            assets: { [asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
          },
        },
      },
      dataDir,
      { statementStats: options.statements !== undefined && options.statements !== false },
    )
    const { call } = server
    stats = options.statements
      ? await statementPhases(server.dbDir, n, options.statements === 'all')
      : undefined

    const { merchant } = await call('POST', '/v1/merchants', {
      merchantName: 'Bench',
      merchantEmail: 'b@example.com',
    })
    await call('POST', `/v1/merchants/${merchant.id}/settlements/crypto`, {
      settlements: [{ asset, destination: `${anvil.caip2}:${destination}` }],
    })
    const before = {
      buyers: await sumBalances(
        client,
        token,
        buyers.map((b) => b.address),
      ),
      destination: await balanceOf(client, token, destination),
      collection: await balanceOf(client, token, collection),
    }
    const signed = await inParallel(buyers, 16, async (buyer, i) => {
      const { paymentId } = await call(
        'POST',
        '/v1/payments',
        { referenceId: `relay-bench-${i}`, amount: { unit: 'iso4217/USD', value: '100' } },
        { 'merchant-id': merchant.id },
      )
      const { options } = await call('POST', `/v1/gateway/payment/${paymentId}/options`, {
        accounts: [`${anvil.caip2}:${buyer.address}`],
      })
      const option = options.find(
        (o: { actions: { walletRpc?: { method: string } }[] }) =>
          o.actions[0]?.walletRpc?.method === 'eth_signTypedData_v4',
      )
      const typed = JSON.parse(JSON.parse(option.actions[0].walletRpc.params)[1])
      return { paymentId, optionId: option.id as string, result: await signAuthorization(buyer, typed) }
    })

    await stats?.phase('create + options (before the clock)')
    const heads = trackHeads(client)
    await nextBlock(client)
    const cpuBefore = server.cpuMs()
    const nodeBefore = anvil.pid === undefined ? undefined : processCpuMs(anvil.pid)
    const window = profileWindow()
    const started = Date.now()
    // The status requests the payers sent (held or plain), to count them per payment.
    let statusRequests = 0
    const countedCall: typeof call = (...args) => {
      statusRequests++
      return call(...args)
    }
    const outcomes = await Promise.all(
      signed.map(async (s) => {
        const confirmedAt = Date.now()
        const confirm = await call('POST', `/v1/gateway/payment/${s.paymentId}/confirm`, {
          optionId: s.optionId,
          results: [s.result],
        }).catch((error: unknown) => ({ error: String(error) }))
        const answeredAt = Date.now()
        if ('error' in confirm)
          return { ...s, status: 'confirm failed', confirmedAt, answeredAt, doneAt: Date.now() }
        const status = await readUntilFinal(countedCall, s.paymentId, confirm, options.statusPollMs)
        return { ...s, status: status.status as string, confirmedAt, answeredAt, doneAt: Date.now() }
      }),
    )
    const seconds = (Math.max(...outcomes.map((o) => o.doneAt)) - started) / 1000
    const cpuAfter = server.cpuMs()
    const nodeAfter = anvil.pid === undefined ? undefined : processCpuMs(anvil.pid)
    await window.end()
    heads.stop()
    await stats?.phase('confirm -> final (confirm, relay, receipts, status reads)')
    await stats?.settledPhase('final -> settled (settlement batch)')
    const confirmMs = outcomes.map((o) => o.answeredAt - o.confirmedAt).sort((a, b) => a - b)
    const blocks = outcomes
      .filter((o) => o.status === 'succeeded')
      .map((o) => heads.at(o.doneAt) - heads.at(o.confirmedAt))
      .sort((a, b) => a - b)

    // Settled: every payment's settlement recorded (the merchant view), then the chain's account.
    const views = await settledViews(call, merchant.id, outcomes)
    const relayHashes = views.filter((v) => v.info?.txId).map((v) => v.info.txId as Hash)
    const settleHashes = [
      ...new Set(
        views.filter((v) => v.settlement?.successful).map((v) => v.settlement.successful.txId as Hash),
      ),
    ]
    const relayReceipts = await Promise.all(relayHashes.map((hash) => client.getTransactionReceipt({ hash })))
    const settleReceipts = await Promise.all(
      settleHashes.map((hash) => client.getTransactionReceipt({ hash })),
    )
    const relayBlocks = new Set(relayReceipts.map((r) => r.blockNumber)).size
    const gas = [...relayReceipts, ...settleReceipts].reduce((a, r) => a + r.gasUsed, 0n)
    const succeeded = outcomes.filter((o) => o.status === 'succeeded').length
    const charged =
      before.buyers -
      (await sumBalances(
        client,
        token,
        buyers.map((b) => b.address),
      ))
    const settled = (await balanceOf(client, token, destination)) - before.destination
    const movedExactlyOnce =
      charged === amountMinor * BigInt(succeeded) &&
      settled === charged &&
      (await balanceOf(client, token, collection)) === before.collection &&
      views.every((v) => v.status !== 'succeeded' || v.settlement?.successful)
    const paymentsPerSecond = succeeded / seconds
    return {
      payers: n,
      ceiling,
      caipay: {
        paymentsPerSecond,
        seconds,
        failed: n - succeeded,
        confirmMs: {
          p50: confirmMs[confirmMs.length >> 1] ?? Number.NaN,
          max: confirmMs.at(-1) ?? Number.NaN,
        },
        blocksToSucceeded: {
          p50: quantile(blocks, 0.5),
          p95: quantile(blocks, 0.95),
          max: blocks.at(-1) ?? Number.NaN,
        },
        relayBlocks,
        relaysPerBlock: relayReceipts.length / Math.max(1, relayBlocks),
        settlementTxsPerPayment: settleHashes.length / Math.max(1, succeeded),
        gasPerPayment: Number(gas) / Math.max(1, succeeded),
        serverCpuMsPerPayment:
          cpuBefore === undefined || cpuAfter === undefined
            ? undefined
            : {
                server: (cpuAfter.server - cpuBefore.server) / n,
                postgres: (cpuAfter.postgres - cpuBefore.postgres) / n,
              },
        nodeCpuMsPerPayment:
          nodeBefore === undefined || nodeAfter === undefined ? undefined : (nodeAfter - nodeBefore) / n,
        movedExactlyOnce,
        statusRequestsPerPayment: statusRequests / n,
      },
      ratio: paymentsPerSecond / ceiling.paymentsPerSecond,
      ...(stats ? { statements: stats.tables } : {}),
    }
  } finally {
    await stats?.close()
    await server?.stop()
    await anvil.stop()
    await fs.rm(dataDir, { recursive: true, force: true })
  }
}

type Client = ReturnType<typeof createPublicClient>

/**
 * One key relaying the same calls as fast as the chain takes them: authorizations signed, transactions
 * signed with nonces counted locally, all sent at once just after a block, timed until the last receipt.
 */
async function measureCeiling(
  client: Client,
  token: Address,
  buyers: readonly PrivateKeyAccount[],
  chainId: number,
): Promise<LiveRelayResult['ceiling']> {
  const relayer = privateKeyToAccount(anvilPrivateKeys[9])
  let nonce = await client.getTransactionCount({ address: relayer.address, blockTag: 'pending' })
  const fees = await client.estimateFeesPerGas()
  const raws = await Promise.all(
    buyers.map(async (buyer) => {
      const typed = authorizationTypedData({
        kind: 'ReceiveWithAuthorization',
        token,
        chainId,
        from: buyer.address,
        to: relayer.address,
        value: amountMinor,
      })
      const signature = await signAuthorization(buyer, JSON.parse(JSON.stringify(typed)))
      const m = typed.message as Record<string, string>
      const data = encodeFunctionData({
        abi: eip3009Abi,
        functionName: 'receiveWithAuthorization',
        args: [
          buyer.address,
          relayer.address,
          amountMinor,
          BigInt(m.validAfter!),
          BigInt(m.validBefore!),
          m.nonce as Hex,
          signature,
        ],
      })
      return { data }
    }),
  )
  const signed = []
  for (const { data } of raws) {
    signed.push(
      await relayer.signTransaction({
        type: 'eip1559',
        chainId,
        to: token,
        data,
        gas: 150_000n,
        nonce: nonce++,
        maxFeePerGas: fees.maxFeePerGas * 2n,
        maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
      }),
    )
  }
  await nextBlock(client)
  const started = Date.now()
  const hashes = await Promise.all(
    signed.map((raw) => client.request({ method: 'eth_sendRawTransaction', params: [raw] }) as Promise<Hash>),
  )
  // The last nonce lands last; then every receipt is read in one batch (read one by one, 100 receipts
  // took 0.26-0.54 s on a loaded machine, time the ceiling's relayer would not spend).
  await client.waitForTransactionReceipt({ hash: hashes.at(-1)!, pollingInterval: 20 })
  const receipts = await Promise.all(hashes.map((hash) => client.getTransactionReceipt({ hash })))
  const seconds = (Date.now() - started) / 1000
  if (receipts.some((r) => r.status !== 'success')) throw new Error('A ceiling relay reverted.')
  return {
    paymentsPerSecond: buyers.length / seconds,
    seconds,
    blocks: new Set(receipts.map((r) => r.blockNumber)).size,
  }
}

/** Resolves right after the head moves, so both runs start at the same point of a block interval. */
async function nextBlock(client: Client): Promise<void> {
  const head = await client.getBlockNumber({ cacheTime: 0 })
  while ((await client.getBlockNumber({ cacheTime: 0 })) === head) await sleep(20)
}

/** The head over time, polled every 50 ms, to count a payment's wait in blocks. */
function trackHeads(client: Client) {
  const seen: { at: number; block: number }[] = []
  let running = true
  void (async () => {
    while (running) {
      const block = Number(await client.getBlockNumber({ cacheTime: 0 }))
      if (seen.at(-1)?.block !== block) seen.push({ at: Date.now(), block })
      await sleep(50)
    }
  })()
  return {
    at(time: number): number {
      let block = seen[0]?.block ?? 0
      for (const s of seen) if (s.at <= time) block = s.block
      return block
    },
    stop() {
      running = false
    },
  }
}

function balanceOf(client: Client, token: Address, owner: Address): Promise<bigint> {
  return client.readContract({ address: token, abi: eip3009Abi, functionName: 'balanceOf', args: [owner] })
}

async function sumBalances(client: Client, token: Address, owners: readonly Address[]): Promise<bigint> {
  const balances = await Promise.all(owners.map((owner) => balanceOf(client, token, owner)))
  return balances.reduce((a, b) => a + b, 0n)
}

/** The figures as printed by `npm run bench:live` and quoted in docs/performance.md. */
export function formatLiveRelay(r: LiveRelayResult): string {
  const c = r.caipay
  return [
    `Live gasless relay, Anvil --block-time 1, ${r.payers} payers at once, caipay serve with defaults`,
    `  ceiling (one key, pre-signed, pipelined): ${r.ceiling.paymentsPerSecond.toFixed(1)} payments/s (${r.ceiling.seconds.toFixed(2)} s, ${r.ceiling.blocks} block(s))`,
    `  caipay: ${c.paymentsPerSecond.toFixed(1)} payments/s (${c.seconds.toFixed(2)} s) = ${r.ratio.toFixed(2)} of the ceiling; failed ${c.failed}`,
    `  confirm answered in p50 ${c.confirmMs.p50} ms, max ${c.confirmMs.max} ms`,
    `  confirm -> succeeded: p50 ${c.blocksToSucceeded.p50} blocks, p95 ${c.blocksToSucceeded.p95}, max ${c.blocksToSucceeded.max}`,
    `  relays over ${c.relayBlocks} block(s), ${c.relaysPerBlock.toFixed(1)} per block; settlement txs per payment ${c.settlementTxsPerPayment.toFixed(2)}; gas per payment ${Math.round(c.gasPerPayment)}`,
    ...(c.serverCpuMsPerPayment === undefined
      ? []
      : [
          `  CPU per payment: caipay ${c.serverCpuMsPerPayment.server.toFixed(1)} ms + its PostgreSQL ${c.serverCpuMsPerPayment.postgres.toFixed(1)} ms${c.nodeCpuMsPerPayment === undefined ? '' : ` (the node, Anvil: ${c.nodeCpuMsPerPayment.toFixed(1)} ms, its blocks included)`}`,
        ]),
    `  status requests per payment (after the confirm): ${c.statusRequestsPerPayment.toFixed(2)}`,
    `  money moved exactly once: ${c.movedExactlyOnce ? 'yes' : 'NO'}`,
    ...(r.statements ?? []),
  ].join('\n')
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values } = parseArgs({
    options: {
      payers: { type: 'string', default: '200' },
      chain: { type: 'string', default: 'evm' },
      // Without it, payers read their status as the wallet library does (held until it changes); with
      // it, one plain read every that many ms (how payers polled before the server held reads).
      'poll-ms': { type: 'string' },
      // Statements and round trips per payment per step (pg_stat_statements); `--statement-texts`
      // also lists every statement's text.
      statements: { type: 'boolean', default: false },
      'statement-texts': { type: 'boolean', default: false },
    },
  })
  const payers = Number(values.payers)
  const statusPollMs = values['poll-ms'] === undefined ? undefined : Number(values['poll-ms'])
  const statements = values['statement-texts'] ? 'all' : values.statements
  if (values.chain === 'solana') {
    const { formatLiveSolana, runLiveSolana } = await import('./liveRelaySolana.js')
    console.log(
      formatLiveSolana(await runLiveSolana({ payers, statusPollMs, ...(statements ? { statements } : {}) })),
    )
  } else {
    const statements = values['statement-texts'] ? 'all' : values.statements
    console.log(
      formatLiveRelay(await runLiveRelay({ payers, statusPollMs, ...(statements ? { statements } : {}) })),
    )
  }
  console.log(
    `Command: npm run bench:live -- --chain ${values.chain} --payers ${values.payers}${statusPollMs === undefined ? '' : ` --poll-ms ${statusPollMs}`}`,
  )
}
