/**
 * A live Solana payment end to end on this machine: `npx tsx examples/solana-pay.ts`
 *
 * Starts a local Solana cluster (the real `solana-test-validator` when installed, else the litesvm
 * facade) with a USDC-like mint, starts the server (embedded PostgreSQL in a temporary directory) with
 * a live config for that cluster, creates a merchant with a crypto settlement and a payment through
 * `caipay/client`, pays it with the wallet library and the Solana adapter (the wallet only signs; the
 * service broadcasts and settles), prints balances before and after, and shuts everything down.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { Keypair, LAMPORTS_PER_SOL, type PublicKey } from '@solana/web3.js'
import { solanaSigner } from '../adapters/solana/index.js'
import { createMerchantClient } from '../src/client/index.js'
import { createPayClient } from '../src/pay/createPayClient.js'
import { encodeBase58 } from '../src/server/chains/solana/index.js'
import { createApiKey, createPartner, resolveConfig, startServer } from '../src/server/index.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  startSolanaValidator,
  tokenBalance,
} from '../test/solana/index.js'

const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-solana-pay-'))
const cluster = await startSolanaValidator()
let server: Awaited<ReturnType<typeof startServer>> | undefined
try {
  const { connection, caip2 } = cluster
  const service = Keypair.generate()
  const mintAuthority = Keypair.generate()
  const buyer = Keypair.generate()
  const merchantWallet = Keypair.generate()
  await airdrop(connection, service.publicKey, 2 * LAMPORTS_PER_SOL)
  await airdrop(connection, mintAuthority.publicKey, 2 * LAMPORTS_PER_SOL)
  const mint = await createTestMint(connection, mintAuthority, 6)
  await mintTestTokens(connection, mintAuthority, mint, buyer.publicKey, 100_000_000n)
  const asset = `${caip2}/token:${mint.toBase58()}`
  console.log(`Solana ${caip2} (${cluster.backend}) at ${cluster.rpcUrl}, mint ${mint.toBase58()}`)

  // Secrets stay out of config files: the service key comes from the environment.
  process.env.CAIPAY_EXAMPLE_SOLANA_KEY = encodeBase58(service.secretKey)
  server = await startServer({
    port: 0,
    dataDir,
    publicBaseUrlFromListen: true,
    jobIntervalMs: 100,
    config: resolveConfig({
      chains: {
        [caip2]: {
          rpcUrl: cluster.rpcUrl,
          signerKey: 'env:CAIPAY_EXAMPLE_SOLANA_KEY',
          assets: { [asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
        },
      },
    }),
  })
  console.log(`Server at ${server.url} (embedded PostgreSQL in ${dataDir})`)

  const partnerId = await createPartner(server.db)
  const { apiKey } = await createApiKey(server.db, { partnerId, mode: 'live' })
  const { apiKey: walletKey } = await createApiKey(server.db, { partnerId, mode: 'live', role: 'wallet' })

  const merchantApi = createMerchantClient({ baseUrl: server.url, apiKey })
  const { merchant } = await merchantApi.createMerchant({
    body: { merchantName: 'Corner Cafe', merchantEmail: 'owner@cafe.example' },
  })
  const destination = `${caip2}:${merchantWallet.publicKey.toBase58()}`
  await merchantApi.createCryptoSettlements({
    params: { merchantId: merchant.id },
    body: { settlements: [{ asset, destination }] },
  })
  console.log(`Merchant ${merchant.id} settles ${asset} to ${merchantWallet.publicKey.toBase58()}`)

  const usdc = async (owner: PublicKey) => {
    const minor = await tokenBalance(connection, owner, mint)
    return `${(Number(minor) / 1e6).toFixed(2).padStart(8)} USDC`
  }
  const printBalances = async (label: string) => {
    console.log(
      `${label}: buyer ${await usdc(buyer.publicKey)} | collection ${await usdc(service.publicKey)} | merchant ${await usdc(merchantWallet.publicKey)}`,
    )
  }

  const payment = await merchantApi.createPayment({
    merchantId: merchant.id,
    body: { referenceId: 'order-1', amount: { unit: 'iso4217/USD', value: '1250' } },
  })
  console.log(`\nPayment ${payment.paymentId}: 12.50 USD, link ${payment.gatewayUrl}`)
  await printBalances('  before')

  // The wallet holds a key and nothing else: no RPC connection, so it cannot broadcast.
  const wallet = createPayClient({
    baseUrl: server.url,
    apiKey: walletKey,
    signers: [solanaSigner({ keypair: buyer, chains: [caip2] })],
    // A local cluster is final in milliseconds; do not wait the service's suggested seconds between polls.
    poll: { sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))) },
  })
  const result = await wallet.pay(payment.gatewayUrl, {
    onFlow: (flow) =>
      flow.on('action', (e) => {
        if (e.phase === 'signed') console.log(`  signed ${e.method} on ${e.chainId}`)
      }),
  })
  console.log(`  ${result.status}: txId ${result.txId}`)

  let view = await merchantApi.getPayment({ merchantId: merchant.id, params: { id: payment.paymentId } })
  for (let i = 0; i < 100 && view.settlement && !view.settlement.successful; i++) {
    await new Promise((resolve) => setTimeout(resolve, 100))
    view = await merchantApi.getPayment({ merchantId: merchant.id, params: { id: payment.paymentId } })
  }
  console.log(
    view.settlement?.successful
      ? `  settled to the merchant: txId ${view.settlement.successful.txId}`
      : '  settlement still pending',
  )
  await printBalances('  after ')
} finally {
  await server?.stop()
  await cluster.stop()
  await fs.rm(dataDir, { recursive: true, force: true })
}
