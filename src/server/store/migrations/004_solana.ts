import { type Kysely, sql } from 'kysely'

/**
 * Live Solana: every transaction the service broadcasts (a buyer's payment, a settlement), recorded
 * before it is sent, so a worker that crashes mid-send finds the exact bytes and signature again and
 * never signs a second transfer while the first might still land.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE solana_transactions (
      signature text PRIMARY KEY,
      payment_id text NOT NULL REFERENCES payments(id),
      purpose text NOT NULL CHECK (purpose IN ('payment', 'settlement')),
      chain_id text NOT NULL,
      raw text NOT NULL,
      blockhash text NOT NULL,
      last_valid_block_height bigint NOT NULL,
      state text NOT NULL CHECK (state IN ('pending', 'landed', 'failed', 'dropped')),
      error text,
      send_count integer NOT NULL DEFAULT 0,
      first_sent_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX solana_transactions_payment ON solana_transactions (payment_id, purpose, created_at);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE solana_transactions;`.execute(db)
}
