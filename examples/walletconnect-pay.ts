// Paying through a WalletConnect session: the app holds no keys; a remote wallet signs over the session.
// Both sign-clients talk through a local relay (no network needed). Run: npx tsx examples/walletconnect-pay.ts
import { custom } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { decodeEvmAction, evmForwardParams, evmSigner } from '../adapters/evm/index.js'
import { walletConnectSigners } from '../adapters/walletconnect/index.js'
import { createMerchantClient } from '../src/client/index.js'
import { createPayClient } from '../src/index.js'
import {
  closeTestClient,
  connectSession,
  createTestClient,
  respondAsWallet,
} from '../test/walletconnect/clients.js'
import { startRelay } from '../test/walletconnect/relay.js'
import { startExampleServer } from './support.js'

const chain = 'eip155:8453'
const { server, apiKey, walletKey, close } = await startExampleServer()
const relay = await startRelay()
const [dapp, wallet] = await Promise.all([
  createTestClient(relay.url, 'dapp'),
  createTestClient(relay.url, 'wallet'),
])
try {
  // The remote wallet: its own key, answering session requests with caipay's EVM signer.
  const account = privateKeyToAccount(generatePrivateKey())
  const offline = custom({
    request: async () => {
      throw new Error('test mode needs signatures only')
    },
  })
  const remote = evmSigner({ account, chains: { [chain]: { transport: offline } } })
  respondAsWallet(wallet, async ({ chainId, method, params }) => {
    console.log(`wallet: signing ${method} on ${chainId}`)
    return { result: await remote.request({ chainId, method, params: params as unknown[] }) }
  })
  const methods = ['eth_signTypedData_v4', 'personal_sign']
  const session = await connectSession(
    dapp,
    wallet,
    { eip155: { chains: [chain], methods, events: [] } },
    { eip155: { chains: [chain], methods, events: [], accounts: [`${chain}:${account.address}`] } },
  )
  console.log('session', session.topic.slice(0, 12), 'accounts', session.namespaces.eip155?.accounts)

  const api = createMerchantClient({ baseUrl: server.url, apiKey })
  const { merchant } = await api.createMerchant({
    body: { merchantName: 'WC Shop', merchantEmail: 'wc@shop.example' },
  })
  const payment = await api.createPayment({
    merchantId: merchant.id,
    body: { referenceId: 'wc-1', amount: { unit: 'iso4217/USD', value: '2000' } },
  })

  // The app side: the session's accounts and methods become caipay signers.
  const pay = createPayClient({
    baseUrl: server.url,
    apiKey: walletKey,
    signers: walletConnectSigners(dapp, session, {
      inspect: { eip155: decodeEvmAction },
      forwardParams: { eip155: evmForwardParams },
    }),
  })
  const result = await pay.pay(payment.gatewayUrl)
  console.log('result', result.status, result.txId)
  if (result.status !== 'succeeded') process.exitCode = 1
} finally {
  await Promise.all([closeTestClient(dapp), closeTestClient(wallet)])
  await relay.stop()
  await close()
}
