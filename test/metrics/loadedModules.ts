import { Session } from 'node:inspector/promises'
import { startServer } from '../../src/server/server.js'

/**
 * Run by tracingOff.test.ts in a Node process of its own (`node --import tsx`): starts caipay on the
 * database in CAIPAY_TEST_DATABASE_URL with the environment it was given, answers a few requests, and
 * prints every script V8 has parsed (the debugger lists them all when enabled) as JSON, and whether
 * tracing is on.
 */
const server = await startServer({
  databaseUrl: process.env.CAIPAY_TEST_DATABASE_URL,
  port: 0,
  jobIntervalMs: 50,
})
for (const path of ['/healthz', '/readyz', '/metrics', '/v1/payments'])
  await fetch(new URL(path, server.url)).then((response) => response.text())
const { tracingOn } = await import('../../src/server/metrics/tracing.js')
const session = new Session()
session.connect()
const scripts: string[] = []
session.on('Debugger.scriptParsed', (message) => scripts.push(message.params.url))
await session.post('Debugger.enable')
await session.post('Debugger.disable')
session.disconnect()
await server.stop()
process.stdout.write(JSON.stringify({ tracing: tracingOn(), scripts }))
