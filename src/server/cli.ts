import { existsSync, readFileSync, realpathSync } from 'node:fs'
import path from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import type { KeyRole, Mode } from './store/schema.js'

// Server modules are imported inside the commands, not here: `caipay --help` and `--version` must
// work where the server's dependencies (fastify, kysely, pg, ...) are not installed.

const databaseHelp = `Database options:
  --data-dir DIR       embedded PostgreSQL in DIR (default .caipay)
  --database-url URL   an existing PostgreSQL 14+ (default: the DATABASE_URL environment variable)`

const commands = {
  serve: `Usage: caipay serve [options]

Starts the payments server (merchant API, wallet gateway, hosted pages) and its job runner.

Options:
  --port N             default 8787; 0 picks a free port
  --host ADDRESS       default 127.0.0.1; with 0.0.0.0 set publicBaseUrl in the config file
  --config FILE        JSON configuration (chains, assets, publicBaseUrl, rate limits)
  --api-only           serve HTTP without running jobs (run workers elsewhere)
  --worker-only        run jobs (live payments, webhooks) and serve no HTTP
                       any number of each may share one database
  --metrics-port N     serve /metrics, /healthz and /readyz on this port of their own (a worker's
                       only port; an API instance then keeps /metrics off its public port)
  --metrics-host ADDRESS  default 127.0.0.1
${databaseHelp}`,
  'keys create': `Usage: caipay keys create --mode test|live [options]

Creates an API key (shown once). Without --partner it uses the only partner when exactly one
exists, creates one when none does, and asks for --partner when there are several.

Options:
  --mode test|live     required
  --role partner|wallet  default partner (merchant API); wallet keys call the gateway
  --partner ID         the partner that owns the key
  --json               print {"partnerId", "apiKey"}
${databaseHelp}`,
  'keys list': `Usage: caipay keys list [options]

Lists API keys: id, partner, mode, role, the key's first characters (the key itself is never stored,
so never shown again) and whether it is revoked.

Options:
  --partner ID         only this partner's keys
  --mode test|live     only keys of this mode
  --json               print a JSON array
${databaseHelp}`,
  'keys revoke': `Usage: caipay keys revoke KEY_ID [options]

Revokes an API key by its id (key_..., from "keys list"). Every server refuses it within a round trip.
Revoking a revoked key changes nothing.

Options:
  --json               print the revoked key as JSON
${databaseHelp}`,
  'partners create': `Usage: caipay partners create [options]

Creates a partner: an account of its own (merchants, payments, refunds, webhooks, keys), isolated
from every other partner on this server. Then create its keys with "keys create --partner ID".

Options:
  --name NAME          a label for operators
  --json               print {"partnerId", "name"}
${databaseHelp}`,
  'partners list': `Usage: caipay partners list [options]

Lists the partners on this server.

Options:
  --json               print a JSON array
${databaseHelp}`,
  'apps revoke': `Usage: caipay apps revoke APP_ID [options]

Revokes an app id (from "apps list"): every server refuses it (401 invalid_app_id) as soon as the
change commits. An app id ships inside wallets, so revoke one that is abused and give its wallets a
new one. Revoking a revoked app id changes nothing.

Options:
  --json               print the revoked app id as JSON
${databaseHelp}`,
  'secrets rotate': `Usage: caipay secrets rotate --config FILE [options]

Re-seals every secret at rest (webhook signing secrets, stored idempotent answers) under the config's
secretsKey: values in plain text or sealed under one of previousSecretsKeys. To rotate: set secretsKey
to the new key and list the old one in previousSecretsKeys, restart the servers, run this, then drop
the old key. Running it again changes nothing.

Options:
  --config FILE        the servers' config file (secretsKey, previousSecretsKeys; env: values resolved)
  --json               print {"webhookSecrets", "storedAnswers"}: how many values were re-sealed
${databaseHelp}`,
  'apps list': `Usage: caipay apps list [options]

Lists app ids (public ids wallets send with a Client-Id) and when each was revoked, if it was.

Options:
  --partner ID         only this partner's app ids
  --mode test|live     only app ids of this mode
  --json               print a JSON array
${databaseHelp}`,
  'apps create': `Usage: caipay apps create --mode test|live [options]

Creates a public app id for wallets (used with a Client-Id on the gateway). Without --partner it
picks the partner like "keys create".

Options:
  --mode test|live     required
  --partner ID         the partner that owns the app id
  --external-id HEX    a WalletConnect project id (32 lowercase hex characters) to accept as this app id
  --json               print {"partnerId", "appId", ...}
${databaseHelp}`,
  balances: `Usage: caipay balances [options]

Lists the ledger's balances: per holding address and asset, each merchant's collected, settling and
refunds owed, each partner's float and fees, and the operator's unallocated top-ups (docs/live-mode.md).
Open reconciliation differences are listed after them.

Options:
  --partner ID         only this partner's accounts
  --mode test|live     only this mode
  --json               print {"balances": [...], "differences": [...]}
${databaseHelp}`,
  'ledger ack': `Usage: caipay ledger ack ID [options]

Acknowledges reconciliation difference ID (see "caipay balances"): it counts as explained from now on
and settlements and refunds from its address are sent again.

Options:
  --note TEXT          why (kept with the difference)
  --json               print the difference
${databaseHelp}`,
  'deposits list': `Usage: caipay deposits list [options]

Lists deposits: pushed money no open payment explains (underpaid at expiry, an overpayment's excess
refunded by config, late, paid twice), newest first (docs/push-payments.md).

Options:
  --partner ID         only this partner's
  --mode test|live     only this mode
  --json               print one JSON array
${databaseHelp}`,
  'deposits refund': `Usage: caipay deposits refund ID [options]

Sends held deposit ID back to the account that sent it (a job of the running workers sends it).

Options:
  --json               print the deposit
${databaseHelp}`,
  'deposits assign': `Usage: caipay deposits assign ID [options]

Keeps held deposit ID as its partner's float (what pays that partner's refunds after settlement).

Options:
  --json               print the deposit
${databaseHelp}`,
  'deposits stray': `Usage: caipay deposits stray PAYMENT_ID --config FILE [options]

Shows what live payment PAYMENT_ID's EVM deposit address holds on every configured chain where it has
that address: native ETH, each configured token and each --token, read from the chain at one block,
with the senders of each token (its Transfer logs since the payment was made; native ETH leaves no log).
HANDLED BY says what moves each: "scan", the push scan's sweep (the payment offered it there); "deposit",
"deposits recover" books it as the payment's; "move", "deposits recover --to" moves it out. Lists the
payment's recoveries after them (docs/push-payments.md, "Stray money").

Options:
  --config FILE        the servers' config file (its chains and executor keys)
  --token ADDRESS      also read this ERC-20 (repeat for more)
  --json               print {"holdings": [...], "recoveries": [...]}
${databaseHelp}`,
  'deposits recover': `Usage: caipay deposits recover PAYMENT_ID --config FILE --chain CAIP2 --asset native|ADDRESS [--to ADDRESS] [options]

What ASSET at live payment PAYMENT_ID's deposit address on CAIP2 becomes (see "caipay deposits stray"):
- native ETH, or a token not configured on CAIP2: its whole balance is moved to --to (the sender, or an
  operator's address) by a job of the running workers (the executor pays the gas), once; recorded and
  listed by "deposits stray", not booked in the ledger (never at an address the ledger carries).
- a token configured on CAIP2 that the payment did not offer there (no --to): its transfers are recorded
  for the payment's push sweep, which brings them to the collection address and books them like any push
  transfer (toward an open payment; else a late or duplicate deposit sent back to its sender).
A token the push scan already watches for the payment is refused: its sweep moves it.

Options:
  --config FILE        the servers' config file (its chains and executor keys)
  --chain CAIP2        the chain, e.g. eip155:8453
  --asset native|ADDRESS  native ETH, or the token's address
  --to ADDRESS         where native ETH or an unconfigured token goes
  --json               print {"kind": "recovery", "recovery": {...}} or {"kind": "deposit", ...}
${databaseHelp}`,
  'ledger allocate': `Usage: caipay ledger allocate --partner ID --holder CAIP10 --asset CAIP19 --amount UNITS [options]

Gives AMOUNT (token minor units) of the operator's unallocated top-ups at HOLDER to the partner's float.

Options:
  --partner ID         the partner
  --holder CAIP10      the collection address (as "caipay balances" shows it)
  --asset CAIP19       the token
  --amount UNITS       token minor units
  --mode test|live     default live
${databaseHelp}`,
  status: `Usage: caipay status [options]

What an operator checks first: each configured chain's nodes and their heads, the executor's native
balance and collected tokens, queued and running jobs by kind, transactions in flight, and the
webhook endpoints whose deliveries are failing. Reads the database and the chains; changes nothing.

Options:
  --config FILE        the server's JSON configuration (its chains); without it, no chain is read
  --json               print one JSON object
${databaseHelp}`,
} as const

