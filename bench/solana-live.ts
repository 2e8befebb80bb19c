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
import { parseArgs } from 'node:util'
import { Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js'
import { solanaSigner } from '../adapters/solana/index.js'
import type { WalletRpcAction } from '../src/contract/gateway.js'
import { encodeBase58 } from '../src/server/chains/solana/index.js'
import { airdrop, createTestMint, mintTestTokens, startSolanaValidator } from '../test/solana/index.js'
import { type LiveBenchServer, startLiveBenchServer } from './liveServer.js'
import { printMedianOfRuns, timeConfirmToSucceeded } from './stats.js'

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '20' }, 'job-interval-ms': { type: 'string', default: '500' } },
})
const runs = Number(values.runs)
const jobIntervalMs = Number(values['job-interval-ms'])

const cluster = await startSolanaValidator()
let server: LiveBenchServer | undefined
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
  server = await startLiveBenchServer({
    caip2,
    rpcUrl: cluster.rpcUrl,
    signerKey: encodeBase58(service.secretKey),
    asset,
    destination: `${caip2}:${Keypair.generate().publicKey.toBase58()}`,
    jobIntervalMs,
  })
  const { call, merchantId } = server
  const signer = solanaSigner({ keypair: buyer, chains: [caip2] })
  const account = `${caip2}:${buyer.publicKey.toBase58()}`

  const measure = async (i: number): Promise<number> => {
    const { paymentId } = await call(
      'POST',
      '/v1/payments',
      { referenceId: `bench-sol-${i}`, amount: { unit: 'iso4217/USD', value: '100' } },
      { 'merchant-id': merchantId },
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
}
