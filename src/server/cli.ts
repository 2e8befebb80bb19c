import { realpathSync } from 'node:fs'
import { pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { createApiKey, createAppId, createPartner, partnerExists } from './accounts/accounts.js'
import { readConfigFile, resolveConfig } from './config.js'
import { isExternalAppId } from './ids.js'
import { startServer } from './server.js'
import { openDatabase } from './store/db.js'
import type { KeyRole, Mode } from './store/schema.js'

const usage = `Usage:
  caipay serve [--port 8787] [--host 127.0.0.1] [--data-dir .caipay] [--database-url URL] [--config FILE]
               [--api-only | --worker-only]
  caipay keys create --mode test|live [--role partner|wallet] [--partner ID] [--json] [database options]
  caipay apps create --mode test|live [--partner ID] [--external-id <32 hex>] [--json] [database options]

Database options: --data-dir DIR (embedded PostgreSQL, default .caipay) or --database-url URL
(default: the DATABASE_URL environment variable).
--api-only serves HTTP without running jobs; --worker-only runs jobs (live payments) and serves no HTTP.
Any number of each may share one database.`

class UsageError extends Error {}

/** Runs a command; resolves to an exit code (serve resolves once listening and keeps running). */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    const [command, sub] = argv
    if (command === 'serve') return await serve(argv.slice(1))
    if (command === 'keys' && sub === 'create') return await keysCreate(argv.slice(2))
    if (command === 'apps' && sub === 'create') return await appsCreate(argv.slice(2))
    if (command === undefined || command === '--help' || command === '-h' || command === 'help') {
      process.stdout.write(`${usage}\n`)
      return command === undefined ? 1 : 0
    }
    throw new UsageError(`Unknown command: ${argv.join(' ')}`)
  } catch (error) {
    if (error instanceof UsageError || (error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`${(error as Error).message}\n\n${usage}\n`)
      return 2
    }
    process.stderr.write(`caipay: ${describe(error)}\n`)
    return 1
  }
}

const databaseOptions = {
  'data-dir': { type: 'string' },
  'database-url': { type: 'string' },
} as const

