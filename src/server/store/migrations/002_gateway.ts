import { type Kysely, sql } from 'kysely'

/**
 * Wallet gateway: the options quoted to wallets (so fetch and confirm can check what was offered and
 * built) and the data collected by the hosted form.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE payment_options (
      id text PRIMARY KEY,
      payment_id text NOT NULL REFERENCES payments(id),
      chain_id text NOT NULL,
      kind text NOT NULL,
      account text NOT NULL,
      asset text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      eta_s integer NOT NULL,
      actions jsonb NOT NULL,
      state jsonb,
      built jsonb,
      expires_at timestamptz NOT NULL,
      collect_data_required boolean NOT NULL,
      collect_data_completed_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX payment_options_payment ON payment_options (payment_id, created_at);

    CREATE TABLE collected_data (
      option_id text PRIMARY KEY REFERENCES payment_options(id),
      payment_id text NOT NULL REFERENCES payments(id),
      fields jsonb NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX collected_data_payment ON collected_data (payment_id);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE collected_data, payment_options;`.execute(db)
}