const usage = `Usage: caipay <command> [options]

Commands:
  serve            start the payments server
  status           chains, executor balances, queued jobs, failing webhooks
  partners create  create a partner (an isolated account)
  partners list    list partners
  keys create      create an API key
  keys list        list API keys (prefixes only)
  keys revoke      revoke an API key
  apps create      create an app id for wallets
  apps list        list app ids (revoked ones with their revocation time)
  apps revoke      revoke an app id
  secrets rotate   re-seal secrets at rest under the current secretsKey
  balances         the ledger's balances and reconciliation differences
  ledger ack       acknowledge a reconciliation difference
  ledger allocate  give unallocated top-ups to a partner's float
  deposits list    pushed money no open payment explains
  deposits refund  send a deposit back to its sender
  deposits assign  keep a deposit as its partner's float
  deposits stray   what a payment's EVM deposit address holds beyond what caipay applied
  deposits recover move stray money out of an EVM deposit address

caipay <command> --help shows a command's options; caipay --version prints the version.`

class UsageError extends Error {}

/** Runs a command; resolves to an exit code (serve resolves once listening and keeps running). */
export async function main(argv: readonly string[]): Promise<number> {
  try {
    const [first, second] = argv
    if (first === '--version' || first === '-v' || first === 'version') {
      process.stdout.write(`${version()}\n`)
      return 0
    }
    if (first === undefined || first === '--help' || first === '-h' || first === 'help') {
      process.stdout.write(`${usage}\n`)
      return first === undefined ? 1 : 0
    }
    const single = first === 'serve' || first === 'balances' || first === 'status'
    const name = single ? first : `${first} ${second}`
    if (!(name in commands)) throw new UsageError(`Unknown command: ${argv.join(' ')}`)
    const command = name as keyof typeof commands
    const args = argv.slice(single ? 1 : 2)
    if (args.includes('--help') || args.includes('-h')) {
      process.stdout.write(`${commands[command]}\n`)
      return 0
    }
    try {
      return await runners[command](args)
    } catch (error) {
      if ((error as { code?: string }).code?.startsWith('ERR_PARSE_ARGS'))
        throw new UsageError((error as Error).message, { cause: command })
      throw error
    }
  } catch (error) {
    if (error instanceof UsageError) {
      const help = typeof error.cause === 'string' ? commands[error.cause as keyof typeof commands] : usage
      process.stderr.write(`caipay: ${error.message}\n\n${help}\n`)
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
      'metrics-port': { type: 'string' },
      'metrics-host': { type: 'string', default: '127.0.0.1' },
    },
    strict: true,
  })
  if (values['api-only'] && values['worker-only'])
    throw new UsageError('--api-only and --worker-only exclude each other', { cause: 'serve' })
  const role = values['api-only'] ? 'api' : values['worker-only'] ? 'worker' : 'all'
  const port = Number(values.port)
  if (!/^\d+$/.test(values.port) || port > 65535)
    throw new UsageError(`Invalid --port ${values.port}`, { cause: 'serve' })
  const metricsPort = values['metrics-port']
  if (metricsPort !== undefined && (!/^\d+$/.test(metricsPort) || Number(metricsPort) > 65535))
    throw new UsageError(`Invalid --metrics-port ${metricsPort}`, { cause: 'serve' })
  const { readConfigFile, resolveConfig } = await import('./config.js')
  const file = values.config ? await readConfigFile(values.config) : {}
  const config = resolveConfig(file)
  const { startServer, wildcardHosts } = await import('./server.js')
  const { pino } = await import('pino')
  // Asynchronous and batched: a request does not wait for a write(2) of its log line, and under load
  // lines go out 4 KiB at a time (each write is a thread-pool hand-off: one per line cost more than the
  // line itself). Whatever waits is written at least once a second, and by pino on exit; a SIGKILL or
  // a native crash loses at most that last second.
  const destination = pino.destination({ dest: 1, sync: false, minLength: 4096, periodicFlush: 1000 })
  const logger = pino({ level: process.env.LOG_LEVEL ?? 'info' }, destination)

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
    ...(metricsPort !== undefined
      ? { metricsPort: Number(metricsPort), metricsHost: values['metrics-host'] }
      : {}),
  })
  if (stopRequested) {
    await server.stop()
    process.exit(0)
  }
  if (role !== 'worker' && wildcardHosts.has(values.host) && file.publicBaseUrl === undefined) {
    process.stderr.write(
      `caipay: warning: bound to ${values.host} without publicBaseUrl; payment links use ${server.config.publicBaseUrl}. ` +
        'Set "publicBaseUrl" in the --config file to the URL customers reach (e.g. https://pay.example.com).\n',
    )
  }
  const base = server.config.publicBaseUrl
  const lines = [
    role === 'worker'
      ? 'caipay worker running jobs (no HTTP)'
      : `caipay listening on ${server.url} (API docs: ${base}/docs)${role === 'api' ? '; jobs run elsewhere' : ''}`,
  ]
  if (server.metricsUrl) lines.push(`Metrics and probes on ${server.metricsUrl}/metrics, /healthz, /readyz`)
  if (server.bootstrap) {
    lines.push(
      `Created partner ${server.bootstrap.partnerId}.`,
      `Test API key (shown once, keep it secret): ${server.bootstrap.apiKey}`,
    )
  }
  process.stdout.write(`${lines.join('\n')}\n`)
  return 0
}

