import type { ServerConfig } from '../config.js'
import type { JobHandler, JobLogger } from '../jobs/runner.js'
import type { FinalStatuses } from '../payments/finalStatuses.js'
import type { Db } from '../store/db.js'
import { createEvmRuntime, type EvmChain } from './evm/index.js'
import { createSolanaRuntime, type SolanaChain } from './solana/index.js'
import type { ChainDriver } from './types.js'

/** What live mode runs on: the gateway's drivers and the job handlers that finish their payments. */
export interface LiveRuntime {
  drivers: readonly ChainDriver[]
  jobHandlers: Readonly<Record<string, JobHandler>>
  /** The configured chains themselves, for what serves them besides the gateway (the x402 facilitator). */
  chains?: { evm: readonly EvmChain[]; solana: readonly SolanaChain[] }
}

export interface LiveRuntimeOptions {
  config: ServerConfig
  db: Db
  log?: JobLogger
  /** The app's final status answers (FastPath): the chains' finishers keep what they wrote. */
  finals?: FinalStatuses
}

/** Every namespace's chains of `config.chains`, in one runtime. Add a namespace with one line. */
export function createLiveRuntime(options: LiveRuntimeOptions): LiveRuntime {
  const evm = createEvmRuntime(options)
  const solana = createSolanaRuntime(options)
  const parts = [evm, solana]
  return {
    drivers: parts.flatMap((p) => p.drivers),
    jobHandlers: Object.assign({}, ...parts.map((p) => p.jobHandlers)),
    chains: { evm: evm.chains, solana: solana.chains },
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The job handlers of live mode, by kind: what the server's job runner claims and runs. */
    jobHandlers: Readonly<Record<string, JobHandler>>
    /** The configured chains (none when the runtime given to buildApp does not say). */
    liveChains: NonNullable<LiveRuntime['chains']>
  }
}
