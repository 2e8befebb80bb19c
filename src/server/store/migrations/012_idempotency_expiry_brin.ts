import { type Kysely, sql } from 'kysely'

/**
 * The expiry sweep's index on `idempotency_keys` becomes a BRIN index. Keys are written in time order
 * with `expires_at` = now + a fixed TTL, so the table is physically sorted by expiry and a block-range
 * summary serves the sweep's `expires_at < now` as well as a B-tree did; but a B-tree took one more index
 * insert in every statement that stores an answer (each creation or confirm under an Idempotency-Key),
 * while a BRIN index is only touched when a block range fills. From PostgreSQL 16 on, a BRIN column also
 * no longer makes re-storing an expired key's answer a non-HOT update.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX idempotency_keys_expiry;
    CREATE INDEX idempotency_keys_expiry ON idempotency_keys USING brin (expires_at);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX idempotency_keys_expiry;
    CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
  `.execute(db)
}
