/**
 * x402 against caipay with the published packages as they are: an `@x402/hono` resource server whose
 * facilitator is caipay's `/x402` (an `HTTPFacilitatorClient` sending the live key through
 * `createAuthHeaders`), served over HTTP, paid by `@x402/fetch` clients.
 */
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { HTTPFacilitatorClient } from '@x402/core/server'
import type { PaymentRequirements } from '@x402/core/types'
import { ExactEvmScheme as ExactEvmServer } from '@x402/evm/exact/server'
import { paymentMiddleware, x402ResourceServer } from '@x402/hono'
import type { FastifyInstance } from 'fastify'
import { Hono } from 'hono'
import type { EvmEnv } from '../evm/support.js'
import type { TestServer } from '../server/harness.js'

export interface Priced {
  network: `${string}:${string}`
  payTo: string
  /** Minor units of `asset`. */
  amount: string
  asset: string
  extra?: Record<string, unknown>
  maxTimeoutSeconds?: number
}

export interface ResourceServer {
  url: string
  /** Calls the resource server's facilitator client made (path), for proving nothing reached caipay. */
  facilitatorCalls: string[]
  close(): Promise<void>
}

/** caipay listening on loopback; returns its `/x402` URL. */
export async function listenX402(app: FastifyInstance): Promise<string> {
  const address = await app.listen({ port: 0, host: '127.0.0.1' })
  return `${address}/x402`
}

/**
 * An `@x402/hono` app charging `priced` for `GET /weather`, `schemes` registered per network (the
 * packages' own server schemes), its facilitator caipay at `facilitatorUrl` with `apiKey`.
 */
export async function startResourceServer(options: {
  facilitatorUrl: string
  apiKey: string | undefined
  priced: Priced
  schemes: Record<string, unknown>
  merchantId?: string
}): Promise<ResourceServer> {
  const facilitatorCalls: string[] = []
  const headers = (path: string) => {
    facilitatorCalls.push(path)
    return {
      ...(options.apiKey ? { Authorization: `Bearer ${options.apiKey}` } : {}),
      ...(options.merchantId ? { 'Merchant-Id': options.merchantId } : {}),
    }
  }
  const facilitator = new HTTPFacilitatorClient({
    url: options.facilitatorUrl,
    createAuthHeaders: async () => ({
      verify: headers('verify'),
      settle: headers('settle'),
      supported: headers('supported'),
    }),
  })
  const resourceServer = new x402ResourceServer(facilitator)
  for (const [network, scheme] of Object.entries(options.schemes))
    resourceServer.register(network as `${string}:${string}`, scheme as never)
  const { priced } = options
  const app = new Hono()
  app.use(
    paymentMiddleware(
      {
        'GET /weather': {
          accepts: {
            scheme: 'exact',
            network: priced.network,
            payTo: priced.payTo,
            price: { amount: priced.amount, asset: priced.asset, extra: priced.extra ?? {} },
            maxTimeoutSeconds: priced.maxTimeoutSeconds ?? 60,
          },
          description: 'Weather',
        },
      },
      resourceServer,
    ),
  )
  app.get('/weather', (c) => c.json({ weather: 'sunny' }))
  const server = serve({ fetch: app.fetch, port: 0, hostname: '127.0.0.1' })
  await new Promise<void>((resolve) => server.once('listening', () => resolve()))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    facilitatorCalls,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

/** The body x402's facilitator client posts to verify and settle. */
export function facilitatorBody(paymentPayload: unknown, paymentRequirements: PaymentRequirements) {
  return { x402Version: 2, paymentPayload, paymentRequirements }
}

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies, checked by assertions
export function decodeHeader(value: string | null): any {
  return value === null ? undefined : JSON.parse(Buffer.from(value, 'base64').toString('utf8'))
}

/** POSTs to caipay's `/x402/verify` or `/x402/settle` with `key` as the Bearer key ('' for none). */
export function facilitatorPost(t: () => TestServer, liveKey: () => string) {
  return (path: 'verify' | 'settle', body: unknown, key = liveKey()) =>
    t().request({
      method: 'POST',
      url: `/x402/${path}`,
      headers: key ? { authorization: `Bearer ${key}` } : {},
      payload: body as Record<string, unknown>,
    })
}

/** The published resource server selling `/weather` for `price` of the EVM env's token to its merchant. */
export function startWeatherServer(
  env: EvmEnv,
  facilitatorUrl: string,
  apiKey: string | undefined,
  price: bigint,
) {
  return startResourceServer({
    facilitatorUrl,
    apiKey,
    priced: {
      network: env.anvil.caip2 as `${string}:${string}`,
      payTo: env.merchant.destination,
      amount: price.toString(),
      asset: env.token,
      extra: { name: 'USD Coin', version: '2' },
    },
    schemes: { [env.anvil.caip2]: new ExactEvmServer() },
  })
}
