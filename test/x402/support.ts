/**
 * x402 against caipay with the published packages as they are: an `@x402/hono` resource server whose
 * facilitator is caipay's `/x402` (an `HTTPFacilitatorClient` sending the live key through
 * `createAuthHeaders`), served over HTTP, paid by `@x402/fetch` clients.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { HTTPFacilitatorClient } from '@x402/core/server'
import type { PaymentRequirements } from '@x402/core/types'
import { ExactEvmScheme as ExactEvmServer } from '@x402/evm/exact/server'
import { paymentMiddleware, x402ResourceServer } from '@x402/hono'
import { ExactSvmScheme as ExactSvmServer } from '@x402/svm/exact/server'
import type { FastifyInstance } from 'fastify'
import { Hono } from 'hono'
import { afterAll, beforeAll } from 'vitest'
import type { EvmEnv } from '../evm/support.js'
import type { TestServer } from '../server/harness.js'
import { type SolanaLive, startSolanaLive } from '../solana-live/live.js'

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

/** x402 `exact` requirements for `price` of the EVM env's token to its merchant (`overrides` replace fields). */
export function exactRequirements(env: EvmEnv, price: bigint, overrides: Record<string, unknown> = {}) {
  return {
    scheme: 'exact',
    network: env.anvil.caip2 as `${string}:${string}`,
    amount: price.toString(),
    asset: env.token,
    payTo: env.merchant.destination,
    maxTimeoutSeconds: 60,
    extra: { name: 'USD Coin', version: '2' },
    ...overrides,
  }
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

/** Devnet's CAIP-2 reference followed by more base58: a 32-byte hash the x402 client takes for devnet. */
const devnetLikeGenesis = 'EtWTRABZaYq6iMfeYKouRu166VU2xqa1wcqWoBPUh5Z'

/**
 * The Solana harness with caipay live on it and the published resource server selling `/weather` for
 * `price` of its token to a merchant's owner `payTo` (holding 1 minor unit). The x402 client knows only
 * public clusters by CAIP-2, so the local cluster reports a genesis hash with devnet's CAIP-2 reference.
 */
export async function startSolanaShop(price: bigint) {
  const live: SolanaLive = await startSolanaLive({ genesisHash: devnetLikeGenesis })
  const network = live.caip2 as `${string}:${string}`
  const payTo = await live.newBuyer(1n)
  await live.createMerchant(payTo.publicKey)
  live.startRunner()
  const resource = await startResourceServer({
    facilitatorUrl: await listenX402(live.t.app),
    apiKey: live.liveKey,
    priced: {
      network,
      payTo: payTo.publicKey.toBase58(),
      amount: price.toString(),
      asset: live.mint.toBase58(),
    },
    schemes: { [network]: new ExactSvmServer() },
  })
  return {
    live,
    network,
    payTo,
    resource,
    async close() {
      await resource.close()
      await live.close()
    },
  }
}

/**
 * A hostile resource server for the enclosing describe block: on loopback, answering every request 402
 * with the requirements last `offer`ed.
 */
export function hostileResource() {
  let terms: Record<string, unknown>[] = []
  let server: Awaited<ReturnType<typeof startHostileServer>>
  beforeAll(async () => {
    server = await startHostileServer(() => terms)
  })
  afterAll(() => server.close())
  return {
    offer(accepts: Record<string, unknown>[]) {
      terms = accepts
    },
    url: () => server.url,
  }
}

async function startHostileServer(terms: () => Record<string, unknown>[]) {
  const server = createServer((_req, res) => {
    const required = { x402Version: 2, resource: { url: 'http://hostile/x' }, accepts: terms() }
    res.writeHead(402, { 'PAYMENT-REQUIRED': Buffer.from(JSON.stringify(required)).toString('base64') })
    res.end('{}')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}/x`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
