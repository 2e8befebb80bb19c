import type { ServerConfig } from '../config.js'
import type { JobHandler, JobLogger } from '../jobs/runner.js'
import type { Db } from '../store/db.js'
import { createEvmRuntime } from './evm/index.js'
import { createSolanaRuntime } from './solana/index.js'
import type { ChainDriver } from './types.js'

/** What live mode runs on: the gateway's drivers and the job handlers that finish their payments. */
export interface LiveRuntime {
  drivers: readonly ChainDriver[]
  jobHandlers: Readonly<Record<string, JobHandler>>
}

export interface LiveRuntimeOptions {
  config: ServerConfig
  db: Db
  log?: JobLogger
}

/** Every namespace's chains of `config.chains`, in one runtime. Add a namespace with one line. */
export function createLiveRuntime(options: LiveRuntimeOptions): LiveRuntime {
  const parts: LiveRuntime[] = [createEvmRuntime(options), createSolanaRuntime(options)]
  return {
    drivers: parts.flatMap((p) => p.drivers),
    jobHandlers: Object.assign({}, ...parts.map((p) => p.jobHandlers)),
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The job handlers of live mode, by kind: what the server's job runner claims and runs. */
    jobHandlers: Readonly<Record<string, JobHandler>>
  }
}
