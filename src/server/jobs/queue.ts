import { sql } from 'kysely'
import { currentTraceparent } from '../metrics/tracing.js'
import type { Db } from '../store/db.js'
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
  await db
    .insertInto('jobs')
    .values({
      kind: job.kind,
      payment_id: job.paymentId,
      run_at: job.runAt ?? now,
      locked_until: null,
      payload: JSON.stringify(job.payload ?? {}),
      result: null,
      last_error: null,
      // The step continues the enqueuer's trace (null when tracing is off).
      trace_parent: currentTraceparent(),
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) =>
      oc
        .columns(['kind', 'payment_id'])
        .where('delivery_id', 'is', null)
        .where('refund_id', 'is', null)
        .doNothing(),
    )
    .execute()
  // Delivered when the enqueueing transaction commits: listening runners start at once (jobs/notify.ts).
  await sql`SELECT pg_notify(${jobsChannel}, ${job.kind})`.execute(db)
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
export async function completeJob(
  db: Db,
  job: Pick<JobRow, 'id' | 'attempts'>,
  result: unknown,
  now = new Date(),
): Promise<void> {
  await db
    .updateTable('jobs')
    .set({ state: 'succeeded', result: JSON.stringify(result ?? null), locked_until: null, updated_at: now })
    .where('id', '=', job.id)
    .where('attempts', '=', job.attempts)
    .execute()
}

/** Retries later with exponential backoff, or gives up (`failed`) after `maxAttempts`. */
export async function failJob(
  db: Db,
  job: Pick<JobRow, 'id' | 'attempts'>,
  error: unknown,
  options: { maxAttempts?: number; now?: Date; backoffMs?: number } = {},
): Promise<void> {
  const now = options.now ?? new Date()
  const giveUp = job.attempts >= (options.maxAttempts ?? 8)
  const backoffMs = options.backoffMs ?? Math.min(60_000, 500 * 2 ** job.attempts)
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
