/**
 * Paying x402 resources with caipay: `npx tsx examples/x402-pay.ts`
 *
 * Starts Anvil with TestUSDC, caipay as the facilitator, and an x402 resource server (`@x402/hono`).
 * A wallet pays `GET /weather` with `caipay/x402`'s x402Fetch and caipay's viem signer, within a budget:
 * 0.01 USDC per request and 0.02 USDC per origin, so the third request is refused before anything is
 * signed.
 */
import { evmSigner } from '../adapters/evm/index.js'
import { x402Fetch } from '../src/x402/index.js'
import { startLiveExample } from './liveExample.js'
import { buyWeatherThrice, startWeatherShop } from './x402Shop.js'

const { evm, server, apiKey, close } = await startLiveExample({ evm: true })
const chain = evm!
const network = chain.caip2 as `${string}:${string}`
const token = chain.asset.slice(chain.asset.lastIndexOf(':') + 1)
const shop = await startWeatherShop({
  caipayUrl: server.url,
  apiKey,
  network,
  token,
  payTo: chain.merchant,
  amount: '10000',
})
try {
  const pay = x402Fetch(fetch, {
    signers: [evmSigner({ account: chain.buyer, chains: { [network]: { rpcUrl: chain.anvil.rpcUrl } } })],
    budget: { perRequest: { [chain.asset]: '10000' }, perOrigin: { [chain.asset]: '20000' } },
  })
  await buyWeatherThrice(pay, shop)
  const b = await chain.balances()
  console.log(`merchant received ${b.merchant} minor units`)
} finally {
  await shop.close()
  await close()
}
