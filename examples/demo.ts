/**
 * The main job, end to end on this machine: `npm run demo`.
 *
 * Anvil with the TestUSDC token, a local Solana cluster with a USDC-like mint, an embedded PostgreSQL and
 * the caipay server in live mode for both chains; a partner, a merchant with crypto settlement on both
 * chains, and two payments paid with the wallet library: one on EVM (gasless EIP-3009) and one on Solana
 * (the wallet signs, the service broadcasts). Exits 0 only when both succeeded and settled.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { evmSigner } from '../adapters/evm/index.js'
import { solanaSigner } from '../adapters/solana/index.js'
import { createMerchantClient } from '../src/client/index.js'
import { createPayClient, type PaymentOption, type PaymentResult, toDecimalString } from '../src/index.js'
import {
  createApiKey,
  createPartner,
  type RunningServer,
  resolveConfig,
  startServer,
} from '../src/server/index.js'
import { type LocalEvmChain, type LocalSolanaChain, startLocalEvm, startLocalSolana } from './localChains.js'
import { step, table } from './progress.js'

const started = performance.now()
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-demo-'))
let evm: LocalEvmChain | undefined
let solana: LocalSolanaChain | undefined
let server: RunningServer | undefined
let ok = false

try {
  console.log('caipay demo: live payments on a local EVM chain and a local Solana cluster\n')
  evm = await step(
    'Anvil with the TestUSDC token',
    () => startLocalEvm('CAIPAY_DEMO_EVM_KEY'),
    (c) => c.caip2,
  )
  solana = await step(
    'Solana cluster with a USDC mint',
    () => startLocalSolana('CAIPAY_DEMO_SOLANA_KEY'),
    (c) => `${c.caip2} (${c.cluster.backend})`,
  )
  const config = resolveConfig({ chains: { [evm.caip2]: evm.config, [solana.caip2]: solana.config } })
  server = await step(
    'Embedded PostgreSQL and the caipay server',
    () => startServer({ port: 0, dataDir, config, publicBaseUrlFromListen: true, jobIntervalMs: 100 }),
    (s) => s.url,
  )
  const db = server.db
  const url = server.url

  const keys = await step(
    'Partner with live keys (partner + wallet roles)',
    async () => {
      const partnerId = await createPartner(db)
      return {
        partnerId,
        apiKey: (await createApiKey(db, { partnerId, mode: 'live' })).apiKey,
        walletKey: (await createApiKey(db, { partnerId, mode: 'live', role: 'wallet' })).apiKey,
      }
    },
    (k) => k.partnerId,
  )

  const api = createMerchantClient({ baseUrl: url, apiKey: keys.apiKey })
  const merchantId = await step(
    'Merchant with crypto settlement on both chains',
    async () => {
      const { merchant } = await api.createMerchant({
        body: { merchantName: 'Corner Cafe', merchantEmail: 'owner@cafe.example' },
      })
      await api.createCryptoSettlements({
        params: { merchantId: merchant.id },
        body: {
          settlements: [
            { asset: evm!.asset, destination: `${evm!.caip2}:${evm!.merchant}` },
            { asset: solana!.asset, destination: `${solana!.caip2}:${solana!.merchant.toBase58()}` },
          ],
        },
      })
      return merchant.id
    },
    (id) => id,
  )

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
    apiKey: keys.walletKey,
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
      () => wallet.pay(payments.evm.gatewayUrl, { selectOption: pick(evm!.caip2, 'eth_signTypedData_v4') }),
      (r) => `${r.status} ${r.txId}`,
    ),
    solana: await step(
      'Pay on Solana: transaction signed with web3.js, broadcast by the service',
      () => wallet.pay(payments.solana.gatewayUrl, { selectOption: pick(solana!.caip2) }),
      (r) => `${r.status} ${r.txId}`,
    ),
  }

  const settlements = await step(
    'Settlement to the merchant on both chains',
    async () => {
      const settled = async (paymentId: string) => {
        for (let i = 0; i < 200; i++) {
          const view = await api.getPayment({ merchantId, params: { id: paymentId } })
          if (view.settlement?.successful) return view.settlement.successful.txId
          await new Promise((resolve) => setTimeout(resolve, 100))
        }
        return undefined
      }
      return { evm: await settled(payments.evm.paymentId), solana: await settled(payments.solana.paymentId) }
    },
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
    await Promise.allSettled([evm?.stop(), solana?.stop()])
    await fs.rm(dataDir, { recursive: true, force: true })
  })
  console.log(`Done in ${((performance.now() - started) / 1000).toFixed(1)} s.`)
}
process.exit(ok ? 0 : 1)