function modeOf(value: string | undefined, command: keyof typeof commands): Mode {
  if (value !== 'test' && value !== 'live')
    throw new UsageError('--mode must be test or live', { cause: command })
  return value
}

type Db = Awaited<ReturnType<typeof import('./store/db.js')['openDatabase']>>['db']

async function withDatabase<T>(
  values: { 'data-dir'?: string | undefined; 'database-url'?: string | undefined },
  fn: (db: Db) => Promise<T>,
): Promise<T> {
  const { openDatabase } = await import('./store/db.js')
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

/** The partner a new key or app id belongs to; says on stderr which one was picked or created. */
async function partnerFor(db: Db, partner: string | undefined): Promise<string> {
  const { createPartner, partnerExists } = await import('./accounts/accounts.js')
  if (partner !== undefined) {
    if (!(await partnerExists(db, partner))) throw new Error(`Partner ${partner} not found.`)
    return partner
  }
  const existing = await db.selectFrom('partners').select('id').orderBy('created_at').limit(6).execute()
  if (existing.length === 1) {
    const only = existing[0]!.id
    process.stderr.write(`Using the only partner, ${only} (pass --partner to choose).\n`)
    return only
  }
  if (existing.length > 1) {
    const ids = existing.slice(0, 5).map((row) => row.id)
    throw new Error(
      `There are several partners (${ids.join(', ')}${existing.length > 5 ? ', ...' : ''}); pass --partner ID.`,
    )
  }
  const created = await createPartner(db)
  process.stderr.write(`Created partner ${created}.\n`)
  return created
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
  const mode = modeOf(values.mode, 'keys create')
  if (values.role !== 'partner' && values.role !== 'wallet')
    throw new UsageError('--role must be partner or wallet', { cause: 'keys create' })
  const role: KeyRole = values.role
  const { createApiKey } = await import('./accounts/accounts.js')
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
  const mode = modeOf(values.mode, 'apps create')
  const externalId = values['external-id']
  const { isExternalAppId } = await import('./ids.js')
  if (externalId !== undefined && !isExternalAppId(externalId)) {
    throw new UsageError('--external-id must be a WalletConnect project id: 32 lowercase hex characters', {
      cause: 'apps create',
    })
  }
  const { createAppId } = await import('./accounts/accounts.js')
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

const listOptions = {
  ...databaseOptions,
  partner: { type: 'string' },
  mode: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const

/** Prints rows as JSON, or as aligned columns under a header (empty cells as "-"). */
function printRows(json: boolean, rows: readonly object[], columns: readonly [string, string][]): void {
  if (json) {
    process.stdout.write(`${JSON.stringify(rows)}\n`)
    return
  }
  if (rows.length === 0) {
    process.stdout.write('(none)\n')
    return
  }
  const cells = rows.map((row) =>
    columns.map(([key]) => {
      const value = (row as Record<string, unknown>)[key]
      return value === null || value === undefined ? '-' : String(value)
    }),
  )
  const widths = columns.map(([, title], i) => Math.max(title.length, ...cells.map((c) => c[i]!.length)))
  const line = (values: readonly string[]) =>
    values
      .map((v, i) => v.padEnd(widths[i]!))
      .join('  ')
      .trimEnd()
  process.stdout.write(`${[line(columns.map(([, title]) => title)), ...cells.map(line)].join('\n')}\n`)
}

function listFilter(
  values: { partner?: string | undefined; mode?: string | undefined },
  command: keyof typeof commands,
): { partnerId?: string; mode?: Mode } {
  return {
    ...(values.partner !== undefined ? { partnerId: values.partner } : {}),
    ...(values.mode !== undefined ? { mode: modeOf(values.mode, command) } : {}),
  }
}

async function partnersCreate(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, name: { type: 'string' }, json: { type: 'boolean', default: false } },
    strict: true,
  })
  const name = values.name
  if (name !== undefined && (name.trim() === '' || name.length > 200))
    throw new UsageError('--name must be 1 to 200 characters', { cause: 'partners create' })
  const { createPartner } = await import('./accounts/accounts.js')
  const partnerId = await withDatabase(values, (db) => createPartner(db, name !== undefined ? { name } : {}))
  if (values.json) process.stdout.write(`${JSON.stringify({ partnerId, name: name ?? null })}\n`)
  else
    process.stdout.write(
      `Partner: ${partnerId}\nCreate its keys with: caipay keys create --partner ${partnerId} --mode test\n`,
    )
  return 0
}

