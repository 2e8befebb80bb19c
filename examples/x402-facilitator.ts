/**
 * caipay as an x402 facilitator, end to end on this machine: `npx tsx examples/x402-facilitator.ts`
 *
 * Starts Anvil with TestUSDC and caipay (live on that chain), then an x402 resource server written with
 * the published `@x402/hono` whose facilitator is caipay's `/x402`. A buyer with the published
 * `@x402/fetch` client pays for `GET /weather`; the payment shows in caipay's merchant API like any
 * other. Then times verify and settle as a resource server's facilitator client sees them.
 */
import { HTTPFacilitatorClient } from '@x402/core/server'
import { ExactEvmScheme } from '@x402/evm/exact/client'
import { decodePaymentResponseHeader, wrapFetchWithPayment, x402Client } from '@x402/fetch'
import { formatUnits } from 'viem'
import { startLiveExample } from './liveExample.js'
import { startWeatherShop } from './x402Shop.js'

const { evm, server, api, merchantId, apiKey, close } = await startLiveExample({ evm: true })
const chain = evm!
const network = chain.caip2 as `${string}:${string}`
const token = chain.asset.slice(chain.asset.lastIndexOf(':') + 1)
const price = '10000' // 0.01 USDC
const shop = await startWeatherShop({
  caipayUrl: server.url,
  apiKey,
  network,
  token,
  payTo: chain.merchant,
  amount: price,
})
try {
  const usdc = (v: bigint) => `${formatUnits(v, 6)} USDC`
  const show = async (label: string) => {
    const b = await chain.balances()
    console.log(
      `${label}: buyer ${usdc(b.buyer)} | merchant ${usdc(b.merchant)} | caipay executor ${usdc(b.collection)}`,
    )
  }

  // The buyer: the published client, allowed to spend this (non-default) token.
  const buyer = x402Client.fromConfig({
    schemes: [{ network, client: new ExactEvmScheme(chain.buyer) }],
    spendControls: { allowedAssets: [{ network, asset: token, maxAmountPerPayment: price }] },
  })
  await show('before')
  const res = await wrapFetchWithPayment(fetch, buyer)(`${shop.url}/weather`)
  const receipt = decodePaymentResponseHeader(res.headers.get('PAYMENT-RESPONSE')!)
  console.log(`GET /weather -> ${res.status} ${JSON.stringify(await res.json())}`)
  console.log(`settled on ${receipt.network}: ${receipt.transaction} (payer ${receipt.payer})`)
  await show('after ')
  const paymentId = String(receipt.extra?.paymentId)
  const view = await api.getPayment({ merchantId, params: { id: paymentId } })
  console.log(`merchant API: ${view.paymentId} ${view.status} ${view.amount.value} ${view.amount.unit}`)

  // Verify and settle latency, through the facilitator client a resource server uses.
  const auth = { Authorization: `Bearer ${apiKey}` }
  const facilitator = new HTTPFacilitatorClient({
    url: `${server.url}/x402`,
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  })
  const requirements = {
    scheme: 'exact',
    network,
    amount: price,
    asset: token,
    payTo: chain.merchant,
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
  }
  const verifyMs: number[] = []
  const settleMs: number[] = []
  for (let i = 0; i < 10; i++) {
    const signed = await new ExactEvmScheme(chain.buyer).createPaymentPayload(2, requirements)
    const payload = { x402Version: 2, accepted: requirements, payload: signed.payload }
    const t0 = performance.now()
    const verified = await facilitator.verify(payload, requirements)
    const t1 = performance.now()
    const settled = await facilitator.settle(payload, requirements)
    const t2 = performance.now()
    if (!verified.isValid || !settled.success) throw new Error(`payment ${i} did not settle`)
    verifyMs.push(t1 - t0)
    settleMs.push(t2 - t1)
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!.toFixed(1)
  console.log(
    `latency over 10 payments (median): verify ${median(verifyMs)} ms, settle ${median(settleMs)} ms (mined)`,
  )
} finally {
  await shop.close()
  await close()
}
