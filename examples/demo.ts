/**
 * The main job, end to end on this machine: `npm run demo`.
 *
 * Anvil with the TestUSDC token, a local Solana cluster with a USDC-like mint, an embedded PostgreSQL and
 * the caipay server in live mode for both chains; a partner, a merchant with crypto settlement on both
 * chains, and two payments paid with the wallet library: one on EVM (gasless EIP-3009) and one on Solana
 * (the wallet signs, the service broadcasts). Exits 0 only when both succeeded and settled.
 */
import fs from 'node:fs/promises'
import { evmSigner } from '../adapters/evm/index.js'
import { solanaSigner } from '../adapters/solana/index.js'
import { createPayClient, type PaymentOption, type PaymentResult, toDecimalString } from '../src/index.js'
import type { RunningServer } from '../src/server/index.js'
import {
  createLiveMerchant,
  type LiveChains,
  startLiveServer,
  stopChains,
  waitForSettlement,
} from './liveExample.js'
import { startLocalEvm, startLocalSolana } from './localChains.js'
import { step, table } from './progress.js'

const started = performance.now()
const chains: LiveChains = {}
let server: RunningServer | undefined
let dataDir: string | undefined
let ok = false

try {
  console.log('caipay demo: live payments on a local EVM chain and a local Solana cluster\n')
  const evm = await step(
    'Anvil with the TestUSDC token',
    () => startLocalEvm('CAIPAY_DEMO_EVM_KEY'),
    (c) => c.caip2,
  )
  chains.evm = evm
  const solana = await step(
    'Solana cluster with a USDC mint',
    () => startLocalSolana('CAIPAY_DEMO_SOLANA_KEY'),
    (c) => `${c.caip2} (${c.cluster.backend})`,
  )
  chains.solana = solana
  ;({ server, dataDir } = await step(
    'Embedded PostgreSQL and the caipay server, live on both chains',
    () => startLiveServer(chains),
    (s) => s.server.url,
  ))
  const running = server
  const { api, merchantId, walletKey } = await step(
    'Partner with live keys and a merchant settling on both chains',
    () => createLiveMerchant(running, chains),
    (m) => m.merchantId,
  )
  const url = running.url

  const payments = await step(
    'Two payments of 12.50 USD',
    async () => {
      const create = (referenceId: string) =>
        api.createPayment({
          merchantId,
          body: { referenceId, amount: { unit: 'iso4217/USD', value: '1250' } },
        })
      return { evm: await create('demo-evm'), solana: await create('demo-solana') }
    },
    (p) => `${p.evm.paymentId}, ${p.solana.paymentId}`,
  )

  const before = { evm: await evm.balances(), solana: await solana.balances() }
  const wallet = createPayClient({
    baseUrl: url,
    apiKey: walletKey,
    signers: [
      evmSigner({
        account: evm.buyer,
        chains: { [evm.caip2]: { rpcUrl: evm.anvil.rpcUrl } },
        pollingInterval: 100,
      }),
      // The Solana signer has no connection at all: the wallet signs, the service broadcasts.
      solanaSigner({ keypair: solana.buyer, chains: [solana.caip2] }),
    ],
    // Local chains are final in milliseconds: poll faster than the service's default hint.
    poll: { sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 150))) },
  })
  const pick = (chain: string, method?: string) => (options: readonly PaymentOption[]) => {
    const option = options.find((o) => {
      const first = o.actions[0]
      return (
        o.account.startsWith(`${chain}:`) &&
        o.actions.length === 1 &&
        (!method || (first?.type === 'walletRpc' && first.walletRpc.method === method))
      )
    })
    if (!option) throw new Error(`No option on ${chain}${method ? ` with ${method}` : ''}.`)
    return option.id
  }

  const results: Record<'evm' | 'solana', PaymentResult> = {
    evm: await step(
      'Pay on EVM: gasless EIP-3009, signed with viem',
      () => wallet.pay(payments.evm.gatewayUrl, { selectOption: pick(evm.caip2, 'eth_signTypedData_v4') }),
      (r) => `${r.status} ${r.txId}`,
    ),
    solana: await step(
      'Pay on Solana: transaction signed with web3.js, broadcast by the service',
      () => wallet.pay(payments.solana.gatewayUrl, { selectOption: pick(solana.caip2) }),
      (r) => `${r.status} ${r.txId}`,
    ),
  }

  const settlements = await step(
    'Settlement to the merchant on both chains',
    async () => ({
      evm: await waitForSettlement(api, merchantId, payments.evm.paymentId),
      solana: await waitForSettlement(api, merchantId, payments.solana.paymentId),
    }),
    (s) => (s.evm && s.solana ? 'both settled' : 'not settled'),
  )

  const after = { evm: await evm.balances(), solana: await solana.balances() }
  const usdc = (minor: bigint) => `${toDecimalString(minor, 6)}`
  const delta = (a: bigint, b: bigint) => `${b - a >= 0n ? '+' : ''}${toDecimalString(b - a, 6)}`
  const short = (text: string | undefined) =>
    text ? (text.length > 22 ? `${text.slice(0, 10)}…${text.slice(-8)}` : text) : '-'
  const row = (chain: 'evm' | 'solana', label: string) => [
    payments[chain].paymentId,
    label,
    results[chain].status,
    short(results[chain].txId),
    short(settlements[chain]),
    `${usdc(after[chain].buyer)} (${delta(before[chain].buyer, after[chain].buyer)})`,
    `${usdc(after[chain].merchant)} (${delta(before[chain].merchant, after[chain].merchant)})`,
  ]
  console.log(
    `\n${table([
      ['payment', 'chain', 'status', 'tx', 'settlement tx', 'buyer USDC', 'merchant USDC'],
      row('evm', `${evm.caip2} gasless`),
      row('solana', solana.caip2),
    ])}\n`,
  )

  const paid = (chain: 'evm' | 'solana') =>
    results[chain].status === 'succeeded' &&
    settlements[chain] !== undefined &&
    before[chain].buyer - after[chain].buyer === 12_500_000n &&
    after[chain].merchant - before[chain].merchant === 12_500_000n
  ok = paid('evm') && paid('solana')
  console.log(ok ? 'Both payments succeeded and settled.' : 'A payment did not succeed or settle.')
} catch (error) {
  console.error('\nDemo failed:', error instanceof Error ? error.message : error)
} finally {
  await step('Shut down server, PostgreSQL and chains', async () => {
    await server?.stop()
    await stopChains(chains)
    if (dataDir) await fs.rm(dataDir, { recursive: true, force: true })
  })
  console.log(`Done in ${((performance.now() - started) / 1000).toFixed(1)} s.`)
}
process.exit(ok ? 0 : 1)
