/**
 * A live Solana payment end to end on this machine: `npx tsx examples/solana-pay.ts`
 *
 * Starts a local Solana cluster (the real `solana-test-validator` when installed, else the litesvm facade)
 * with a USDC-like mint and the server with a live config for it, creates a merchant with a crypto
 * settlement and a payment through `caipay/client`, pays it with the wallet library and the Solana adapter
 * (the wallet only signs; the service broadcasts and settles), and prints balances before and after.
 */
import { solanaSigner } from '../adapters/solana/index.js'
import { createPayClient, toDecimalString } from '../src/index.js'
import { startLiveExample, waitForSettlement } from './liveExample.js'

const { solana, server, api, merchantId, walletKey, close } = await startLiveExample({ solana: true })
try {
  const chain = solana!
  const printBalances = async (label: string) => {
    const b = await chain.balances()
    const usdc = (v: bigint) => `${toDecimalString(v, 6).padStart(10)} USDC`
    console.log(
      `${label}: buyer ${usdc(b.buyer)} | collection ${usdc(b.collection)} | merchant ${usdc(b.merchant)}`,
    )
  }
  const payment = await api.createPayment({
    merchantId,
    body: { referenceId: 'order-1', amount: { unit: 'iso4217/USD', value: '1250' } },
  })
  console.log(`\nPayment ${payment.paymentId}: 12.50 USD, link ${payment.gatewayUrl}`)
  await printBalances('  before')

  // The wallet holds a key and nothing else: no RPC connection, so it cannot broadcast.
  const wallet = createPayClient({
    baseUrl: server.url,
    apiKey: walletKey,
    signers: [solanaSigner({ keypair: chain.buyer, chains: [chain.caip2] })],
    poll: { sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))) },
  })
  const result = await wallet.pay(payment.gatewayUrl, {
    onFlow: (flow) =>
      flow.on('action', (e) => {
        if (e.phase === 'signed') console.log(`  signed ${e.method} on ${e.chainId}`)
      }),
  })
  console.log(`  ${result.status}: txId ${result.txId}`)
  const settlement = await waitForSettlement(api, merchantId, payment.paymentId)
  console.log(settlement ? `  settled to the merchant: txId ${settlement}` : '  settlement still pending')
  await printBalances('  after ')
  if (result.status !== 'succeeded' || !settlement) process.exitCode = 1
} finally {
  await close()
}
