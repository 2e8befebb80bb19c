import { type Kysely, type MigrationResultSet, Migrator } from 'kysely'
import { migrations } from './migrations/index.js'

/**
 * Brings the schema up to date. Safe with several instances starting at once: kysely's migrator
 * takes a lock row first.
 */
// biome-ignore lint/suspicious/noExplicitAny: the migrator works on any schema
export async function migrate(db: Kysely<any>): Promise<MigrationResultSet> {
  const migrator = new Migrator({ db, provider: { getMigrations: async () => migrations } })
  const result = await migrator.migrateToLatest()
  if (result.error) {
    const failed = result.results?.find((r) => r.status === 'Error')?.migrationName
    throw new Error(`Database migration ${failed ?? ''} failed.`, { cause: result.error })
  }
  return result
}
