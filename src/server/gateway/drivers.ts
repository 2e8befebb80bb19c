import { sameCaip } from '../../caip/caip.js'
import { configuredAssets } from '../chains/configured.js'
import { testModeDrivers } from '../chains/simulated.js'
import type { AssetConfig, ChainDriver, PaymentMode } from '../chains/types.js'
import type { ServerConfig } from '../config.js'

/** Which driver serves which chain, per mode. */
export interface DriverRegistry {
  drivers(mode: PaymentMode): readonly ChainDriver[]
  driver(mode: PaymentMode, caip2: string): ChainDriver | undefined
  /** Every asset known in a mode (for display and USD thresholds). */
  asset(mode: PaymentMode, assetId: string): AssetConfig | undefined
}

/**
 * Test mode: the simulated driver on the default chains and on every configured chain. Live mode: the
 * drivers given (one per configured chain, built by the EVM and Solana executors); none by default.
 */
export function createDriverRegistry(
  config: ServerConfig,
  live: readonly ChainDriver[] = [],
): DriverRegistry {
  const byMode: Record<PaymentMode, readonly ChainDriver[]> = {
    test: testModeDrivers(configuredAssets(config)),
    live,
  }
  return {
    drivers: (mode) => byMode[mode],
    driver: (mode, caip2) => byMode[mode].find((d) => d.caip2 === caip2),
    asset(mode, assetId) {
      for (const d of byMode[mode]) {
        const found = d.assets.find((a) => sameCaip(a.id, assetId))
        if (found) return found
      }
      return undefined
    },
  }
}