async function serve(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      ...databaseOptions,
      port: { type: 'string', default: '8787' },
      host: { type: 'string', default: '127.0.0.1' },
      config: { type: 'string' },
      'api-only': { type: 'boolean', default: false },
      'worker-only': { type: 'boolean', default: false },
    },
    strict: true,
  })
  if (values['api-only'] && values['worker-only'])
    throw new UsageError('--api-only and --worker-only exclude each other')
  const role = values['api-only'] ? 'api' : values['worker-only'] ? 'worker' : 'all'
  const port = Number(values.port)
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new UsageError(`Invalid --port ${values.port}`)
  const file = values.config ? await readConfigFile(values.config) : {}
  const config = resolveConfig(file)
  const { pino } = await import('pino')
  // Asynchronous: a request does not wait for a write(2) of its log line; pino flushes what is
  // buffered when the process exits.
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' }, pino.destination({ dest: 1, sync: false }))

  // Signals are handled from the start: one during startup stops the server once it is up.
  let stopRequested = false
  let server: Awaited<ReturnType<typeof startServer>> | undefined
  let signals = 0
  const shutdown = (signal: NodeJS.Signals) => {
    signals += 1
    if (signals > 1) process.exit(1)
    logger.info({ signal }, 'shutting down')
    if (!server) {
      stopRequested = true
      return
    }
    server.stop().then(
      () => process.exit(0),
      (error) => {
        logger.error({ err: error }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.on('SIGTERM', shutdown)
  process.on('SIGINT', shutdown)

  server = await startServer({
    port,
    host: values.host,
    databaseUrl: values['database-url'] || process.env.DATABASE_URL,
    dataDir: values['data-dir'],
    config,
    publicBaseUrlFromListen: file.publicBaseUrl === undefined,
    bootstrapPartner: role !== 'worker',
    logger,
    handleSignals: true,
    role,
  })
  if (stopRequested) {
    await server.stop()
    process.exit(0)
  }
  const lines = [
    role === 'worker'
      ? 'caipay worker running jobs (no HTTP)'
      : `caipay listening on ${server.url} (API docs: ${server.url}/docs)${role === 'api' ? '; jobs run elsewhere' : ''}`,
  ]
  if (server.bootstrap) {
    lines.push(
      `Created partner ${server.bootstrap.partnerId}.`,
      `Test API key (shown once, keep it secret): ${server.bootstrap.apiKey}`,
    )
  }
  process.stdout.write(`${lines.join('\n')}\n`)
  return 0
}

function modeOf(value: string | undefined): Mode {
  if (value !== 'test' && value !== 'live') throw new UsageError('--mode must be test or live')
  return value
}

async function withDatabase<T>(
  values: { 'data-dir'?: string | undefined; 'database-url'?: string | undefined },
  fn: (db: Awaited<ReturnType<typeof openDatabase>>['db']) => Promise<T>,
): Promise<T> {
  const database = await openDatabase({
    databaseUrl: values['database-url'] || process.env.DATABASE_URL,
    dataDir: values['data-dir'],
    poolSize: 2,
  })
  try {
    return await fn(database.db)
  } finally {
    await database.close()
  }
}

async function partnerFor(
  db: Parameters<typeof partnerExists>[0],
  partner: string | undefined,
): Promise<string> {
  if (partner === undefined) return createPartner(db)
  if (!(await partnerExists(db, partner))) throw new Error(`Partner ${partner} not found.`)
  return partner
}

async function keysCreate(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      ...databaseOptions,
      mode: { type: 'string' },
      role: { type: 'string', default: 'partner' },
      partner: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  })
  const mode = modeOf(values.mode)
  if (values.role !== 'partner' && values.role !== 'wallet')
    throw new UsageError('--role must be partner or wallet')
  const role: KeyRole = values.role
  const created = await withDatabase(values, async (db) => {
    const partnerId = await partnerFor(db, values.partner)
    return createApiKey(db, { partnerId, mode, role })
  })
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ partnerId: created.partnerId, apiKey: created.apiKey })}\n`)
  } else {
    process.stdout.write(
      `Partner: ${created.partnerId}\n${mode === 'test' ? 'Test' : 'Live'} ${role} API key (shown once, keep it secret): ${created.apiKey}\n`,
    )
  }
  return 0
}

async function appsCreate(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      ...databaseOptions,
      mode: { type: 'string' },
      partner: { type: 'string' },
      'external-id': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    strict: true,
  })
  const mode = modeOf(values.mode)
  const externalId = values['external-id']
  if (externalId !== undefined && !isExternalAppId(externalId)) {
    throw new UsageError('--external-id must be a WalletConnect project id: 32 lowercase hex characters')
  }
  const created = await withDatabase(values, async (db) => {
    const partnerId = await partnerFor(db, values.partner)
    return createAppId(db, { partnerId, mode, ...(externalId !== undefined ? { externalId } : {}) })
  })
  if (values.json) {
    process.stdout.write(`${JSON.stringify(created)}\n`)
  } else {
    process.stdout.write(`Partner: ${created.partnerId}\nApp id (${mode}; public): ${created.appId}\n`)
  }
  return 0
}

function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : ''
  return `${error.message}${cause}`
}

function isEntryPoint(): boolean {
  const entry = process.argv[1]
  if (!entry) return false
  try {
    return import.meta.url === pathToFileURL(realpathSync(entry)).href
  } catch {
    return false
  }
}

// `tsx src/server/cli.ts serve` runs it directly; bin/caipay.js imports it and calls main.
if (isEntryPoint()) {
  main(process.argv.slice(2)).then((code) => {
    if (code !== 0) process.exit(code)
  })
}