async function partnersList(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, json: { type: 'boolean', default: false } },
    strict: true,
  })
  const { listPartners } = await import('./accounts/accounts.js')
  const rows = await withDatabase(values, (db) => listPartners(db))
  printRows(values.json, rows, [
    ['id', 'ID'],
    ['name', 'NAME'],
    ['createdAt', 'CREATED'],
  ])
  return 0
}

async function keysList(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({ args: [...args], options: listOptions, strict: true })
  const filter = listFilter(values, 'keys list')
  const { listApiKeys } = await import('./accounts/accounts.js')
  const rows = await withDatabase(values, (db) => listApiKeys(db, filter))
  printRows(values.json, rows, [
    ['id', 'ID'],
    ['partnerId', 'PARTNER'],
    ['mode', 'MODE'],
    ['role', 'ROLE'],
    ['prefix', 'PREFIX'],
    ['createdAt', 'CREATED'],
    ['revokedAt', 'REVOKED'],
  ])
  return 0
}

async function keysRevoke(args: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, json: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  })
  const [keyId, ...rest] = positionals
  if (keyId === undefined || rest.length > 0)
    throw new UsageError('Give exactly one key id (key_..., see "caipay keys list")', {
      cause: 'keys revoke',
    })
  const { revokeApiKeyById } = await import('./accounts/accounts.js')
  const revoked = await withDatabase(values, (db) => revokeApiKeyById(db, keyId))
  if (!revoked) throw new Error(`API key ${keyId} not found.`)
  if (values.json) process.stdout.write(`${JSON.stringify(revoked)}\n`)
  else process.stdout.write(`Revoked ${revoked.id} (${revoked.prefix}..., partner ${revoked.partnerId}).\n`)
  return 0
}

