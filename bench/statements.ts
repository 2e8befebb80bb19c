/**
 * Statements and round trips per payment, counted by PostgreSQL itself (pg_stat_statements, shipped
 * with the embedded binaries), so the per-step table of docs/performance.md is measured, not estimated,
 * and needs nothing in the server. Only the live benches turn it on (`--statements`): the cluster loads
 * the module at start, the bench resets the counts before a phase and reads them after.
 *
 * A top-level statement is one round trip (the driver sends parse/bind/execute/sync together); nested
 * ones (a trigger's, a function's) ride in their caller's round trip and are counted apart. Each query
 * text is put in a step by what it touches (`stepOf`); `exec ms` is the backend's planning and execution
 * time (wall time inside PostgreSQL, the closest per-statement figure to its CPU it keeps).
 */
import fs from 'node:fs/promises'
import path from 'node:path'
import pg from 'pg'

/** Makes the cluster of a `caipay --data-dir <dbDir>` load pg_stat_statements at its next start. */
export async function loadStatementStats(dbDir: string): Promise<void> {
  const conf = path.join(dbDir, 'postgres', 'postgresql.auto.conf')
  await fs.appendFile(
    conf,
    "\nshared_preload_libraries = 'pg_stat_statements'\npg_stat_statements.track = 'all'\npg_stat_statements.max = 10000\n",
  )
}

export interface StatementRow {
  query: string
  toplevel: boolean
  calls: number
  rows: number
  ms: number
}

export interface StatementStats {
  reset(): Promise<void>
  /** Payments whose settlement is recorded (the bench's own reads are left out of the counts). */
  settled(): Promise<number>
  read(): Promise<StatementRow[]>
  close(): Promise<void>
}

/** Connects to the cluster of `dbDir` (its postgres.json) and creates the extension. */
export async function openStatementStats(dbDir: string): Promise<StatementStats> {
  const info = JSON.parse(await fs.readFile(path.join(dbDir, 'postgres.json'), 'utf8'))
  const client = new pg.Client({
    connectionString: `postgres://${info.user}:${encodeURIComponent(info.password)}@127.0.0.1:${info.port}/postgres`,
  })
  await client.connect()
  await client.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements')
  return {
    async reset() {
      await client.query('SELECT pg_stat_statements_reset()')
    },
    async settled() {
      const { rows } = await client.query(
        `/* bench */ SELECT count(*)::int AS n FROM payments WHERE settlement_status = 'succeeded'`,
      )
      return rows[0].n as number
    },
    async read() {
      const { rows } = await client.query(
        `SELECT query, toplevel, calls::int, rows::int, (total_exec_time + total_plan_time)::float8 AS ms
           FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())`,
      )
      return (rows as StatementRow[]).filter(
        (r) => !/pg_stat_statements|pg_database|AS n FROM payments WHERE settlement_status/.test(r.query),
      )
    },
    close: () => client.end(),
  }
}

/**
 * The step of a live payment a statement belongs to, from its text. The patterns name the tables and
 * the distinctive clauses of each step's statements (src/server/...); what matches none is `other`, and
 * `--statement-texts` prints every text so a new statement can be placed.
 */
