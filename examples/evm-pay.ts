/**
 * A live EVM payment end to end on this machine: `npx tsx examples/evm-pay.ts`
 *
 * Starts Anvil and deploys TestUSDC, starts the server (embedded PostgreSQL in a temporary directory)
 * with a live config for that chain, creates a merchant with a crypto settlement and a payment through
 * `caipay/client`, pays it with the wallet library and the viem adapter (gasless EIP-3009, then a direct
 * transfer), prints balances before and after, and shuts everything down.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { type Address, createPublicClient, formatUnits, http } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { evmSigner } from '../adapters/evm/index.js'
import { testUsdcAbi } from '../fixtures/token/index.js'
import { createMerchantClient } from '../src/client/index.js'
import { createPayClient } from '../src/pay/createPayClient.js'
import { createApiKey, createPartner, resolveConfig, startServer } from '../src/server/index.js'
import { anvilPrivateKeys, deployTestToken, mintTestToken, startAnvil } from '../test/anvil.js'

const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-evm-pay-'))
const anvil = await startAnvil()
let server: Awaited<ReturnType<typeof startServer>> | undefined
try {
  const token = await deployTestToken(anvil.rpcUrl)
  const asset = `${anvil.caip2}/erc20:${token}`
  const serviceKey = anvilPrivateKeys[1]
  const collection = privateKeyToAccount(serviceKey).address
  const buyer = privateKeyToAccount(anvilPrivateKeys[2])
  const destination = privateKeyToAccount(generatePrivateKey()).address
  await mintTestToken(anvil.rpcUrl, token, buyer.address, 100_000_000n)
  console.log(`Anvil ${anvil.caip2} at ${anvil.rpcUrl}, TestUSDC ${token}`)

  process.env.CAIPAY_EXAMPLE_SIGNER_KEY = serviceKey
  server = await startServer({
    port: 0,
    dataDir,
    publicBaseUrlFromListen: true,
    jobIntervalMs: 100,
    config: resolveConfig({
      chains: {
        [anvil.caip2]: {
          rpcUrl: anvil.rpcUrl,
          // Secrets stay out of config files: the key comes from the environment.
          signerKey: 'env:CAIPAY_EXAMPLE_SIGNER_KEY',
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
  await merchantApi.createCryptoSettlements({
    params: { merchantId: merchant.id },
    body: { settlements: [{ asset, destination: `${anvil.caip2}:${destination}` }] },
  })
  console.log(`Merchant ${merchant.id} settles ${asset} to ${destination}`)

  const publicClient = createPublicClient({ transport: http(anvil.rpcUrl) })
  const balances = async () => {
    const of = (address: Address) =>
      publicClient.readContract({
        address: token,
        abi: testUsdcAbi,
        functionName: 'balanceOf',
        args: [address],
      })
    return {
      buyer: await of(buyer.address),
      collection: await of(collection),
      merchant: await of(destination),
    }
  }
  const printBalances = async (label: string) => {
    const b = await balances()
    const usdc = (v: bigint) => `${formatUnits(v, 6).padStart(8)} USDC`
    console.log(
      `${label}: buyer ${usdc(b.buyer)} | collection ${usdc(b.collection)} | merchant ${usdc(b.merchant)}`,
    )
  }

  const wallet = createPayClient({
    baseUrl: server.url,
    apiKey: walletKey,
    signers: [
      evmSigner({
        account: buyer,
        chains: { [anvil.caip2]: { rpcUrl: anvil.rpcUrl } },
        pollingInterval: 100,
      }),
    ],
    // A local chain is final in milliseconds; do not wait the service's suggested seconds between polls.
    poll: { sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))) },
  })

  for (const method of ['eth_signTypedData_v4', 'eth_sendTransaction'] as const) {
    const payment = await merchantApi.createPayment({
      merchantId: merchant.id,
      body: {
        referenceId: `order-${method === 'eth_sendTransaction' ? 2 : 1}`,
        amount: { unit: 'iso4217/USD', value: '1250' },
      },
    })
    const kind =
      method === 'eth_signTypedData_v4'
        ? 'gasless (EIP-3009, the service pays gas)'
        : 'direct (ERC-20 transfer)'
    console.log(`\nPayment ${payment.paymentId}: 12.50 USD, paid ${kind}`)
    await printBalances('  before')
    const result = await wallet.pay(payment.gatewayUrl, {
      selectOption: (options) => {
        const option = options.find(
          (o) => o.actions[0]?.type === 'walletRpc' && o.actions[0].walletRpc.method === method,
        )
        if (!option) throw new Error(`no ${method} option`)
        return option.id
      },
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
        : '  no settlement step (the transfer went straight to the merchant)',
    )
    await printBalances('  after ')
  }
} finally {
  await server?.stop()
  await anvil.stop()
  await fs.rm(dataDir, { recursive: true, force: true })
}
