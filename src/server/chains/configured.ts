import type { ServerConfig } from '../config.js'
import type { AssetConfig } from './types.js'

/** The assets of the configured chains, in the drivers' shape. */
export function configuredAssets(config: ServerConfig): Record<string, AssetConfig[]> {
  const out: Record<string, AssetConfig[]> = {}
  for (const [caip2, chain] of Object.entries(config.chains)) {
    out[caip2] = Object.entries(chain.assets).map(([id, a]) => ({
      id,
      symbol: a.symbol,
      name: a.name,
      decimals: a.decimals,
      usdRate: a.usdRate,
      ...(a.iconUrl !== undefined ? { iconUrl: a.iconUrl } : {}),
      ...(a.methods ? { methods: a.methods } : {}),
      ...(a.eip712 ? { eip712: a.eip712 } : {}),
      ...(a.push === false ? { push: false } : {}),
    }))
  }
  return out
}

/** A chain's RPC URLs: `rpcUrl` first, then `rpcUrls` (either may be alone), without repeats. */
export function rpcUrlsOf(config: {
  rpcUrl?: string | undefined
  rpcUrls?: readonly string[] | undefined
}): string[] {
  return [...new Set([...(config.rpcUrl ? [config.rpcUrl] : []), ...(config.rpcUrls ?? [])])]
}