async function appsRevoke(args: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, json: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  })
  const [appId, ...rest] = positionals
  if (appId === undefined || rest.length > 0)
    throw new UsageError('Give exactly one app id (see "caipay apps list")', { cause: 'apps revoke' })
  const { revokeAppById } = await import('./accounts/accounts.js')
  const revoked = await withDatabase(values, (db) => revokeAppById(db, appId))
  if (!revoked) throw new Error(`App id ${appId} not found.`)
  if (values.json) process.stdout.write(`${JSON.stringify(revoked)}\n`)
  else process.stdout.write(`Revoked ${revoked.appId} (partner ${revoked.partnerId}).\n`)
  return 0
}

async function secretsRotate(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, config: { type: 'string' }, json: { type: 'boolean', default: false } },
    strict: true,
  })
  if (!values.config) throw new UsageError('--config is required', { cause: 'secrets rotate' })
  const { readConfigFile, resolveConfig } = await import('./config.js')
  const config = resolveConfig(await readConfigFile(values.config))
  const { configuredSecretBox } = await import('./secrets.js')
  const box = configuredSecretBox(config)
  if (!box) throw new Error('The config sets no secretsKey: nothing to seal with.')
  const { resealSecrets } = await import('./secretsRotate.js')
  const counts = await withDatabase(values, (db) => resealSecrets(db, box))
  if (values.json) process.stdout.write(`${JSON.stringify(counts)}\n`)
  else
    process.stdout.write(
      `Re-sealed ${counts.webhookSecrets} webhook secrets and ${counts.storedAnswers} stored answers under key ${box.keyId}.\n`,
    )
  return 0
}