export function stepOf(query: string): string {
  const q = query.replace(/\s+/g, ' ')
  const rules: [string, RegExp][] = [
    ['transaction control (BEGIN, COMMIT)', /^(begin|commit|rollback|savepoint|release)\b/i],
    ['creation: payment insert + event', /^WITH merchant AS .*INSERT INTO payments/],
    ['options: option insert', /^INSERT INTO payment_options/],
    // Before the gateway read: both start with the payment's columns.
    [
      'chain job: payment + settlement destination',
      /\(SELECT s\.destination FROM crypto_settlements s WHERE s\.merchant_id = payments\.merchant_id/,
    ],
    ['gateway read: payment + option', /^SELECT payments\.id, payments\.partner_id/],
    ['settlement destination read', /FROM crypto_settlements WHERE merchant_id/],
    ['chain job: payment + settlement destination', /"crypto_settlements"\."destination"/],
    [
      'status reads',
      /^SELECT id, merchant_id, mode, status, tx_id, expires_at FROM payments WHERE id = \$1$/,
    ],
    ['expiry sweep', /^with "changed" as \(update "payments" set "status" = \$1, "expired_at"/],
    [
      "finisher: a block's payments succeeded + events",
      /^with "changed" as \(update "payments" set "status" = \$1, "succeeded_at"/,
    ],
    // The named form (lifecycle.ts confirmWithJob) as pg_stat_statements shows it: literals as $n.
    [
      'confirm: state change + event',
      /^with "changed" as \(update "payments" set "processing_at"|^WITH changed AS \( UPDATE payments SET status = \$\d+, processing_at/,
    ],
    [
      'confirm: relay guard read (cool-downs, budgets)',
      /FROM payer_cooldowns WHERE chain_id = \$\d+ AND subject = ANY/,
    ],
    ["relay send: the group's fee reservations (one call)", /caipay_reserve_executor_fees\(/],
    [
      'settlement + ledger (finisher, batch)',
      /^with "changed" as \(update "payments" set "settlement_status"/,
    ],
    ['job: enqueue', /^insert into "jobs"/],
    ['job: enqueue + wake (one statement)', /^WITH enqueued AS \( INSERT INTO jobs/],
    ['job: wake (pg_notify)', /^SELECT pg_notify\(\$1, \$2\)$/],
    ['job: claim', /^UPDATE jobs SET state = .*FOR UPDATE SKIP LOCKED/],
    [
      'job: done / failed',
      /^update "jobs" set "state"|^UPDATE jobs SET state = \$\d+, result = done\.result/,
    ],
    ['job: lease, fence', /jobs\.attempts|UPDATE jobs SET locked_until/],
    [
      'relay job: payment read',
      /^select "id", "partner_id", "merchant_id", .* from "payments" where "id" = \$1/,
    ],
    ['relay send: prior records', /^select \* from "evm_transactions" where "payment_id" = \$1/],
    [
      'relay send: group (lock, nonce, record)',
      /pg_advisory|max\(nonce\)|^insert into "evm_transactions"|"status" = \$3 order by "nonce"/,
    ],
    ['receipts: transaction status', /evm_transactions/],
    ['fetch: option built', /^update "payment_options" set "built"/],
    ['Solana confirm: transaction recorded', /^insert into "solana_transactions"/],
    [
      'Solana job: its recorded transaction',
      /^select \* from "solana_transactions" where "signature" = \$1$/,
    ],
    ['Solana send counted, statuses (watcher)', /solana_transactions/],
    [
      'settlement + ledger (finisher, batch)',
      /settlement_batches|settlement_items|settlement_amounts|ledger_|FROM payments WHERE id = ANY|from "refunds"|"settlement_status" = \$1/,
    ],
    ['webhook outbox: dispatcher', /from "payment_events" where "dispatched_at" is null/],
    ['webhook outbox: trigger (nested)', /NEW\.dispatched_at IS NULL/],
    ['status change notify (trigger, nested)', /pg_notify\(\$\d+, NEW\.id\)/],
    ['foreign-key checks (nested)', /FROM ONLY "public"\./],
    ['auth', /api_keys|from "merchants"/],
  ]
  return rules.find(([, re]) => re.test(q))?.[0] ?? 'other'
}

export interface StepCount {
  step: string
  /** Per payment. */
  roundTrips: number
  nested: number
  rows: number
  ms: number
}

export function byStep(rows: readonly StatementRow[], payments: number): StepCount[] {
  const steps = new Map<string, StepCount>()
  for (const r of rows) {
    const step = stepOf(r.query)
    const s = steps.get(step) ?? { step, roundTrips: 0, nested: 0, rows: 0, ms: 0 }
    if (r.toplevel) s.roundTrips += r.calls / payments
    else s.nested += r.calls / payments
    s.rows += r.rows / payments
    s.ms += r.ms / payments
    steps.set(step, s)
  }
  return [...steps.values()].sort((a, b) => b.roundTrips - a.roundTrips)
}

/** A phase's table: round trips (top-level statements), nested statements, rows, exec ms, per payment. */
export function formatSteps(
  title: string,
  rows: readonly StatementRow[],
  payments: number,
  all = false,
): string {
  const steps = byStep(rows, payments)
  const total = steps.reduce(
    (t, s) => ({ roundTrips: t.roundTrips + s.roundTrips, nested: t.nested + s.nested, ms: t.ms + s.ms }),
    { roundTrips: 0, nested: 0, ms: 0 },
  )
  const lines = [
    `  ${title}, per payment: ${total.roundTrips.toFixed(2)} round trips, ${total.nested.toFixed(2)} nested statements, ${total.ms.toFixed(2)} ms in PostgreSQL`,
    ...steps.map(
      (s) =>
        `    ${s.step.padEnd(40)} ${s.roundTrips.toFixed(2).padStart(6)} rt ${s.nested.toFixed(2).padStart(6)} nested ${s.ms.toFixed(3).padStart(7)} ms`,
    ),
  ]
  if (all) {
    for (const r of [...rows].sort((a, b) => b.calls - a.calls)) {
      lines.push(
        `      ${(r.calls / payments).toFixed(2).padStart(6)} ${r.toplevel ? 'top' : 'nst'} [${stepOf(r.query)}] ${r.query.replace(/\s+/g, ' ').slice(0, 220)}`,
      )
    }
  }
  return lines.join('\n')
}

/**
 * A live bench's phases: each `phase(title)` closes the one before (its table) and starts the next;
 * `settledPhase` first waits, in the database, until every payment's settlement is recorded (so no
 * merchant read of the bench is counted).
 */
export interface StatementPhases {
  phase(title: string): Promise<void>
  settledPhase(title: string): Promise<void>
  tables: string[]
  close(): Promise<void>
}

export async function statementPhases(
  dbDir: string,
  payments: number,
  texts: boolean,
): Promise<StatementPhases> {
  const stats = await openStatementStats(dbDir)
  const tables: string[] = []
  await stats.reset()
  const phase = async (title: string) => {
    tables.push(formatSteps(title, await stats.read(), payments, texts))
    await stats.reset()
  }
  return {
    phase,
    async settledPhase(title) {
      const deadline = Date.now() + 60_000
      while (Date.now() < deadline && (await stats.settled()) < payments) {
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      await phase(title)
    },
    tables,
    close: () => stats.close(),
  }
}
