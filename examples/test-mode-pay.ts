// A wallet pays a test-mode payment with the caipay library and the viem adapter.
// Run: npx tsx examples/test-mode-pay.ts
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { evmSigner } from '../adapters/evm/index.js'
import { createMerchantClient } from '../src/client/index.js'
import { createPayClient } from '../src/index.js'
import { startExampleServer } from './support.js'

const { server, apiKey, walletKey, close } = await startExampleServer()
try {
  // Merchant side: a merchant and a $12.50 payment.
  const api = createMerchantClient({ baseUrl: server.url, apiKey })
  const { merchant } = await api.createMerchant({
    body: { merchantName: 'Demo Shop', merchantEmail: 'demo@shop.example' },
  })
  const payment = await api.createPayment({
    merchantId: merchant.id,
    body: { referenceId: 'order-42', amount: { unit: 'iso4217/USD', value: '1250' } },
  })

  // Wallet side: the whole flow in a few lines.
  const account = privateKeyToAccount(generatePrivateKey())
  const pay = createPayClient({
    baseUrl: server.url,
    apiKey: walletKey,
    signers: [evmSigner({ account, chains: { 'eip155:8453': { rpcUrl: 'http://127.0.0.1:8545' } } })],
  })
  const result = await pay.pay(payment.gatewayUrl, {
    selectOption: (options) => {
      for (const o of options)
        console.log('option', o.id, o.amount.value, o.amount.display.assetSymbol, o.account)
      return options[0]!.id
    },
    onFlow: (flow) => flow.on('state', ({ to }) => console.log('state', to)),
  })
  console.log('result', result.status, result.txId)
  if (result.status !== 'succeeded') process.exitCode = 1
} finally {
  await close()
}