async function appsList(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({ args: [...args], options: listOptions, strict: true })
  const filter = listFilter(values, 'apps list')
  const { listApps } = await import('./accounts/accounts.js')
  const rows = await withDatabase(values, (db) => listApps(db, filter))
  printRows(values.json, rows, [
    ['appId', 'APP ID'],
    ['partnerId', 'PARTNER'],
    ['mode', 'MODE'],
    ['createdAt', 'CREATED'],
    ['revokedAt', 'REVOKED'],
  ])
  return 0
}

async function balances(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({ args: [...args], options: listOptions, strict: true })
  const filter = listFilter(values, 'balances')
  const { listBalances } = await import('./ledger/balances.js')
  const { listDifferences } = await import('./ledger/reconcile.js')
  const [rows, differences] = await withDatabase(values, (db) =>
    Promise.all([listBalances(db, filter), listDifferences(db, { open: true, ...filter })]),
  )
  if (values.json) {
    process.stdout.write(`${JSON.stringify({ balances: rows, differences })}\n`)
    return 0
  }
  printRows(false, rows, [
    ['mode', 'MODE'],
    ['holder', 'HOLDER'],
    ['asset', 'ASSET'],
    ['kind', 'ACCOUNT'],
    ['owner', 'OWNER'],
    ['balance', 'BALANCE'],
  ])
  for (const d of differences)
    process.stdout.write(
      `\nDIFFERENCE ${d.id}: at block ${d.block} ${d.holder} holds ${d.chainBalance} of ${d.asset}; the ledger ` +
        `${d.ledgerBalance} (in flight: ${d.inFlightOut} out, ${d.inFlightIn} in), difference ${d.difference}. ` +
        `Settlements and refunds from this address are stopped until \`caipay ledger ack ${d.id}\`.\n`,
    )
  return 0
}

async function ledgerAck(args: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, note: { type: 'string' }, json: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  })
  const [id, ...rest] = positionals
  if (id === undefined || rest.length > 0 || !/^\d+$/.test(id))
    throw new UsageError('Give exactly one difference id (see "caipay balances")', { cause: 'ledger ack' })
  const { acknowledgeDifference } = await import('./ledger/reconcile.js')
  const acked = await withDatabase(values, (db) =>
    acknowledgeDifference(db, { id, note: values.note ?? null, now: new Date() }),
  )
  if (!acked) throw new Error(`No open reconciliation difference ${id}.`)
  if (values.json) process.stdout.write(`${JSON.stringify(acked)}\n`)
  else
    process.stdout.write(
      `Acknowledged difference ${acked.id} (${acked.difference} of ${acked.asset} at ${acked.holder}); sends resume.\n`,
    )
  return 0
}

async function ledgerAllocate(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      ...databaseOptions,
      partner: { type: 'string' },
      holder: { type: 'string' },
      asset: { type: 'string' },
      amount: { type: 'string' },
      mode: { type: 'string' },
    },
    strict: true,
  })
  const { partner, holder, asset, amount } = values
  if (!partner || !holder || !asset || !amount || !/^[1-9]\d*$/.test(amount))
    throw new UsageError('--partner, --holder, --asset and --amount (a positive integer) are required', {
      cause: 'ledger allocate',
    })
  const { allocateFloat } = await import('./ledger/topUps.js')
  const { canonicalCaip } = await import('../caip/caip.js')
  await withDatabase(values, (db) =>
    allocateFloat(db, {
      mode: values.mode !== undefined ? modeOf(values.mode, 'ledger allocate') : 'live',
      holder: canonicalCaip(holder),
      asset,
      partnerId: partner,
      amount: BigInt(amount),
      now: new Date(),
    }),
  )
  process.stdout.write(`Allocated ${amount} of ${asset} at ${holder} to ${partner}'s float.\n`)
  return 0
}

async function depositsList(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({ args: [...args], options: listOptions, strict: true })
  const filter = listFilter(values, 'deposits list')
  const { listDeposits } = await import('./payments/deposits.js')
  const rows = await withDatabase(values, (db) => listDeposits(db, { ...filter, limit: 1000 }))
  printRows(
    values.json,
    rows.map((row) => ({ ...row, amount: String(row.amount), created_at: row.created_at.toISOString() })),
    [
      ['id', 'DEPOSIT'],
      ['partner_id', 'PARTNER'],
      ['payment_id', 'PAYMENT'],
      ['asset', 'ASSET'],
      ['amount', 'AMOUNT'],
      ['reason', 'REASON'],
      ['status', 'STATUS'],
      ['sender', 'SENDER'],
      ['created_at', 'CREATED'],
    ],
  )
  return 0
}

