/**
 * Live EVM payment latency on Anvil: wall time from the wallet's confirm call to the status endpoint
 * reporting `succeeded`, median of N payments per kind (gasless relay and direct transfer).
 *
 *   npx tsx bench/evm-live.ts [--runs 20] [--job-interval-ms 500]
 *
 * Real parts only: Anvil + TestUSDC, the server over HTTP on embedded PostgreSQL (temporary directory),
 * its own job runner (the poll interval is the server default unless given), the viem signer.
 */
import { parseArgs } from 'node:util'
import { privateKeyToAccount } from 'viem/accounts'
import { evmSigner } from '../adapters/evm/index.js'
import type { WalletRpcAction } from '../src/contract/gateway.js'
import { anvilPrivateKeys, deployTestToken, mintTestToken, startAnvil } from '../test/anvil.js'
import { type LiveBenchServer, startLiveBenchServer } from './liveServer.js'
import { printMedianOfRuns, timeConfirmToSucceeded } from './stats.js'

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '20' }, 'job-interval-ms': { type: 'string', default: '500' } },
})
const runs = Number(values.runs)
const jobIntervalMs = Number(values['job-interval-ms'])

const anvil = await startAnvil()
let server: LiveBenchServer | undefined
try {
  const token = await deployTestToken(anvil.rpcUrl)
  const asset = `${anvil.caip2}/erc20:${token}`
  const buyer = privateKeyToAccount(anvilPrivateKeys[2])
  await mintTestToken(anvil.rpcUrl, token, buyer.address, 1_000_000_000n)
  server = await startLiveBenchServer({
    caip2: anvil.caip2,
    rpcUrl: anvil.rpcUrl,
    signerKey: anvilPrivateKeys[1],
    asset,
    destination: `${anvil.caip2}:${privateKeyToAccount(anvilPrivateKeys[5]).address}`,
    jobIntervalMs,
  })
  const { call, merchantId } = server
  const signer = evmSigner({ account: buyer, chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } } })

  const measure = async (
    method: 'eth_signTypedData_v4' | 'eth_sendTransaction',
    i: number,
  ): Promise<number> => {
    const { paymentId } = await call(
      'POST',
      '/v1/payments',
      { referenceId: `bench-${method.slice(4, 8)}-${i}`, amount: { unit: 'iso4217/USD', value: '100' } },
      { 'merchant-id': merchantId },
    )
    const gw = `/v1/gateway/payment/${paymentId}`
    const { options } = await call('POST', `${gw}/options`, { accounts: [`${anvil.caip2}:${buyer.address}`] })
    const option = options.find(
      (o: { actions: WalletRpcAction[] }) => o.actions[0]?.walletRpc.method === method,
    )
    const action: WalletRpcAction = option.actions[0]
    const result = await signer.request({
      chainId: action.walletRpc.chainId,
      method: action.walletRpc.method,
      params: JSON.parse(action.walletRpc.params),
    })
    return timeConfirmToSucceeded(call, paymentId, { optionId: option.id, results: [result] })
  }

  console.log(
    `Live EVM payment, confirm -> succeeded, Anvil (automine), job runner polling every ${jobIntervalMs} ms`,
  )
  for (const [label, method] of [
    ['gasless (EIP-3009 relay + receipt)', 'eth_signTypedData_v4'],
    ['direct (ERC-20 transfer receipt check)', 'eth_sendTransaction'],
  ] as const) {
    // Run -1 is the warm-up: connections, the token's EIP-712 domain cache.
    await printMedianOfRuns(label, runs, (i) => measure(method, i))
  }
  console.log(`Command: npx tsx bench/evm-live.ts --runs ${runs} --job-interval-ms ${jobIntervalMs}`)
} finally {
  await server?.stop()
  await anvil.stop()
}
