/**
 * An x402 resource server as its operator would write it with the published packages (`@x402/hono`,
 * `@x402/evm`, `@x402/svm`), with caipay as its facilitator: `facilitator.url` is caipay's `/x402`, and the live API
 * key goes in the `Authorization` header of every facilitator call.
 */
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { HTTPFacilitatorClient } from '@x402/core/server'
import { ExactEvmScheme } from '@x402/evm/exact/server'
import { paymentMiddleware, x402ResourceServer } from '@x402/hono'
import { ExactSvmScheme } from '@x402/svm/exact/server'
import { Hono } from 'hono'
import { isPayError } from '../src/index.js'
import type { X402FetchFn } from '../src/x402/index.js'

export interface Shop {
  url: string
  close(): Promise<void>
}

/** Sells `GET /weather` for `amount` minor units of `token` on `network`, paid to `payTo`. */
export async function startWeatherShop(options: {
  caipayUrl: string
  apiKey: string
  network: `${string}:${string}`
  token: string
  payTo: string
  amount: string
}): Promise<Shop> {
  const auth = { Authorization: `Bearer ${options.apiKey}` }
  const facilitator = new HTTPFacilitatorClient({
    url: `${options.caipayUrl}/x402`,
    createAuthHeaders: async () => ({ verify: auth, settle: auth, supported: auth }),
  })
  const solana = options.network.startsWith('solana:')
  const resourceServer = new x402ResourceServer(facilitator).register(
    options.network,
    solana ? new ExactSvmScheme() : new ExactEvmScheme(),
  )
  const app = new Hono()
  app.use(
    paymentMiddleware(
      {
        'GET /weather': {
          accepts: {
            scheme: 'exact',
            network: options.network,
            payTo: options.payTo,
            price: {
              amount: options.amount,
              asset: options.token,
              // On EVM, the token's EIP-712 domain: what the buyer's EIP-3009 authorization is signed
              // under. On Solana the facilitator's fee payer is added from its /supported.
              extra: solana ? {} : { name: 'USD Coin', version: '2' },
            },
          },
          description: 'The weather today',
        },
      },
      resourceServer,
    ),
  )
  app.get('/weather', (c) => c.json({ weather: 'sunny', celsius: 21 }))
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
  await new Promise<void>((resolve) => server.once('listening', () => resolve()))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** Buys the weather three times with an x402 payer, printing each answer or refusal. */
export async function buyWeatherThrice(pay: X402FetchFn, shop: Shop): Promise<void> {
  for (const n of [1, 2, 3]) {
    try {
      const res = await pay(`${shop.url}/weather`)
      console.log(
        `request ${n}: ${res.status} ${JSON.stringify(await res.json())}, paid in ${res.payment?.transaction}`,
      )
    } catch (error) {
      if (!isPayError(error)) throw error
      console.log(`request ${n} refused (${error.code}), nothing signed: ${error.message}`)
    }
  }
}
