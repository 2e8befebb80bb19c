/**
 * A live EVM payment end to end on this machine: `npx tsx examples/evm-pay.ts`
 *
 * Starts Anvil with TestUSDC and the server (embedded PostgreSQL in a temporary directory) with a live
 * config for that chain, creates a merchant with a crypto settlement and payments through `caipay/client`,
 * pays them with the wallet library and the viem adapter (gasless EIP-3009, then a direct transfer), and
 * prints balances before and after.
 */
import { formatUnits } from 'viem'
import { evmSigner } from '../adapters/evm/index.js'
import { createPayClient } from '../src/index.js'
import { startLiveExample, waitForSettlement } from './liveExample.js'

const { evm, server, api, merchantId, walletKey, close } = await startLiveExample({ evm: true })
try {
  const chain = evm!
  const printBalances = async (label: string) => {
    const b = await chain.balances()
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
        account: chain.buyer,
        chains: { [chain.caip2]: { rpcUrl: chain.anvil.rpcUrl } },
        pollingInterval: 100,
      }),
    ],
    // A local chain is final in milliseconds: do not wait the service's suggested seconds between polls.
    poll: { sleep: (ms) => new Promise((resolve) => setTimeout(resolve, Math.min(ms, 200))) },
  })

  for (const [index, method] of (['eth_signTypedData_v4', 'eth_sendTransaction'] as const).entries()) {
    const payment = await api.createPayment({
      merchantId,
      body: { referenceId: `order-${index + 1}`, amount: { unit: 'iso4217/USD', value: '1250' } },
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
    const settlement = await waitForSettlement(api, merchantId, payment.paymentId)
    console.log(
      settlement
        ? `  settled to the merchant: txId ${settlement}`
        : '  no settlement step (the transfer went straight to the merchant)',
    )
    await printBalances('  after ')
  }
} finally {
  await close()
}
