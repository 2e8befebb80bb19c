import type { AddressInfo } from 'node:net'
import { type Action, WalletConnectPay } from '@walletconnect/pay'

export type PayClient = InstanceType<typeof WalletConnectPay>

import { type Buyer, createGatewayEnv, type GatewayEnv } from '../gateway/support.js'
import type { TestServerOptions } from '../server/harness.js'
import { guardNetwork, type NetworkGuard } from '../walletconnect/clients.js'

/**
 * caipay listening on loopback, and the published WalletConnect Pay SDK pointed at its `/wcp` mount.
 * The SDK posts telemetry to ingest.walletconnect.org: the network guard refuses every non-loopback
 * fetch (and records it), so nothing leaves the machine.
 */
export interface SdkEnv {
  env: GatewayEnv
  /** `http://127.0.0.1:<port>`. */
  origin: string
  network: NetworkGuard
  /** An SDK client on the `/wcp` mount; the gateway env's wallet key unless other credentials are given. */
  client(auth?: { apiKey: string } | { appId: string; clientId?: string }): PayClient
  close(): Promise<void>
}

export async function startSdkEnv(options: TestServerOptions = {}): Promise<SdkEnv> {
  const network = guardNetwork()
  const env = await createGatewayEnv(options)
  await env.t.app.listen({ host: '127.0.0.1', port: 0 })
  const origin = `http://127.0.0.1:${(env.t.app.server.address() as AddressInfo).port}`
  return {
    env,
    origin,
    network,
    client: (auth = { apiKey: env.walletKey }) =>
      new WalletConnectPay({ ...auth, baseUrl: `${origin}/wcp`, logger: 'silent' }),
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
