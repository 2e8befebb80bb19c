import { type Kysely, sql } from 'kysely'

/**
 * The W3C `traceparent` of whatever enqueued a job (docs/operations.md, "Traces"): the job's step
 * continues the request's trace, so a payment's confirm, its relay and the settlement after it are one
 * trace. Null when tracing is off (nothing is written then).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs ADD COLUMN trace_parent text`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs DROP COLUMN trace_parent`.execute(db)
}
