import { CompiledQuery, type PostgresPool, type PostgresPoolClient, type QueryResult } from 'kysely'
import type pg from 'pg'
import type { Db } from './db.js'

/**
 * Named (prepared) statements: a few hot, fixed-text queries written as plain SQL (the status reads,
 * the payment insert, the idempotency key's lock and store). PostgreSQL parses and plans an unnamed
 * statement on every call; a named one is parsed once per connection and, after five runs, planned once.
 * Everything else goes through kysely unnamed.
 *
 * Only statements whose best plan does not depend on their parameters belong here (primary-key and
 * unique-key lookups, single-row inserts): a connection caches its generic plan from the sixth run on,
 * costed with the statistics of that moment. A lookup's WHERE names its key and nothing else; check
 * other columns (owner, mode) on the row (`id = $1 AND merchant_id = $2` once cached an index range scan
 * of `payments_merchant_status` that walked a merchant's whole range after a burst of inserts).
 * They name their columns, never `SELECT *`: PostgreSQL re-plans a prepared statement after a migration
 * but refuses one whose result type changed, so a column added by a rolling deploy would break `*` on
 * every connection that prepared it.
 * Behind PgBouncer in transaction mode, use 1.21 or later with `max_prepared_statements` set.
 */

/** Statement text -> name; filled as modules declare their statements, so bounded by the code. */
const names = new Map<string, string>()

/** Declares a named statement (call at module level): run it with its parameters `$1..$n`, in order. */
export function namedStatement<R>(
  text: string,
): (db: Db, ...parameters: unknown[]) => Promise<QueryResult<R>> {
  if (!names.has(text)) names.set(text, `caipay_${names.size + 1}`)
  return (db, ...parameters) =>
    db.executeQuery(CompiledQuery.raw(text, parameters)) as Promise<QueryResult<R>>
}

/** The pg pool as kysely sees it: declared statements run by name. */
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

/** `"a", "b", ...` of code-constant column names, each qualified by `alias` when given. */
export function columnsText(columns: readonly string[], alias?: string): string {
  return columns
    .map((column) => {
      if (!/^[a-z_][a-z0-9_]*$/.test(column)) throw new Error(`Not a plain column name: ${column}`)
      return alias ? `${alias}.${column}` : column
    })
    .join(', ')
}
