import { type Kysely, sql } from 'kysely'

/**
 * The payments domain layer's outbox: every state change of a payment bumps `payment_state_version`
 * and writes one `payment_events` row in the same statement, so an event exists if and only if its
 * change committed. The row keeps the payment as it was at that version (`snapshot`), which is what
 * the event's payload is rendered from; the stage timestamps are what the payload's stage objects show.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE payments
      ADD COLUMN payment_state_version integer NOT NULL DEFAULT 0,
      ADD COLUMN processing_at timestamptz,
      ADD COLUMN succeeded_at timestamptz,
      ADD COLUMN failed_at timestamptz,
      ADD COLUMN expired_at timestamptz,
      ADD COLUMN settled_at timestamptz,
      ADD COLUMN settlement_value numeric(78, 0);

    CREATE TABLE payment_events (
      id text PRIMARY KEY DEFAULT ('evt_' || replace(gen_random_uuid()::text, '-', '')),
      -- An operator deleting a payment by hand takes its events along.
      payment_id text NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
      type text NOT NULL,
      payment_state_version integer NOT NULL,
      snapshot jsonb NOT NULL,
      created_at timestamptz NOT NULL,
      dispatched_at timestamptz,
      UNIQUE (payment_id, payment_state_version)
    );
    -- The dispatcher only looks at events it has not turned into deliveries yet.
    CREATE INDEX payment_events_pending ON payment_events (created_at) WHERE dispatched_at IS NULL;
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE payment_events;
    ALTER TABLE payments
      DROP COLUMN payment_state_version,
      DROP COLUMN processing_at,
      DROP COLUMN succeeded_at,
      DROP COLUMN failed_at,
      DROP COLUMN expired_at,
      DROP COLUMN settled_at,
      DROP COLUMN settlement_value;
  `.execute(db)
}
