/**
 * The benchmark's PostgreSQL: `DATABASE_URL` when set (databases are created there with a unique
 * suffix and dropped at the end), else an embedded cluster in a temporary directory, stopped and
 * removed at the end.
 */
import { randomBytes } from 'node:crypto'
import { readFileSync } from 'node:fs'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { startEmbeddedPostgres } from '../src/server/store/embedded.js'

export interface BenchCluster {
  /** Where the cluster is: `embedded (<dir>)` or the host of DATABASE_URL. */
  description: string
  /** Server version, e.g. `18.1`. */
  version: string
  /** A new empty database; its connection string. */
  createDatabase(name: string): Promise<string>
  dropDatabase(url: string): Promise<void>
  /** The postmaster's process id when the cluster runs on this machine (for CPU accounting). */
  postmasterPid: number | undefined
  /** Runs one statement on the maintenance database. */
  admin<T extends pg.QueryResultRow = pg.QueryResultRow>(sql: string): Promise<pg.QueryResult<T>>
  /** Drops what it created, stops the embedded cluster, removes its directory. */
  close(): Promise<void>
}

export async function openBenchCluster(): Promise<BenchCluster> {
  const external = process.env.DATABASE_URL || undefined
  let dataDir: string | undefined
  let stopEmbedded: (() => Promise<void>) | undefined
  let adminUrl: string
  if (external) {
    adminUrl = external
  } else {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-bench-'))
    const embedded = await startEmbeddedPostgres({ dataDir })
    adminUrl = embedded.url
    stopEmbedded = () => embedded.stop()
  }
  const suffix = external ? `_${randomBytes(4).toString('hex')}` : ''
  const created = new Set<string>()

  const admin = async <T extends pg.QueryResultRow>(sql: string) => {
    const client = new pg.Client({ connectionString: adminUrl })
    await client.connect()
    try {
      return await client.query<T>(sql)
    } finally {
      await client.end()
    }
  }
  const urlFor = (database: string) => {
    const url = new URL(adminUrl)
    url.pathname = `/${database}`
    return url.toString()
  }
  const version = (await admin<{ server_version: string }>('SHOW server_version')).rows[0]!.server_version
  // Read while the session is open: its backend process exits with it.
  const session = new pg.Client({ connectionString: adminUrl })
  await session.connect()
  const backend = (await session.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid
  const postmasterPid = parentOf(backend)
  await session.end()

  return {
    description: external ? `DATABASE_URL (${new URL(external).host})` : `embedded PostgreSQL ${version}`,
    version,
    postmasterPid,
    async createDatabase(name) {
      const database = `${name}${suffix}`
      await admin(`DROP DATABASE IF EXISTS ${database}`)
      await admin(`CREATE DATABASE ${database}`)
      created.add(database)
      return urlFor(database)
    },
    async dropDatabase(url) {
      const database = new URL(url).pathname.slice(1)
      await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
      created.delete(database)
    },
    admin,
    async close() {
      if (external) {
        for (const database of created) {
          await admin(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`).catch(() => {})
        }
      }
      await stopEmbedded?.()
      if (dataDir) await fs.rm(dataDir, { recursive: true, force: true })
    },
  }
}

/** The parent of a (local) backend is the postmaster; undefined when the cluster is elsewhere. */
function parentOf(pid: number): number | undefined {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8')
    const ppid = Number(text.slice(text.lastIndexOf(')') + 2).split(' ')[1])
    return Number.isInteger(ppid) && ppid > 1 ? ppid : undefined
  } catch {
    return undefined
  }
}
