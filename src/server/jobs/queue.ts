import { type RawBuilder, sql } from 'kysely'
import { currentTraceparent } from '../metrics/tracing.js'
import type { Db } from '../store/db.js'
import { namedStatement } from '../store/prepared.js'
import type { JobRow } from '../store/schema.js'
import { jobsChannel } from './notify.js'

/**
 * Money-moving steps (broadcast, settle, ...) as rows, one per (kind, payment): enqueueing twice is a
 * no-op, and several workers on one database claim different rows (FOR UPDATE SKIP LOCKED). A claim
 * is a lease: a worker that dies leaves `locked_until` to pass, and the job runs again, so a step
 * must check the chain before acting (never pay twice).
 */

export async function enqueueJob(
  db: Db,
  job: { kind: string; paymentId: string; payload?: unknown; runAt?: Date; now?: Date },
): Promise<void> {
  const now = job.now ?? new Date()
  await insertAndNotify(
    db,
    job.kind,
    job.paymentId,
    job.runAt ?? now,
    JSON.stringify(job.payload ?? {}),
    now,
    jobsChannel,
    // The step continues the enqueuer's trace (null when tracing is off).
    currentTraceparent(),
  )
}

/**
 * The row and its wake-up in one round trip. The NOTIFY is delivered when the enqueueing transaction
 * commits, so listening runners start at once (jobs/notify.ts); it is sent even when the row was already
 * there, as before. A data-modifying CTE runs whether or not the outer SELECT reads it.
 */
const insertAndNotify = namedStatement(
  `WITH enqueued AS (
    INSERT INTO jobs (kind, payment_id, run_at, locked_until, payload, result, last_error, trace_parent, created_at, updated_at)
    VALUES ($1, $2, $3, NULL, $4, NULL, NULL, $7, $5, $5)
    ON CONFLICT (kind, payment_id) WHERE delivery_id IS NULL AND refund_id IS NULL DO NOTHING
  )
  SELECT pg_notify($6, $1)`,
)

/**
 * Queues a payment's job of `kind` for new work (transfers found, a deposit to send back): inserted the
 * first time; a finished one made pending again; a running one taken over, since its run may have read
 * what it had to do before this work was written, and must then neither act nor record itself done (its
 * fence no longer holds: `attempts` counts up); a pending one runs no later than `runAt`. `attempts` never
 * goes back (a generation used again could match a paused runner's old claim); retries count from
 * `armed_attempts`.
 */
export async function rearmJob(
  db: Db,
  job: { kind: string; paymentId: string; runAt?: Date; now: Date },
): Promise<void> {
  const runAt = job.runAt ?? job.now
  await sql`
    WITH rearmed AS (
      INSERT INTO jobs (kind, payment_id, run_at, locked_until, payload, result, last_error, trace_parent, created_at, updated_at)
      VALUES (${job.kind}, ${job.paymentId}, ${runAt}, NULL, '{}'::jsonb, NULL, NULL, ${currentTraceparent()}::text, ${job.now}, ${job.now})
      ON CONFLICT (kind, payment_id) WHERE delivery_id IS NULL AND refund_id IS NULL DO UPDATE SET
        run_at = CASE WHEN jobs.state = 'pending' THEN LEAST(jobs.run_at, EXCLUDED.run_at) ELSE EXCLUDED.run_at END,
        attempts = jobs.attempts + (jobs.state = 'running')::int,
        armed_attempts = CASE WHEN jobs.state = 'pending' THEN jobs.armed_attempts
          ELSE jobs.attempts + (jobs.state = 'running')::int END,
        state = 'pending', locked_until = NULL, last_error = NULL, result = NULL, updated_at = EXCLUDED.updated_at
    )
    SELECT pg_notify(${jobsChannel}, ${job.kind})`.execute(db)
}

/** A job to enqueue as part of another statement (enqueueAlong). */
export interface NewJob {
  kind: string
  payload?: unknown
  now: Date
}

/**
 * enqueueJob inside another statement: `insert` is a data-modifying CTE adding the job of every row of
 * the CTE `source` (its `id` the payment's; no row, no job), and `wake` a select-list item to read from
 * `source` so the runners are woken at commit exactly when a row was there. As enqueueJob: an existing
 * job stays, and the wake-up is sent all the same.
 */
