/**
 * The server side shared by the live payment benchmarks (evm-live.ts, solana-live.ts): the server over
 * HTTP on embedded PostgreSQL in a temporary directory, live on one chain, with a merchant that settles
 * the chain's asset to `destination`, and a JSON helper authenticated with a live partner key.
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { createApiKey, createPartner, resolveConfig, startServer } from '../src/server/index.js'

export interface LiveBenchServer {
  // biome-ignore lint/suspicious/noExplicitAny: JSON bodies of a benchmark, read field by field
  call: (method: string, url: string, body?: unknown, extra?: Record<string, string>) => Promise<any>
  merchantId: string
  stop(): Promise<void>
}

export interface LiveBenchServerOptions {
  caip2: string
  rpcUrl: string
  /** The chain's `signerKey` (EVM hex key or Solana base58 secret key). */
  signerKey: string
  /** CAIP-19 id of a 6-decimal USD stablecoin on that chain. */
  asset: string
  /** CAIP-10 settlement destination of the merchant. */
  destination: string
  jobIntervalMs: number
}

export async function startLiveBenchServer(options: LiveBenchServerOptions): Promise<LiveBenchServer> {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-live-'))
  const server = await startServer({
    port: 0,
    dataDir,
    jobIntervalMs: options.jobIntervalMs,
    config: resolveConfig({
      rateLimit: false,
      chains: {
        [options.caip2]: {
          rpcUrl: options.rpcUrl,
          signerKey: options.signerKey,
          assets: { [options.asset]: { symbol: 'USDC', name: 'USD Coin', decimals: 6, usdRate: '1' } },
        },
      },
    }),
  }).catch(async (error) => {
    await fs.rm(dataDir, { recursive: true, force: true })
    throw error
  })
  const stop = async () => {
    await server.stop()
    await fs.rm(dataDir, { recursive: true, force: true })
  }
  try {
    const partnerId = await createPartner(server.db)
    const { apiKey } = await createApiKey(server.db, { partnerId, mode: 'live' })
    const call: LiveBenchServer['call'] = async (method, url, body, extra = {}) => {
      const res = await fetch(`${server.url}${url}`, {
        method,
        headers: { 'api-key': apiKey, 'content-type': 'application/json', ...extra },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
      })
      const json = await res.json()
      if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`)
      return json
    }
    const { merchant } = await call(
      'POST',
      '/v1/merchants',
      { merchantName: 'Bench', merchantEmail: 'bench@example.com' },
      { 'idempotency-key': `bench-${Date.now()}` },
    )
    await call(
      'POST',
      `/v1/merchants/${merchant.id}/settlements/crypto`,
      { settlements: [{ asset: options.asset, destination: options.destination }] },
      { 'idempotency-key': `bench-s-${Date.now()}` },
    )
    return { call, merchantId: merchant.id, stop }
  } catch (error) {
    await stop()
    throw error
  }
}
