/**
 * Live Solana payments at the harness's speed: the litesvm cluster behind its JSON-RPC (a slot every
 * 400 ms, every transaction of a slot landing in it), N payers confirming signed SPL `transferChecked`
 * payments at once against the server as shipped (`caipay serve` through bin/caipay.js, default
 * settings, embedded PostgreSQL in a temporary directory), and in the same run the harness's ceiling for
 * one fee payer: the same transfers (built by the server's own builder, signed by payer and fee payer
 * beforehand), sent pipelined without waiting, timed until the last is confirmed.
 *
 *   npm run bench:live -- --chain solana [--payers 200]
 *
 * Reported: payments per second as a share of the ceiling's, confirm -> `succeeded` in ms and slots
 * (p50, p95), how long the confirm request itself took, the server's status reads (getSignatureStatuses
 * calls and signatures per call) and sends, settlement transactions per payment, and whether the money
 * moved exactly once. The server reaches the cluster through a counting JSON-RPC proxy.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { type Connection, Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { solanaSigner } from '../../adapters/solana/index.js'
import type { WalletRpcAction } from '../../src/contract/gateway.js'
import { createSolanaChain } from '../../src/server/chains/solana/chain.js'
import { encodeBase58 } from '../../src/server/chains/solana/keys.js'
import { buildTransfer, serializeSigned } from '../../src/server/chains/solana/transaction.js'
import { startFaultProxy } from '../../test/rpcFaults.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  startSolanaValidator,
  tokenBalance,
} from '../../test/solana/index.js'
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
import { type StatementPhases, statementPhases } from '../statements.js'

export interface LiveSolanaOptions {
  /** Payers confirming at once (and transfers in the ceiling run). */
  payers: number
  /** Plain status reads every this many ms instead of the library's held reads (readUntilFinal). */
  statusPollMs?: number
  /** Count statements per step with pg_stat_statements (bench/statements.ts); 'all' lists every text. */
  statements?: boolean | 'all'
}

export interface LiveSolanaResult {
  payers: number
  slotMs: number
  ceiling: { paymentsPerSecond: number; seconds: number; slots: number }
  caipay: {
    paymentsPerSecond: number
    seconds: number
    failed: number
    /** How long the confirm request itself took, ms. */
    confirmMs: { p50: number; max: number }
    msToSucceeded: { p50: number; p95: number; max: number }
    slotsToSucceeded: { p50: number; p95: number; max: number }
    /** The slots the payments landed in. */
    paymentSlots: number
    /** The server's getSignatureStatuses calls from the first confirm until the last payment was final. */
    statusCalls: number
    signaturesPerStatusCall: { mean: number; max: number }
    /** Sends per payment (its own transaction and its settlement's, re-broadcasts included). */
    sendsPerPayment: number
    settlementTxsPerPayment: number
    /**
     * CPU milliseconds per payment of the server and its embedded PostgreSQL, from the first confirm to
     * the last payment final (status reads included); Linux only.
     */
    serverCpuMsPerPayment: { server: number; postgres: number } | undefined
    movedExactlyOnce: boolean
  }
  ratio: number
  /** Per-step statement tables (options.statements), printed as they are. */
  statements?: string[]
}

const amountMinor = 1_000_000n // USD 1.00 of a 6-decimal stablecoin
const slotMs = 400

