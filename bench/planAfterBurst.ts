/**
 * The cause of the merchant status slowdown after a write burst, shown on PostgreSQL alone:
 * `npx tsx bench/planAfterBurst.ts [payments]` (default 20,000).
 *
 * Two shapes of the status read, each a named statement on its own connection, as the server's pool
 * runs them: `id = $1 AND merchant_id = $2` (before) and `id = $1` (now, the owner checked on the
 * row). Each runs ten times while the merchant has one payment (from the sixth run the connection
 * keeps a generic plan), then the merchant gets `payments` more, a moment apart, with no ANALYZE in
 * between (autovacuum had not got to it in the reported runs either). Printed: the cached plan, its
 * buffers and execution time, and the CPU its backend process spent per read over 2,000 reads (from
 * /proc, so it holds on a busy machine where wall-clock time does not).
 */
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { openDatabase } from '../src/server/store/db.js'
import { startEmbeddedPostgres } from '../src/server/store/embedded.js'
import { processCpuMs } from './cpu.js'

const burst = Number(process.argv[2] ?? 20_000)
const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-plan-'))
const cluster = await startEmbeddedPostgres({ dataDir })
try {
  await (await openDatabase({ databaseUrl: cluster.url })).close()
  const connect = async () => {
    const client = new pg.Client({ connectionString: cluster.url })
    await client.connect()
    return client
  }
  const admin = await connect()
  await admin.query(`INSERT INTO partners VALUES ('par_1', 'bench', '2025-01-01', now())`)
  await admin.query(
    `INSERT INTO merchants VALUES ('mer_1', 'par_1', 'test', 'M', 'm@example.com', null, 'active', now(), now(), null)`,
  )
  const insertPayments = (ids: string) =>
    admin.query(`INSERT INTO payments (id, partner_id, merchant_id, mode, reference_id, amount_unit, amount_value,
      status, expires_at, created_at, updated_at)
      SELECT ${ids}, 'par_1', 'mer_1', 'test', 'r', 'iso4217/USD', 1, 'requires_action', now(), clock_timestamp(),
        clock_timestamp() FROM generate_series(1, ${burst}) AS n`)
  await admin.query(`INSERT INTO payments (id, partner_id, merchant_id, mode, reference_id, amount_unit, amount_value,
    status, expires_at, created_at, updated_at)
    VALUES ('pay_0', 'par_1', 'mer_1', 'test', 'r', 'iso4217/USD', 1, 'requires_action', now(), now(), now())`)

  const shapes = [
    {
      name: 'before',
      text: 'SELECT id, status FROM payments WHERE id = $1 AND merchant_id = $2',
      args: ['pay_0', 'mer_1'],
    },
    { name: 'now', text: 'SELECT id, status, merchant_id FROM payments WHERE id = $1', args: ['pay_0'] },
  ]
  const clients = await Promise.all(shapes.map(() => connect()))
  const backends = await Promise.all(
    clients.map(async (c) => (await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number),
  )
  const run = (i: number) =>
    clients[i]!.query({ name: shapes[i]!.name, text: shapes[i]!.text, values: shapes[i]!.args })
  const report = async (when: string) => {
    for (const [i, shape] of shapes.entries()) {
      const literal = shape.args.map((a) => `'${a}'`).join(', ')
      const { rows } = await clients[i]!.query(
        `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE ${shape.name}(${literal})`,
      )
      const plan = rows[0]['QUERY PLAN'][0].Plan
      const reads = 2000
      const before = processCpuMs(backends[i]!)!
      for (let n = 0; n < reads; n++) await run(i)
      const us = ((processCpuMs(backends[i]!)! - before) * 1000) / reads
      console.log(
        `${when.padEnd(28)} ${shape.name.padEnd(7)} ${`${plan['Node Type']} on ${plan['Index Name']}`.padEnd(48)} ` +
          `${String(plan['Shared Hit Blocks']).padStart(4)} buffers  ${plan['Actual Total Time'].toFixed(3)} ms  ${us.toFixed(0).padStart(5)} µs backend CPU per read`,
      )
    }
  }
  for (let n = 0; n < 10; n++) for (const i of shapes.keys()) await run(i)
  await report('one payment')
  await insertPayments(`'pay_' || n`)
  await report(`${burst.toLocaleString('en')} payments later`)
  await Promise.all([admin, ...clients].map((c) => c.end()))
} finally {
  await cluster.stop()
  await fs.rm(dataDir, { recursive: true, force: true })
}