async function depositResolve(args: readonly string[], how: 'refund' | 'assign'): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, json: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  })
  const [id, ...rest] = positionals
  if (id === undefined || rest.length > 0)
    throw new UsageError('Give exactly one deposit id (see "caipay deposits list")', {
      cause: `deposits ${how}`,
    })
  const { assignDeposit, refundHeldDeposit } = await import('./payments/deposits.js')
  const row = await withDatabase(values, (db) =>
    how === 'assign'
      ? assignDeposit(db, { id, now: new Date() })
      : refundHeldDeposit(db, { id, now: new Date() }),
  )
  if (values.json) process.stdout.write(`${JSON.stringify(row)}\n`)
  else
    process.stdout.write(
      how === 'assign'
        ? `Deposit ${row.id} (${row.amount} of ${row.asset}) is now ${row.partner_id}'s float.\n`
        : `Deposit ${row.id} (${row.amount} of ${row.asset}) is being sent back to ${row.sender}.\n`,
    )
  return 0
}

/** The EVM chains of the config file (none: a usage error), for commands that read them. */
async function evmChainsOf(configFile: string, db: Db) {
  const { readConfigFile, resolveConfig } = await import('./config.js')
  const config = resolveConfig(await readConfigFile(configFile))
  const { createEvmRuntime } = await import('./chains/evm/index.js')
  const { chains } = createEvmRuntime({ config, db })
  if (chains.length === 0) throw new Error(`${configFile} configures no EVM chain.`)
  return chains
}

function requireConfig(file: string | undefined, command: keyof typeof commands): string {
  if (!file)
    throw new UsageError('--config is required (the chains and their executor keys)', { cause: command })
  return file
}

function paymentIdOf(positionals: readonly string[], command: keyof typeof commands): string {
  const [id, ...rest] = positionals
  if (id === undefined || rest.length > 0 || !/^pay_[A-Za-z0-9]{1,64}$/.test(id))
    throw new UsageError('Give exactly one payment id (pay_...)', { cause: command })
  return id
}

async function addressOf(value: string | undefined, option: string, command: keyof typeof commands) {
  const { getAddress, isAddress } = await import('viem')
  if (value === undefined || !isAddress(value))
    throw new UsageError(
      `${option} must be an EVM address (0x and 40 hex characters, checksummed if mixed case)`,
      {
        cause: command,
      },
    )
  return getAddress(value)
}

async function depositsStray(args: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: {
      ...databaseOptions,
      config: { type: 'string' },
      token: { type: 'string', multiple: true },
      json: { type: 'boolean', default: false },
    },
    allowPositionals: true,
    strict: true,
  })
  const paymentId = paymentIdOf(positionals, 'deposits stray')
  const configFile = requireConfig(values.config, 'deposits stray')
  const tokens = await Promise.all((values.token ?? []).map((t) => addressOf(t, '--token', 'deposits stray')))
  const { inspectStray } = await import('./chains/evm/stray.js')
  const found = await withDatabase(values, async (db) =>
    inspectStray(db, await evmChainsOf(configFile, db), { paymentId, tokens }),
  )
  if (values.json) {
    process.stdout.write(`${JSON.stringify(found)}\n`)
    return 0
  }
  printRows(
    false,
    found.holdings.map((h) => ({
      ...h,
      balance: h.error ? `error: ${h.error}` : h.balance,
      senders: h.senders.map((s) => `${s.address}:${s.amount}`).join(' '),
    })),
    [
      ['chainId', 'CHAIN'],
      ['depositAddress', 'ADDRESS'],
      ['asset', 'ASSET'],
      ['balance', 'BALANCE'],
      ['handledBy', 'HANDLED BY'],
      ['block', 'BLOCK'],
      ['senders', 'SENDERS'],
    ],
  )
  if (found.recoveries.length > 0) {
    process.stdout.write('\nRecoveries\n')
    printRows(
      false,
      found.recoveries.map((r) => ({ ...r, amount: r.amount === null ? null : String(r.amount) })),
      [
        ['id', 'RECOVERY'],
        ['chain_id', 'CHAIN'],
        ['asset', 'ASSET'],
        ['to_address', 'TO'],
        ['status', 'STATUS'],
        ['amount', 'AMOUNT'],
        ['tx_hash', 'TX'],
      ],
    )
  }
  return 0
}

