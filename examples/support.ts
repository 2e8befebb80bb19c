import fs from 'node:fs/promises'
import { createApiKey, createPartner } from '../src/server/accounts/accounts.js'
import type { RunningServer } from '../src/server/server.js'
import { startLiveServer } from './liveExample.js'

export interface ExampleServer {
  server: RunningServer
  /** A partner-role test key. */
  apiKey: string
  /** A wallet-role test key of the same partner (gateway only). */
  walletKey: string
  close(): Promise<void>
}

/** A throwaway test-mode server (no chains configured) with a partner and its test keys. */
export async function startExampleServer(): Promise<ExampleServer> {
  const { server, dataDir } = await startLiveServer({})
  const close = async () => {
    await server.stop()
    await fs.rm(dataDir, { recursive: true, force: true })
  }
  try {
    const partnerId = await createPartner(server.db)
    const { apiKey } = await createApiKey(server.db, { partnerId, mode: 'test' })
    const { apiKey: walletKey } = await createApiKey(server.db, { partnerId, mode: 'test', role: 'wallet' })
    return { server, apiKey, walletKey, close }
  } catch (error) {
    await close()
    throw error
  }
}
