import { Migrator, sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { migrations } from '../../src/server/store/migrations/index.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'

/** The newest migration can be undone and done again on a database the server has migrated. */
let database: TestDatabase
beforeAll(async () => {
  database = await createTestDatabase()
})
afterAll(() => database.drop())

const expiryIndex = async () =>
  (
    await sql<{ indexdef: string }>`
      SELECT indexdef FROM pg_indexes WHERE indexname = 'idempotency_keys_expiry'`.execute(database.db)
  ).rows[0]?.indexdef

describe('migration 012 (BRIN index on idempotency_keys.expires_at)', () => {
  it('goes down to the B-tree and up again', async () => {
    const migrator = new Migrator({ db: database.db, provider: { getMigrations: async () => migrations } })
    expect(await expiryIndex()).toContain('USING brin (expires_at)')
    const down = await migrator.migrateDown()
    expect(down.error).toBeUndefined()
    expect(down.results?.map((r) => [r.migrationName, r.status])).toEqual([
      ['012_idempotency_expiry_brin', 'Success'],
    ])
    expect(await expiryIndex()).toContain('USING btree (expires_at)')
    const up = await migrator.migrateToLatest()
    expect(up.error).toBeUndefined()
    expect(await expiryIndex()).toContain('USING brin (expires_at)')
  })
})
