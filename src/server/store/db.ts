import { type ControlledTransaction, Kysely, PostgresDialect, type Transaction } from 'kysely'
import pg from 'pg'
import { startEmbeddedPostgres } from './embedded.js'
import { migrate } from './migrate.js'
import { preparingPool } from './prepared.js'
import type { Database } from './schema.js'

export type Db = Kysely<Database>

export interface OpenDatabaseOptions {
  /** Any PostgreSQL 14+. Without it an embedded cluster runs in `dataDir`. */
  databaseUrl?: string | undefined
  /** Default `.caipay`. */
  dataDir?: string | undefined
  /** Run pending migrations (default true). */
  migrate?: boolean
  /** Pool size per process (default 10). */
  poolSize?: number
  /** See StartEmbeddedOptions.handleSignals. */
  handleSignals?: boolean
  log?: (message: string) => void
}

export interface OpenedDatabase {
  db: Db
  /** The connection string in use (embedded or given). */
  url: string
  embedded: boolean
  /** Closes the pool, then stops the embedded cluster when this process started it. */
  close(): Promise<void>
}

export async function openDatabase(options: OpenDatabaseOptions = {}): Promise<OpenedDatabase> {
  // An empty DATABASE_URL means "none", not "libpq defaults".
  const databaseUrl = options.databaseUrl || undefined
  const embedded = databaseUrl
    ? undefined
    : await startEmbeddedPostgres({
        dataDir: options.dataDir ?? '.caipay',
        ...(options.log ? { log: options.log } : {}),
        ...(options.handleSignals ? { handleSignals: true } : {}),
      })
  const url = databaseUrl ?? embedded!.url
  const db = createDb(url, options.poolSize)
  try {
    if (options.migrate !== false) await migrate(db)
  } catch (error) {
    await db.destroy()
    await embedded?.stop()
    throw unreachable(error, url) ?? error
  }
  return {
    db,
    url,
    embedded: embedded !== undefined,
    async close() {
      await db.destroy()
      await embedded?.stop()
    },
  }
}

export function createDb(url: string, poolSize = 10): Db {
  // A database that stops answering fails a request after 10 s (503, see isDatabaseUnavailable)
  // rather than holding it forever.
  const pool = new pg.Pool({ connectionString: url, max: poolSize, connectionTimeoutMillis: 10_000 })
  // A client losing its server (database restart, pg_terminate_backend) must not crash the process:
  // an idle one is reported on the pool, one in use on itself (its query fails, and that is enough).
  pool.on('error', () => {})
  pool.on('connect', (client) => client.on('error', () => {}))
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: preparingPool(pool) }) })
  pools.set(db, pool)
  return db
}

const pools = new WeakMap<Db, pg.Pool>()

/** The connections of a pool made by createDb, for the metrics (undefined for any other Kysely). */
export function poolUsage(db: Db): { total: number; idle: number; waiting: number; max: number } | undefined {
  const pool = pools.get(db)
  if (!pool) return undefined
  return { total: pool.totalCount, idle: pool.idleCount, waiting: pool.waitingCount, max: pool.options.max }
}

/** Runs `fn` in a transaction, reusing the caller's when `db` already is one (kysely does not nest). */
export function inTransaction<T>(db: Db, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  if (db.isTransaction) return fn(db as Transaction<Database>)
  return newTransaction(db, fn)
}

/**
 * What each transaction opened here runs once it has committed (afterCommit). A rolled-back one's list
 * is never run and goes with its transaction object.
 */
const committedHooks = new WeakMap<Db, (() => void)[]>()

/** Runs `fn` in a transaction of its own (never the caller's), with its after-commit list. */
export async function newTransaction<T>(db: Db, fn: (trx: Transaction<Database>) => Promise<T>): Promise<T> {
  let opened: Transaction<Database> | undefined
  const result = await db.transaction().execute((trx) => {
    opened = trx
    committedHooks.set(trx, [])
    return fn(trx)
  })
  runCommittedHooks(opened!)
  return result
}

/** A transaction the caller commits or rolls back itself, with its after-commit list (commitTransaction). */
export async function startTransaction(db: Db): Promise<ControlledTransaction<Database>> {
  const trx = await db.startTransaction().execute()
  committedHooks.set(trx, [])
  return trx
}

/** Commits a transaction of startTransaction, then runs its after-commit list. */
export async function commitTransaction(trx: ControlledTransaction<Database>): Promise<void> {
  await trx.commit().execute()
  runCommittedHooks(trx)
}

function runCommittedHooks(trx: Db): void {
  const hooks = committedHooks.get(trx)
  committedHooks.delete(trx)
  if (hooks) for (const hook of hooks) hook()
}

/**
 * Runs `fn` once what `db` wrote is committed: at once when `db` is no transaction (each statement
 * committed as it returned), at the commit of a transaction opened by this module, never when that one
 * rolls back. A transaction opened elsewhere (kysely's own `db.transaction()`) has no list: `fn` runs
 * at once, so open transactions here. `fn` must not throw (it runs after the commit, past any rollback).
 */
export function afterCommit(db: Db, fn: () => void): void {
  const hooks = db.isTransaction ? committedHooks.get(db) : undefined
  if (hooks) hooks.push(fn)
  else fn()
}

/**
 * SQLSTATE classes and codes of a database that cannot serve right now (not of a bad statement):
 * 08 connection exception, 57P01-57P03 shut down or starting, 53300 too many connections.
 */
const unavailableStates = new Set(['57P01', '57P02', '57P03', '53300'])
const unavailableNetworkCodes = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH'])
const unavailableMessages = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error',
  'Connection refused',
]

/**
 * True when `error` says the database is unreachable or restarting, not that a statement was wrong:
 * a request answers 503 and a job waits without counting the attempt. Nothing a transaction wrote
 * before the connection died is kept (PostgreSQL rolls it back).
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let e = error, depth = 0; e && depth < 4; e = (e as { cause?: unknown }).cause, depth++) {
    const { code, message } = e as { code?: unknown; message?: unknown }
    if (typeof code === 'string' && (code.startsWith('08') || unavailableStates.has(code))) return true
    if (typeof code === 'string' && unavailableNetworkCodes.has(code)) return true
    if (e instanceof AggregateError && e.errors.some(isDatabaseUnavailable)) return true
    if (typeof message === 'string' && unavailableMessages.some((m) => message.includes(m))) return true
  }
  return false
}

/** A connection failure as one line naming the server (never the password) and what to check. */
function unreachable(error: unknown, url: string): Error | undefined {
  let code: string | undefined
  for (let e = error as { code?: unknown; cause?: unknown } | undefined; e && !code; e = e.cause as typeof e)
    if (typeof e.code === 'string') code = e.code
  const reasons: Record<string, string> = {
    ECONNREFUSED: 'nothing listens there',
    ENOTFOUND: 'unknown host',
    EAI_AGAIN: 'unknown host',
    ETIMEDOUT: 'timed out',
    EHOSTUNREACH: 'host unreachable',
    '28P01': 'wrong password',
    '28000': 'access refused',
    '3D000': 'no such database',
  }
  const reason = code ? reasons[code] : undefined
  if (!reason) return undefined
  let where = 'the database'
  try {
    const parsed = new URL(url)
    where = `${parsed.hostname}:${parsed.port || 5432}${parsed.pathname}`
  } catch {
    // Not a URL: keep the generic name.
  }
  return new Error(
    `Cannot use the database at ${where}: ${reason} (${code}). Check --database-url or DATABASE_URL.`,
  )
}
