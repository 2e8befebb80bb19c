/**
 * The server under soak, as its own process so its memory is only its own: `startServer` on 127.0.0.1
 * port 0 with embedded PostgreSQL in the data directory given as argv[2]. Run with `--expose-gc` and an
 * IPC channel (test/reliability/soak.test.ts). Messages in: `memory` (GC, then report), `stop`. Out:
 * `ready`, `memory`, `stopped`.
 *
 * After `stopped` it lets go of the IPC channel and must then exit by itself: anything `stop()` left
 * open (a pool, a timer, a socket, PostgreSQL's child) keeps the event loop alive and the test sees it.
 */
import { createApiKey } from '../../src/server/accounts/accounts.js'
import { resolveConfig } from '../../src/server/config.js'
import { startServer } from '../../src/server/server.js'

const dataDir = process.argv[2]
if (!dataDir || !process.send)
  throw new Error('usage: node --expose-gc --import tsx soakServer.ts <dataDir> (with IPC)')
const send = (message: object) => process.send!(message)
const gc = (globalThis as { gc?: () => void }).gc
if (!gc) throw new Error('run with --expose-gc')

const server = await startServer({
  port: 0,
  dataDir,
  // The soak measures the server, not the limiter: a limiter answering 429 would be noise here.
  config: resolveConfig({ rateLimit: false, sandboxRefundDelayMs: 0 }),
  publicBaseUrlFromListen: true,
  bootstrapPartner: true,
})
const partnerId = server.bootstrap!.partnerId
const { apiKey: walletKey } = await createApiKey(server.db, { partnerId, mode: 'test', role: 'wallet' })

process.on('message', (message: { type: string }) => {
  if (message.type === 'memory') {
    // Several passes: the first ones only move survivors along the generations.
    for (let i = 0; i < 4; i++) gc()
    send({ type: 'memory', ...process.memoryUsage() })
  } else if (message.type === 'stop') {
    const started = Date.now()
    server.stop().then(
      () => {
        send({ type: 'stopped', ms: Date.now() - started, resources: process.getActiveResourcesInfo() })
        process.disconnect()
      },
      (error: unknown) => {
        send({ type: 'stopped', error: String(error) })
        process.disconnect()
      },
    )
  }
})

send({ type: 'ready', url: server.url, apiKey: server.bootstrap!.apiKey, walletKey, pid: process.pid })
