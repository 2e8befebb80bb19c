import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import { inject } from 'vitest'
import { createDb, type Db } from '../src/server/store/db.js'
import { templateDatabase } from './globalSetup.js'

/**
 * PostgreSQL for tests. test/globalSetup.ts starts one cluster per run and migrates a template;
 * every `createTestDatabase()` clones that template into a fresh database (about 50 ms), so test
 * files never see each other's rows.
 *
 * ```ts
 * const pg = await createTestDatabase()
 * await pg.db.selectFrom('payments').selectAll().execute()
 * await pg.drop()
 * ```
 */
export interface TestDatabase {
  /** Connection string of the new database (give it to `caipay serve --database-url`). */
  url: string
  db: Db
  /** Closes `db` and drops the database. */
  drop(): Promise<void>
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const adminUrl = postgresUrl()
  const name = `caipay_test_${randomBytes(6).toString('hex')}`
  const admin = createDb(adminUrl, 1)
  try {
    for (let attempt = 0; ; attempt++) {
      try {
        await sql`CREATE DATABASE ${sql.id(name)} TEMPLATE ${sql.id(templateDatabase)}`.execute(admin)
        break
      } catch (error) {
        // 55006: another worker is cloning the template at this very moment.
        if ((error as { code?: string }).code !== '55006' || attempt >= 50) throw error
        await new Promise((resolve) => setTimeout(resolve, 50 + Math.random() * 100))
      }
    }
  } finally {
    await admin.destroy()
  }
  const url = withDatabase(adminUrl, name)
  const db = createDb(url)
  let dropped = false
  return {
    url,
    db,
    async drop() {
      if (dropped) return
      dropped = true
      await db.destroy()
      const admin = createDb(adminUrl, 1)
      try {
        await sql`DROP DATABASE IF EXISTS ${sql.id(name)} WITH (FORCE)`.execute(admin)
      } finally {
        await admin.destroy()
      }
    },
  }
}

/** The cluster's admin connection string (its `postgres` database). */
export function postgresUrl(): string {
  const url = inject('postgresUrl')
  if (!url)
    throw new Error('No test PostgreSQL: vitest.config.ts must list test/globalSetup.ts in globalSetup.')
  return url
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}
