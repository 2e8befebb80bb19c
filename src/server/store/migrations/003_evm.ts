import { type Kysely, sql } from 'kysely'

/**
 * Live EVM payments. `evm_transactions` records every transaction the executor signs BEFORE it is
 * broadcast, so a job that runs again after a crash finds its hash and never pays twice.
 * `evm_direct_claims` makes one buyer transaction pay at most one payment.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE evm_transactions (
      id bigserial PRIMARY KEY,
      payment_id text NOT NULL REFERENCES payments(id),
      purpose text NOT NULL CHECK (purpose IN ('relay', 'settle')),
      chain_id text NOT NULL,
      sender text NOT NULL,
      nonce bigint NOT NULL,
      hash text NOT NULL UNIQUE,
      raw text NOT NULL,
      status text NOT NULL CHECK (status IN ('sent', 'succeeded', 'reverted', 'dropped')),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX evm_transactions_payment ON evm_transactions (payment_id, purpose, id);

    CREATE TABLE evm_direct_claims (
      chain_id text NOT NULL,
      tx_hash text NOT NULL,
      payment_id text NOT NULL UNIQUE REFERENCES payments(id),
      created_at timestamptz NOT NULL,
      PRIMARY KEY (chain_id, tx_hash)
    );
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE evm_direct_claims, evm_transactions;`.execute(db)
}
