import { type Kysely, sql } from 'kysely'

/**
 * A job queued again for new work (jobs/queue.ts `rearmJob`) keeps counting its claims in `attempts`: it
 * is the job's fencing generation, and a generation that went back could match a paused runner's old
 * claim again (docs/live-mode.md, "Fences"). `armed_attempts` is where the count stood when the job was
 * last queued again, so its retries and give-up count from there.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs ADD COLUMN armed_attempts integer NOT NULL DEFAULT 0;`.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs DROP COLUMN armed_attempts;`.execute(db)
}