async function depositsRecover(args: readonly string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args: [...args],
    options: {
      ...databaseOptions,
      config: { type: 'string' },
      chain: { type: 'string' },
      asset: { type: 'string' },
      to: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    allowPositionals: true,
    strict: true,
  })
  const command = 'deposits recover'
  const paymentId = paymentIdOf(positionals, command)
  const configFile = requireConfig(values.config, command)
  if (!values.chain || !/^eip155:[0-9]{1,32}$/.test(values.chain))
    throw new UsageError('--chain must be an EVM chain id (eip155:N)', { cause: command })
  const asset =
    values.asset === 'native' ? 'native' : await addressOf(values.asset, '--asset (or native)', command)
  const to = values.to === undefined ? undefined : await addressOf(values.to, '--to', command)
  const { requestRecovery } = await import('./chains/evm/stray.js')
  const { tokenAmountFor } = await import('./gateway/quote.js')
  const done = await withDatabase(values, async (db) =>
    requestRecovery(db, await evmChainsOf(configFile, db), {
      paymentId,
      chainId: values.chain!,
      asset,
      to,
      tokenAmount: tokenAmountFor,
      now: new Date(),
    }),
  )
  if (values.json) process.stdout.write(`${JSON.stringify(done)}\n`)
  else if (done.kind === 'recovery')
    process.stdout.write(
      `Recovery ${done.recovery.id}: ${done.recovery.asset} at ${done.recovery.deposit_address} is being moved to ${done.recovery.to_address} (a job of the running workers sends it).\n`,
    )
  else
    process.stdout.write(
      `${done.transfers} transfer(s) of ${done.asset} into ${done.depositAddress} recorded for payment ${paymentId}: the push sweep brings them to the collection address and applies them (see "caipay deposits list").\n`,
    )
  return 0
}

async function status(args: readonly string[]): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: { ...databaseOptions, config: { type: 'string' }, json: { type: 'boolean', default: false } },
    strict: true,
  })
  const { readConfigFile, resolveConfig } = await import('./config.js')
  const config = resolveConfig(values.config ? await readConfigFile(values.config) : {})
  const { operatorStatus, formatStatus } = await import('./metrics/status.js')
  const report = await withDatabase(values, (db) => operatorStatus(db, config))
  process.stdout.write(values.json ? `${JSON.stringify(report)}\n` : formatStatus(report))
  return 0
}

const runners: Record<keyof typeof commands, (args: readonly string[]) => Promise<number>> = {
  balances,
  'ledger ack': ledgerAck,
  'ledger allocate': ledgerAllocate,
  'deposits list': depositsList,
  'deposits refund': (args) => depositResolve(args, 'refund'),
  'deposits assign': (args) => depositResolve(args, 'assign'),
  'deposits stray': depositsStray,
  'deposits recover': depositsRecover,
  serve,
  status,
  'partners create': partnersCreate,
  'partners list': partnersList,
  'keys create': keysCreate,
  'keys list': keysList,
  'keys revoke': keysRevoke,
  'apps create': appsCreate,
  'apps list': appsList,
  'apps revoke': appsRevoke,
  'secrets rotate': secretsRotate,
}

/** One line for any failure: a missing server dependency names the install line, never a stack. */
function describe(error: unknown): string {
  if (!(error instanceof Error)) return String(error)
  const missing = missingPackage(error)
  if (missing) {
    return (
      `the server needs the package "${missing}", which is not installed. ` +
      'Install the server with `npm install caipay-server` (its dependencies included), then run `npx caipay serve`.'
    )
  }
  const cause = error.cause instanceof Error ? `: ${error.cause.message}` : ''
  return `${error.message}${cause}`.replace(/\s*\n\s*/g, ' ')
}

function missingPackage(error: Error): string | undefined {
  const code = (error as { code?: string }).code
  if (code !== 'ERR_MODULE_NOT_FOUND' && code !== 'MODULE_NOT_FOUND') return undefined
  const name = /Cannot find (?:package|module) '([^']+)'/.exec(error.message)?.[1]
  if (!name || name.startsWith('.') || path.isAbsolute(name)) return undefined
  const parts = name.split('/')
  return name.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0]
}

/** The version of the caipay package this file belongs to (src/server or dist/server). */
function version(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url))
  for (;;) {
    const file = path.join(dir, 'package.json')
    if (existsSync(file)) {
      const manifest = JSON.parse(readFileSync(file, 'utf8')) as { name?: string; version?: string }
      if (manifest.name === 'caipay' && manifest.version) return manifest.version
    }
    const parent = path.dirname(dir)
    if (parent === dir) return 'unknown'
    dir = parent
  }
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
