import type { AddressInfo } from 'node:net'
import { type Action, WalletConnectPay } from '@walletconnect/pay'
import type { FastifyInstance } from 'fastify'
import { type Buyer, createGatewayEnv, type GatewayEnv } from '../gateway/support.js'
import type { TestServerOptions } from '../server/harness.js'
import { guardNetwork, type NetworkGuard } from '../walletconnect/clients.js'

export type PayClient = InstanceType<typeof WalletConnectPay>
export type SdkAuth = { apiKey: string } | { appId: string; clientId?: string }

/** caipay listening on loopback, and SDK clients pointed at its `/wcp` mount. */
export interface SdkServer {
  /** `http://127.0.0.1:<port>`. */
  origin: string
  client(auth: SdkAuth): PayClient
}

export async function listenForSdk(app: FastifyInstance): Promise<SdkServer> {
  await app.listen({ host: '127.0.0.1', port: 0 })
  const origin = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
  return {
    origin,
    client: (auth) => new WalletConnectPay({ ...auth, baseUrl: `${origin}/wcp`, logger: 'silent' }),
  }
}

/**
 * A test-mode gateway env served to the published WalletConnect Pay SDK. The SDK posts telemetry to
 * ingest.walletconnect.org: the network guard refuses every non-loopback fetch (and records it), so
 * nothing leaves the machine.
 */
export interface SdkEnv {
  env: GatewayEnv
  origin: string
  network: NetworkGuard
  /** An SDK client; the gateway env's wallet key unless other credentials are given. */
  client(auth?: SdkAuth): PayClient
  close(): Promise<void>
}

export async function startSdkEnv(options: TestServerOptions = {}): Promise<SdkEnv> {
  const network = guardNetwork()
  const env = await createGatewayEnv(options)
  const server = await listenForSdk(env.t.app)
  return {
    env,
    origin: server.origin,
    network,
    client: (auth = { apiKey: env.walletKey }) => server.client(auth),
    async close() {
      await env.t.close()
      network.restore()
    },
  }
}

/** The wallet's side of an SDK action: caipay's test buyer signs the same `walletRpc`. */
export function signAll(buyer: Buyer, actions: readonly Action[]): Promise<string[]> {
  return Promise.all(actions.map((a) => buyer.sign({ type: 'walletRpc', walletRpc: a.walletRpc })))
}
