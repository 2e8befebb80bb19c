import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import type { TestProject } from 'vitest/node'
import { createDb } from '../src/server/store/db.js'
import { startEmbeddedPostgres } from '../src/server/store/embedded.js'
import { migrate } from '../src/server/store/migrate.js'
import { anvilMissing, locateAnvil } from './anvil.js'

/**
 * One PostgreSQL for the whole run: `CAIPAY_TEST_DATABASE_URL` when set (any PostgreSQL 14+ whose
 * user may CREATE DATABASE; not DATABASE_URL, so a run never touches a real database by accident),
 * else an embedded cluster in a temporary directory. A migrated template
 * database is prepared once; test/postgres.ts clones it per test file.
 */
export const templateDatabase = 'caipay_test_template'

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  if (locateAnvil() === undefined) process.stderr.write(`${anvilMissing}\n`)
  let adminUrl = process.env.CAIPAY_TEST_DATABASE_URL
  let stop = async () => {}
  let tempDir: string | undefined
  if (!adminUrl) {
    tempDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-test-pg-'))
    const pg = await startEmbeddedPostgres({ dataDir: tempDir })
    adminUrl = pg.url
    stop = pg.stop
  }

  const admin = createDb(adminUrl, 1)
  const { sql } = await import('kysely')
  await sql`DROP DATABASE IF EXISTS ${sql.id(templateDatabase)}`.execute(admin)
  await sql`CREATE DATABASE ${sql.id(templateDatabase)}`.execute(admin)
  await admin.destroy()
  const template = createDb(withDatabase(adminUrl, templateDatabase), 1)
  await migrate(template)
  // CREATE DATABASE ... TEMPLATE needs the template to have no open connections.
  await template.destroy()

  project.provide('postgresUrl', adminUrl)
  return async () => {
    await stop()
    if (tempDir) await fs.rm(tempDir, { recursive: true, force: true })
  }
}

function withDatabase(url: string, database: string): string {
  const parsed = new URL(url)
  parsed.pathname = `/${database}`
  return parsed.toString()
}

declare module 'vitest' {
  export interface ProvidedContext {
    postgresUrl: string
  }
}
