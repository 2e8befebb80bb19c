/** Live payments on Solana clusters: drivers for the gateway and the jobs that execute them. */

import type { ServerConfig } from '../../config.js'
import type { JobHandler, JobLogger } from '../../jobs/runner.js'
import type { FinalStatuses } from '../../payments/finalStatuses.js'
import { relayGuardSettings } from '../../payments/relayGuards.js'
import type { Db } from '../../store/db.js'
import { configuredAssets, rpcUrlsOf } from '../configured.js'
import type { ChainDriver } from '../types.js'
import { createSolanaChain, type SolanaChain } from './chain.js'
import { createSolanaDriver } from './driver.js'
import { solanaJobHandlers } from './jobs.js'
import { parseSolanaSecretKey } from './keys.js'
import { createSolanaWatcher } from './watcher.js'
import './schema.js'

export type { SolanaChain } from './chain.js'
export { solanaJobKinds } from './jobKinds.js'
export { solanaFailureCode } from './jobs.js'
export { encodeBase58, parseSolanaSecretKey } from './keys.js'

export interface SolanaRuntimeOptions {
  config: ServerConfig
  /** Where the jobs' transactions are recorded (the chain watchers mark what landed). */
  db: Db
  log?: JobLogger
  /** Status polling while a transaction confirms, ms (default 200). */
  pollMs?: number
  /** How long one job run waits for confirmation before handing the job back (default 30 s). */
  confirmTimeoutMs?: number
  /** Expected seconds from confirm to a final status, shown to buyers (default 2). */
  etaS?: number
  /** The app's final status answers (FastPath): the finisher keeps what it wrote. */
  finals?: FinalStatuses
}

export interface SolanaRuntime {
  chains: readonly SolanaChain[]
  /** One per configured `solana:*` chain, for live mode. */
  drivers: readonly ChainDriver[]
  /** By job kind, for the job runner. */
  jobHandlers: Record<string, JobHandler>
}

/** Builds the Solana chains of `config.chains` (none configured: an empty runtime). */
export function createSolanaRuntime(options: SolanaRuntimeOptions): SolanaRuntime {
  const assets = configuredAssets(options.config)
  const chains = Object.entries(options.config.chains)
    .filter(([caip2]) => caip2.startsWith('solana:'))
    .map(([caip2, chain]) => {
      let service: ReturnType<typeof parseSolanaSecretKey>
      try {
        service = parseSolanaSecretKey(chain.signerKey)
      } catch (error) {
        throw new Error(`Invalid configuration:\n  chains.${caip2}.signerKey: ${(error as Error).message}`)
      }
      return createSolanaChain({
        caip2,
        rpcUrls: rpcUrlsOf(chain),
        service,
        assets: assets[caip2] ?? [],
        ...(chain.commitment !== undefined ? { commitment: chain.commitment } : {}),
        // A Solana chain's fast paths (fastPath.ts): shared blockhash validity reads, kept-alive
        // connections to its nodes.
        ...(options.config.fastPaths ? { keepAlive: true } : { blockhashValidityMs: 0 }),
        ...(options.pollMs !== undefined ? { pollMs: options.pollMs } : {}),
        ...(options.confirmTimeoutMs !== undefined ? { confirmTimeoutMs: options.confirmTimeoutMs } : {}),
      })
    })
  const log = options.log
  // One watcher per chain, shared by its driver (confirm sends through it) and its jobs.
  const watchers = new Map(chains.map((chain) => [chain.caip2, createSolanaWatcher(options.db, chain)]))
  return {
    chains,
    drivers: chains.map((chain) =>
      createSolanaDriver({
        chain,
        watcher: watchers.get(chain.caip2)!,
        guards: relayGuardSettings(options.config),
        ...(options.etaS !== undefined ? { etaS: options.etaS } : {}),
        ...(log
          ? {
              onQuoteError: (error, context) =>
                log.warn({ ...context, chain: chain.caip2, error: String(error) }, 'Solana quote failed'),
            }
          : {}),
      }),
    ),
    jobHandlers: solanaJobHandlers(
      chains,
      options.db,
      options.config.settlementIntervalMs,
      watchers,
      relayGuardSettings(options.config),
      options.finals,
      options.config.fastPaths,
    ),
  }
}
