import { type Kysely, sql } from 'kysely'

/**
 * What a confirm on the WalletConnect Pay mount (`/wcp`) submitted, per payment: that SDK retries a
 * confirm on a 5xx, a 429 or a lost connection without an Idempotency-Key, so an identical repeat
 * (same option, same results) answers the payment's current status instead of `invalid_state`.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE wcp_confirmations (
      payment_id text PRIMARY KEY REFERENCES payments(id),
      option_id text NOT NULL,
      results_digest text NOT NULL,
      created_at timestamptz NOT NULL
    );
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE wcp_confirmations`.execute(db)
}
