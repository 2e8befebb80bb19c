import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createApiKey } from '../src/server/accounts/accounts.js'
import { resolveConfig } from '../src/server/config.js'
import { type RunningServer, startServer } from '../src/server/server.js'

export interface ExampleServer {
  server: RunningServer
  /** A partner-role test key. */
  apiKey: string
  /** A wallet-role test key of the same partner (gateway only). */
  walletKey: string
  close(): Promise<void>
}

/** A throwaway server: embedded PostgreSQL in a temp directory, a free port on 127.0.0.1. */
export async function startExampleServer(config: Record<string, unknown> = {}): Promise<ExampleServer> {
  const dataDir = await mkdtemp(join(tmpdir(), 'caipay-example-'))
  const server = await startServer({
    port: 0,
    dataDir,
    config: resolveConfig(config),
    publicBaseUrlFromListen: config.publicBaseUrl === undefined,
    bootstrapPartner: true,
    jobIntervalMs: 100,
  })
  const partnerId = server.bootstrap!.partnerId
  const { apiKey: walletKey } = await createApiKey(server.db, { partnerId, mode: 'test', role: 'wallet' })
  return {
    server,
    apiKey: server.bootstrap!.apiKey,
    walletKey,
    async close() {
      await server.stop()
      await rm(dataDir, { recursive: true, force: true })
    },
  }
}
