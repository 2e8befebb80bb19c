/**
 * Server CPU spent building (not running) the two hot planned statements: test mode's confirm under an
 * Idempotency-Key and payment creation under one. The database is a stand-in that answers at once, so
 * what is timed is kysely building and compiling the text, plus the runner around it.
 *   npx tsx bench/statementBuild.ts
 */
import { Kysely, PostgresDialect } from 'kysely'
import { resolveConfig } from '../src/server/config.js'
import type { AuthContext } from '../src/server/context.js'
import { plannedInsertWrite, type RoutePlan, runIdempotentPlan } from '../src/server/idempotency.js'
import { paymentInsertPlan } from '../src/server/payments/create.js'
import { type PaymentStepsParams, paymentStepsWrite } from '../src/server/payments/lifecycle.js'
import type { Db } from '../src/server/store/db.js'
import { preparingPool } from '../src/server/store/prepared.js'

const answered = {
  rows: [{ locked: true, allowed: true, stored: true, reported: false }],
  command: 'SELECT',
  rowCount: 1,
}
const client = { query: async () => answered, release() {} }
const pool = { connect: async () => client, end: async () => {} } as unknown as Parameters<
  typeof preparingPool
>[0]
const db = new Kysely({ dialect: new PostgresDialect({ pool: preparingPool(pool) }) }) as unknown as Db
const auth = { partnerId: 'par_bench', mode: 'test' } as AuthContext
const config = resolveConfig({}, {})

function confirmSteps(i: number, now: Date): PaymentStepsParams {
  return {
    paymentId: `pay_${i}`,
    from: 'requires_action',
    notExpiredAt: now,
    now,
    steps: [
      {
        type: 'payment.processing',
        set: {
          processing_at: now,
          selected_option_id: 'opt_1',
          buyer: 'eip155:1:0xabc',
          option_amount: '{}',
          status: 'processing',
        },
      },
      {
        type: 'payment.succeeded',
        set: { succeeded_at: now, tx_id: `0x${i}`, status: 'succeeded', settlement_status: 'pending' },
      },
      {
        type: 'payment.settled',
        set: {
          settlement_status: 'succeeded',
          settled_at: now,
          settlement_tx_id: '0x1',
          settlement_unit: 'caip19/x',
          settlement_value: '1',
        },
      },
    ],
  }
}

const cases: Record<string, (i: number, now: Date) => RoutePlan<unknown>> = {
  'confirm (test mode, Idempotency-Key)': (i, now) => ({
    write: paymentStepsWrite(db, confirmSteps(i, now), {
      status: 'succeeded',
      isFinal: true,
      pollInMs: null,
    }),
  }),
  'create (Idempotency-Key)': (i, now) => ({
    write: plannedInsertWrite(
      paymentInsertPlan({
        db,
        auth,
        merchant: { id: 'mer_bench' },
        body: { referenceId: `r${i}`, amount: { unit: 'iso4217/USD', value: '1000' } },
        config,
        now,
      }),
    ),
  }),
}

for (const [name, plan] of Object.entries(cases)) {
  const run = (i: number) => {
    const now = new Date()
    return runIdempotentPlan({
      db,
      auth,
      key: `k${i}`,
      fingerprint: 'f',
      now,
      ttlSeconds: 86_400,
      successStatus: 200,
      plan: async () => plan(i, now),
    })
  }
  for (let i = 0; i < 2_000; i++) await run(i)
  const n = 10_000
  const start = process.cpuUsage()
  for (let i = 0; i < n; i++) await run(i)
  const used = process.cpuUsage(start)
  console.log(`${name}: ${((used.user + used.system) / n).toFixed(1)} µs of CPU per statement built`)
}
