/**
 * Live Solana payment latency: wall time from the wallet's confirm call to the status endpoint reporting
 * `succeeded`, median of N payments.
 *
 *   npx tsx bench/solana-live.ts [--runs 20] [--job-interval-ms 500]
 *
 * Real parts only: the local Solana cluster (litesvm facade, or `solana-test-validator` when installed)
 * with a USDC-like mint, the server over HTTP on embedded PostgreSQL (temporary directory) with its own
 * job runner (the server default poll interval unless given), the web3.js signer of the wallet library.
 * What the figure holds: the job's pickup (LISTEN/NOTIFY when confirm commits; polling is the fallback),
 * sendTransaction with preflight, status polling until confirmed, and the move to `succeeded` (the
 * settlement runs after it).
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { parseArgs } from 'node:util'
import { Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js'
import { solanaSigner } from '../adapters/solana/index.js'
import type { WalletRpcAction } from '../src/contract/gateway.js'
import { encodeBase58 } from '../src/server/chains/solana/index.js'
import { createApiKey, createPartner, resolveConfig, startServer } from '../src/server/index.js'
import { airdrop, createTestMint, mintTestTokens, startSolanaValidator } from '../test/solana/index.js'
import { printMedianOfRuns, timeConfirmToSucceeded } from './stats.js'

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '20' }, 'job-interval-ms': { type: 'string', default: '500' } },
})
const runs = Number(values.runs)
const jobIntervalMs = Number(values['job-interval-ms'])

const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-solana-'))
const cluster = await startSolanaValidator()
let server: Awaited<ReturnType<typeof startServer>> | undefined
try {
  const { connection, caip2 } = cluster
  const service = Keypair.generate()
  const mintAuthority = Keypair.generate()
  const buyer = Keypair.generate()
  await airdrop(connection, service.publicKey, 10 * LAMPORTS_PER_SOL)
  await airdrop(connection, mintAuthority.publicKey, 2 * LAMPORTS_PER_SOL)
  const mint = await createTestMint(connection, mintAuthority, 6)
  await mintTestTokens(connection, mintAuthority, mint, buyer.publicKey, 1_000_000_000n)
  const asset = `${caip2}/token:${mint.toBase58()}`
  server = await startServer({
    port: 0,
    dataDir,
    jobIntervalMs,
    config: resolveConfig({
      rateLimit: false,
      chains: {
        [caip2]: {
          rpcUrl: cluster.rpcUrl,
          signerKey: encodeBase58(service.secretKey),
          assets: { [asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
        },
      },
    }),
  })
  const base = server.url
  const partnerId = await createPartner(server.db)
  const { apiKey } = await createApiKey(server.db, { partnerId, mode: 'live' })
  const call = async (method: string, url: string, body?: unknown, extra: Record<string, string> = {}) => {
    const res = await fetch(`${base}${url}`, {
      method,
      headers: { 'api-key': apiKey, 'content-type': 'application/json', ...extra },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    })
    // biome-ignore lint/suspicious/noExplicitAny: JSON bodies of a benchmark, read field by field
    const json = (await res.json()) as any
    if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`)
    return json
  }
  const { merchant } = await call(
    'POST',
    '/v1/merchants',
    { merchantName: 'Bench', merchantEmail: 'bench@example.com' },
    { 'idempotency-key': `bench-${Date.now()}` },
  )
  await call(
    'POST',
    `/v1/merchants/${merchant.id}/settlements/crypto`,
    { settlements: [{ asset, destination: `${caip2}:${Keypair.generate().publicKey.toBase58()}` }] },
    { 'idempotency-key': `bench-s-${Date.now()}` },
  )
  const signer = solanaSigner({ keypair: buyer, chains: [caip2] })
  const account = `${caip2}:${buyer.publicKey.toBase58()}`

  const measure = async (i: number): Promise<number> => {
    const { paymentId } = await call(
      'POST',
      '/v1/payments',
      { referenceId: `bench-sol-${i}`, amount: { unit: 'iso4217/USD', value: '100' } },
      { 'merchant-id': merchant.id },
    )
    const gw = `/v1/gateway/payment/${paymentId}`
    const { options } = await call('POST', `${gw}/options`, { accounts: [account] })
    const option = options[0]
    const { actions } = await call('POST', `${gw}/fetch`, {
      optionId: option.id,
      data: option.actions[0].build.data,
    })
    const action: WalletRpcAction = actions[0]
    const result = await signer.request({
      chainId: action.walletRpc.chainId,
      method: action.walletRpc.method,
      params: JSON.parse(action.walletRpc.params),
    })
    // A random pause keeps confirm out of step with the runner's poll timer, so the figure does not
    // depend on where in its period the loop happens to confirm.
    await new Promise((resolve) => setTimeout(resolve, Math.random() * jobIntervalMs))
    return timeConfirmToSucceeded(call, paymentId, { optionId: option.id, results: [result] })
  }

  console.log(
    `Live Solana payment, confirm -> succeeded, ${cluster.backend}, job runner polling every ${jobIntervalMs} ms`,
  )
  // Run -1 is the warm-up: connections, the mint's program and decimals.
  await printMedianOfRuns('SPL transferChecked (service fee payer, broadcast + confirm)', runs, measure)
  console.log(`Command: npx tsx bench/solana-live.ts --runs ${runs} --job-interval-ms ${jobIntervalMs}`)
} finally {
  await server?.stop()
  await cluster.stop()
  await fs.rm(dataDir, { recursive: true, force: true })
}