export function enqueueAlong(
  source: string,
  job: NewJob,
): { insert: RawBuilder<unknown>; wake: RawBuilder<unknown> } {
  const from = sql.table(source)
  return {
    insert: sql`INSERT INTO jobs (kind, payment_id, run_at, locked_until, payload, result, last_error, trace_parent, created_at, updated_at)
      SELECT ${job.kind}, ${from}.id, ${job.now}::timestamptz, NULL, ${JSON.stringify(job.payload ?? {})}::jsonb, NULL, NULL,
        ${currentTraceparent()}::text, ${job.now}::timestamptz, ${job.now}::timestamptz
      FROM ${from}
      ON CONFLICT (kind, payment_id) WHERE delivery_id IS NULL AND refund_id IS NULL DO NOTHING`,
    wake: sql`pg_notify(${jobsChannel}, ${job.kind})`,
  }
}

/** Takes up to `limit` due jobs of the given kinds for `leaseMs`; attempts count up on each claim. */
export async function claimJobs(
  db: Db,
  options: { kinds: readonly string[]; limit?: number; leaseMs?: number; now?: Date },
): Promise<JobRow[]> {
  const now = options.now ?? new Date()
  const lockedUntil = new Date(now.getTime() + (options.leaseMs ?? 10_000))
  const result = await sql<JobRow>`
    UPDATE jobs SET state = 'running', attempts = attempts + 1, locked_until = ${lockedUntil}, updated_at = ${now}
    WHERE id IN (
      SELECT id FROM jobs
      WHERE kind = ANY(${[...options.kinds]}::text[])
        AND run_at <= ${now}
        AND (state = 'pending' OR (state = 'running' AND locked_until < ${now}))
      ORDER BY run_at
      LIMIT ${options.limit ?? 10}
      FOR UPDATE SKIP LOCKED
    )
    RETURNING *`.execute(db)
  return result.rows
}

/** Records the claim's result; a claim taken over since (its lease ran out) records nothing. */
export function completeJob(
  db: Db,
  job: Pick<JobRow, 'id' | 'attempts'>,
  result: unknown,
  now = new Date(),
): Promise<void> {
  return completeJobs(db, [{ job, result }], now)
}

/**
 * completeJob for several claims in one statement (the runner's steps that end in the same turn, as a
 * block's relays do): each row only under the claim that ran it.
 */
export async function completeJobs(
  db: Db,
  done: readonly { job: Pick<JobRow, 'id' | 'attempts'>; result: unknown }[],
  now = new Date(),
): Promise<void> {
  await sql`
    UPDATE jobs SET state = 'succeeded', result = done.result::jsonb, locked_until = NULL, updated_at = ${now}
    FROM unnest(${done.map((d) => d.job.id)}::bigint[], ${done.map((d) => d.job.attempts)}::int[],
      ${done.map((d) => JSON.stringify(d.result ?? null))}::text[]) AS done(id, attempts, result)
    WHERE jobs.id = done.id AND jobs.attempts = done.attempts`.execute(db)
}

/** Retries later with exponential backoff, or gives up (`failed`) after `maxAttempts`. */
export async function failJob(
  db: Db,
  job: Pick<JobRow, 'id' | 'attempts'> & Partial<Pick<JobRow, 'armed_attempts'>>,
  error: unknown,
  options: { maxAttempts?: number; now?: Date; backoffMs?: number } = {},
): Promise<void> {
  const now = options.now ?? new Date()
  const tries = job.attempts - (job.armed_attempts ?? 0)
  const giveUp = tries >= (options.maxAttempts ?? 8)
  const backoffMs = options.backoffMs ?? Math.min(60_000, 500 * 2 ** tries)
  await db
    .updateTable('jobs')
    .set({
      state: giveUp ? 'failed' : 'pending',
      run_at: new Date(now.getTime() + backoffMs),
      locked_until: null,
      last_error: error instanceof Error ? error.message : String(error),
      updated_at: now,
    })
    .where('id', '=', job.id)
    // Only the claim that ran: a job claimed again since (this one's lease ran out) is not touched.
    .where('attempts', '=', job.attempts)
    .execute()
}
