import { CompiledQuery, type PostgresPool, type PostgresPoolClient, type QueryResult } from 'kysely'
import type pg from 'pg'
import type { Db } from './db.js'

/**
 * Named (prepared) statements for the hot, fixed-shape queries: the status reads and the payment
 * insert. PostgreSQL parses and plans an unnamed statement on every call, and for these that is half
 * of its work (bench: a payment INSERT 328 -> 193 µs of PostgreSQL CPU, the idempotent one 610 -> 283).
 * A named statement is parsed once per connection and, after five runs, planned once.
 *
 * Only statements whose best plan does not depend on their parameters belong here (primary-key and
 * unique-key lookups, single-row inserts): a generic plan would, for instance, guess a `LIMIT $1`.
 * A lookup's WHERE names its key and nothing else; check other columns (owner, mode) on the row. A
 * connection caches its generic plan from the sixth run on, costed with the statistics of that moment,
 * and keeps it until the table is analyzed: `id = $1 AND merchant_id = $2`, first run on a small table,
 * cached an index-only scan of `payments_merchant_status` (which ends in `id`), and after a burst of
 * inserts every merchant status read walked that merchant's whole index range (297 buffers, 1.1 ms,
 * instead of 3 buffers by the primary key).
 * They must name their columns (`paymentColumns`, never `SELECT *`): PostgreSQL re-plans a prepared
 * statement after a migration but refuses one whose result type changed, so a column added by a
 * rolling deploy would break `*` on every connection that prepared it.
 * Behind PgBouncer in transaction mode, use 1.21 or later with `max_prepared_statements` set.
 */
const names = new Map<string, string>()
/** A bound on statements kept per connection, should a caller build ever-new texts by mistake. */
const maxStatements = 64

/** Runs `query` as a named statement of each connection that runs it. */
export function executePrepared<R>(db: Db, query: CompiledQuery<R>): Promise<QueryResult<R>> {
  if (!names.has(query.sql) && names.size < maxStatements) names.set(query.sql, `caipay_${names.size + 1}`)
  return db.executeQuery(query)
}

/**
 * A prepared statement whose text kysely builds once: later calls only bind their arguments. For hot
 * statements whose query builder would be most of their cost (a full column list compiles in ~30 µs).
 * `build` must use each argument once, in order, as a parameter; the first call checks that.
 */
export function preparedStatement<A extends unknown[], R>(
  build: (db: Db, ...args: A) => { compile(): CompiledQuery<R> },
): (db: Db, ...args: A) => Promise<QueryResult<R>> {
  const shape = `preparedStatement ${++preparedStatements}`
  return (db, ...args) => executeShaped(db, shape, args, () => build(db, ...args))
}

let preparedStatements = 0
const texts = new Map<string, string>()

/**
 * Runs a statement whose text kysely builds once per `shape`, a key naming everything that changes
 * the text: later calls of that shape only bind `parameters` to it. The first build's parameters must
 * be `parameters`, in order (checked), so a caller that foresees them wrongly fails at once.
 */
export async function executeShaped<R>(
  db: Db,
  shape: string,
  parameters: readonly unknown[],
  build: () => { compile(): CompiledQuery<R> },
): Promise<QueryResult<R>> {
  const text = texts.get(shape)
  if (text !== undefined)
    return executePrepared(db, CompiledQuery.raw(text, [...parameters]) as CompiledQuery<R>)
  const compiled = build().compile()
  const same =
    compiled.parameters.length === parameters.length &&
    compiled.parameters.every((p, i) => p === parameters[i])
  if (!same) throw new Error(`${shape}: build must use each argument once, in order, as a parameter`)
  texts.set(shape, compiled.sql)
  return executePrepared(db, compiled)
}

/** The pg pool as kysely sees it: statements marked by executePrepared run by name. */
export function preparingPool(pool: pg.Pool): PostgresPool {
  const clients = new WeakMap<pg.PoolClient, PostgresPoolClient>()
  return {
    async connect() {
      const client = await pool.connect()
      let wrapped = clients.get(client)
      if (!wrapped) {
        wrapped = preparingClient(client)
        clients.set(client, wrapped)
      }
      return wrapped
    },
    end: () => pool.end(),
  }
}

function preparingClient(client: pg.PoolClient): PostgresPoolClient {
  const query = (text: string | pg.Submittable, values?: readonly unknown[]) => {
    // A cursor (kysely's streaming) passes through.
    if (typeof text !== 'string') return client.query(text)
    const name = names.get(text)
    return name === undefined
      ? client.query(text, values as unknown[])
      : client.query({ name, text, values: values as unknown[] })
  }
  return { query: query as unknown as PostgresPoolClient['query'], release: () => client.release() }
}
