import { type Kysely, sql } from 'kysely'

/**
 * What operators observe (docs/operations.md): `jobs.trace_parent`, the W3C `traceparent` of whatever
 * enqueued a job, so the job's step continues the request's trace (a payment's confirm, its relay and
 * the settlement after it are one trace; null when tracing is off); and a partial index on pending
 * refunds, which every metrics scrape sums (`caipay_refunds_pending_amount`) without reading the rest.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE jobs ADD COLUMN trace_parent text;
    CREATE INDEX refunds_pending ON refunds (asset) WHERE status = 'pending';
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX refunds_pending;
    ALTER TABLE jobs DROP COLUMN trace_parent;
  `.execute(db)
}