export async function runLiveSolana(options: LiveSolanaOptions): Promise<LiveSolanaResult> {
  const n = options.payers
  const cluster = await startSolanaValidator({ backend: 'litesvm', slotMs })
  const proxy = await startFaultProxy(cluster.rpcUrl)
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-solana-'))
  let server: CliServer | undefined
  let stats: StatementPhases | undefined
  try {
    const { connection, caip2 } = cluster
    const service = Keypair.generate()
    const mintAuthority = Keypair.generate()
    await airdrop(connection, service.publicKey, 100 * LAMPORTS_PER_SOL)
    await airdrop(connection, mintAuthority.publicKey, 100 * LAMPORTS_PER_SOL)
    const mint = await createTestMint(connection, mintAuthority, 6)
    const asset = `${caip2}/token:${mint.toBase58()}`
    const buyers = Array.from({ length: n }, () => Keypair.generate())
    await inParallel(buyers, 8, (buyer) =>
      mintTestTokens(connection, mintAuthority, mint, buyer.publicKey, 10n * amountMinor),
    )

    const ceiling = await measureCeiling(cluster.rpcUrl, caip2, asset, buyers)

    server = await startCliServer(
      {
        rateLimit: false,
        chains: {
          [caip2]: {
            rpcUrl: proxy.url,
            signerKey: encodeBase58(service.secretKey),
            assets: { [asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
          },
        },
      },
      dataDir,
      { statementStats: options.statements !== undefined && options.statements !== false },
    )
    const { call } = server
    const destination = Keypair.generate().publicKey
    const { merchant } = await call('POST', '/v1/merchants', {
      merchantName: 'Bench',
      merchantEmail: 'b@example.com',
    })
    await call('POST', `/v1/merchants/${merchant.id}/settlements/crypto`, {
      settlements: [{ asset, destination: `${caip2}:${destination.toBase58()}` }],
    })
    const balances = async () => ({
      buyers: await sumBalances(connection, buyers, mint),
      destination: await tokenBalance(connection, destination, mint),
      collection: await tokenBalance(connection, service.publicKey, mint),
    })
    const before = await balances()
    stats = options.statements
      ? await statementPhases(server.dbDir, n, options.statements === 'all')
      : undefined
    const signed = await inParallel(buyers, 16, async (buyer, i) => {
      const { paymentId } = await call(
        'POST',
        '/v1/payments',
        { referenceId: `solana-bench-${i}`, amount: { unit: 'iso4217/USD', value: '100' } },
        { 'merchant-id': merchant.id },
      )
      const gateway = `/v1/gateway/payment/${paymentId}`
      const { options } = await call('POST', `${gateway}/options`, {
        accounts: [`${caip2}:${buyer.publicKey.toBase58()}`],
      })
      const option = options[0]
      if (!option) throw new Error(`No option: ${JSON.stringify(options)}`)
      const { actions } = await call('POST', `${gateway}/fetch`, {
        optionId: option.id,
        data: option.actions[0].build.data,
      })
      const action: WalletRpcAction = actions[0]
      const result = await solanaSigner({ keypair: buyer, chains: [caip2] }).request({
        chainId: action.walletRpc.chainId,
        method: action.walletRpc.method,
        params: JSON.parse(action.walletRpc.params),
      })
      return { paymentId: paymentId as string, optionId: option.id as string, result }
    })

    const statusCallsBefore = proxy.calls('getSignatureStatuses')
    const sendsBefore = proxy.calls('sendTransaction')
    await stats?.phase('create + options + fetch (before the clock)')
    await nextSlot(connection)
    const cpuBefore = server.cpuMs()
    const window = profileWindow()
    const started = Date.now()
    const outcomes = await Promise.all(
      signed.map(async (s) => {
        const confirmedAt = Date.now()
        const slotAtConfirm = await connection.getSlot()
        const confirm = await call('POST', `/v1/gateway/payment/${s.paymentId}/confirm`, {
          optionId: s.optionId,
          results: [s.result],
        }).catch((error: unknown) => ({ error: String(error) }))
        const answeredAt = Date.now()
        const end = (status: string) => ({ ...s, status, confirmedAt, answeredAt, slotAtConfirm })
        if ('error' in confirm) return { ...end('confirm failed'), doneAt: Date.now(), slotAtDone: 0 }
        const status = await readUntilFinal(call, s.paymentId, confirm, options.statusPollMs)
        return { ...end(status.status), doneAt: Date.now(), slotAtDone: await connection.getSlot() }
      }),
    )
    const seconds = (Math.max(...outcomes.map((o) => o.doneAt)) - started) / 1000
    const cpuAfter = server.cpuMs()
    await window.end()
    await stats?.phase('confirm -> final (confirm, send, statuses, status reads)')
    await stats?.settledPhase('final -> settled (settlement batch)')
    const statusParams = proxy.params('getSignatureStatuses').slice(statusCallsBefore)
    const perCall = statusParams.map((p) => ((p as unknown[])[0] as unknown[]).length)
    const succeededOnes = outcomes.filter((o) => o.status === 'succeeded')
    const succeeded = succeededOnes.length
    const ms = succeededOnes.map((o) => o.doneAt - o.confirmedAt).sort((a, b) => a - b)
    const slots = succeededOnes.map((o) => o.slotAtDone - o.slotAtConfirm).sort((a, b) => a - b)
    const confirmMs = outcomes.map((o) => o.answeredAt - o.confirmedAt).sort((a, b) => a - b)

    // Settled: every payment's settlement recorded (the merchant view), then the chain's accounts.
    const views = await settledViews(call, merchant.id, outcomes)
    const sends = proxy.calls('sendTransaction') - sendsBefore
    const paymentStatuses = await connection.getSignatureStatuses(
      views.filter((v) => v.info?.txId).map((v) => v.info.txId as string),
    )
    const settleIds = new Set(
      views.filter((v) => v.settlement?.successful).map((v) => v.settlement.successful.txId as string),
    )
    const after = await balances()
    const charged = before.buyers - after.buyers
    const movedExactlyOnce =
      charged === amountMinor * BigInt(succeeded) &&
      after.destination - before.destination === charged &&
      after.collection === before.collection &&
      views.every((v) => v.status !== 'succeeded' || v.settlement?.successful)
    const paymentsPerSecond = succeeded / seconds
    return {
      payers: n,
      slotMs,
      ceiling,
      caipay: {
        paymentsPerSecond,
        seconds,
        failed: n - succeeded,
        confirmMs: { p50: quantile(confirmMs, 0.5), max: confirmMs.at(-1) ?? Number.NaN },
        msToSucceeded: { p50: quantile(ms, 0.5), p95: quantile(ms, 0.95), max: ms.at(-1) ?? Number.NaN },
        slotsToSucceeded: {
          p50: quantile(slots, 0.5),
          p95: quantile(slots, 0.95),
          max: slots.at(-1) ?? Number.NaN,
        },
        paymentSlots: new Set(paymentStatuses.value.map((s) => s?.slot)).size,
        statusCalls: perCall.length,
        signaturesPerStatusCall: {
          mean: perCall.reduce((a, b) => a + b, 0) / Math.max(1, perCall.length),
          max: Math.max(0, ...perCall),
        },
        sendsPerPayment: sends / Math.max(1, succeeded),
        settlementTxsPerPayment: settleIds.size / Math.max(1, succeeded),
        serverCpuMsPerPayment:
          cpuBefore === undefined || cpuAfter === undefined
            ? undefined
            : {
                server: (cpuAfter.server - cpuBefore.server) / n,
                postgres: (cpuAfter.postgres - cpuBefore.postgres) / n,
              },
        movedExactlyOnce,
      },
      ratio: paymentsPerSecond / ceiling.paymentsPerSecond,
      ...(stats ? { statements: stats.tables } : {}),
    }
  } finally {
    await stats?.close()
    await server?.stop()
    await proxy.stop()
    await cluster.stop()
    await fs.rm(dataDir, { recursive: true, force: true })
  }
}

/**
 * One fee payer landing the same transfers as fast as the harness takes them: built by the server's own
 * builder (transferChecked and a memo, the collection account created when missing), signed by the payer
 * and the fee payer beforehand, all sent at once with preflight right after a slot begins, timed until
 * the last is confirmed (statuses read in batches meanwhile).
 */
async function measureCeiling(
  rpcUrl: string,
  caip2: string,
  asset: string,
  buyers: readonly Keypair[],
): Promise<LiveSolanaResult['ceiling']> {
  const feePayer = Keypair.generate()
  const chain = createSolanaChain({
    caip2,
    rpcUrls: [rpcUrl],
    service: feePayer,
    assets: [{ id: asset, symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' }],
  })
  const { connection } = chain
  await airdrop(connection, feePayer.publicKey, 100 * LAMPORTS_PER_SOL)
  const mint = await chain.mintInfo(chain.assets[0]!)
  const recipient = Keypair.generate().publicKey
  const transfers = await inParallel(buyers, 16, async (buyer, i) => {
    const transfer = await buildTransfer({
      chain,
      mint,
      owner: buyer.publicKey,
      recipient,
      amount: amountMinor,
      memo: `ceiling:${i}`,
      signers: [buyer],
    })
    return { signature: transfer.signature, bytes: serializeSigned(transfer.transaction) }
  })
  await nextSlot(connection)
  const started = Date.now()
  await Promise.all(
    transfers.map((t) => connection.sendRawTransaction(t.bytes, { skipPreflight: false, maxRetries: 0 })),
  )
  const landed = new Map<string, number>()
  while (landed.size < transfers.length) {
    const waiting = transfers.filter((t) => !landed.has(t.signature)).map((t) => t.signature)
    for (let i = 0; i < waiting.length; i += 256) {
      const { value } = await connection.getSignatureStatuses(waiting.slice(i, i + 256))
      value.forEach((status, j) => {
        if (status?.err) throw new Error(`A ceiling transfer failed: ${JSON.stringify(status.err)}`)
        if (status?.confirmationStatus === 'confirmed' || status?.confirmationStatus === 'finalized')
          landed.set(waiting[i + j]!, status.slot)
      })
    }
    if (landed.size < transfers.length) await sleep(20)
  }
  const seconds = (Date.now() - started) / 1000
  return { paymentsPerSecond: buyers.length / seconds, seconds, slots: new Set(landed.values()).size }
}

/** Resolves right after the slot moves, so both runs start at the same point of a slot. */
async function nextSlot(connection: Connection): Promise<void> {
  const slot = await connection.getSlot()
  while ((await connection.getSlot()) === slot) await sleep(10)
}

async function sumBalances(connection: Connection, owners: readonly Keypair[], mint: PublicKey) {
  const balances = await inParallel(owners, 16, (owner) => tokenBalance(connection, owner.publicKey, mint))
  return balances.reduce((a, b) => a + b, 0n)
}

/** The figures as printed by `npm run bench:live -- --chain solana` and quoted in docs/performance.md. */
export function formatLiveSolana(r: LiveSolanaResult): string {
  const c = r.caipay
  const status = c.signaturesPerStatusCall
  return [
    `Live Solana payments, litesvm harness (a slot every ${r.slotMs} ms), ${r.payers} payers at once, caipay serve with defaults`,
    `  ceiling (one fee payer, pre-signed, pipelined): ${r.ceiling.paymentsPerSecond.toFixed(1)} payments/s (${r.ceiling.seconds.toFixed(2)} s, ${r.ceiling.slots} slot(s))`,
    `  caipay: ${c.paymentsPerSecond.toFixed(1)} payments/s (${c.seconds.toFixed(2)} s) = ${r.ratio.toFixed(2)} of the ceiling; failed ${c.failed}`,
    `  confirm answered in p50 ${c.confirmMs.p50} ms, max ${c.confirmMs.max} ms`,
    `  confirm -> succeeded: p50 ${c.msToSucceeded.p50} ms / ${c.slotsToSucceeded.p50} slots, p95 ${c.msToSucceeded.p95} ms / ${c.slotsToSucceeded.p95} slots, max ${c.msToSucceeded.max} ms`,
    `  payments landed over ${c.paymentSlots} slot(s); getSignatureStatuses: ${c.statusCalls} calls, ${status.mean.toFixed(1)} signatures per call (max ${status.max}); sends per payment ${c.sendsPerPayment.toFixed(2)}`,
    ...(c.serverCpuMsPerPayment === undefined
      ? []
      : [
          `  CPU per payment: caipay ${c.serverCpuMsPerPayment.server.toFixed(1)} ms + its PostgreSQL ${c.serverCpuMsPerPayment.postgres.toFixed(1)} ms`,
        ]),
    `  settlement txs per payment ${c.settlementTxsPerPayment.toFixed(2)}; money moved exactly once: ${c.movedExactlyOnce ? 'yes' : 'NO'}`,
    ...(r.statements ?? []),
  ].join('\n')
}
