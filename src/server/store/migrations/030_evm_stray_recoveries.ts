import { type Kysely, sql } from 'kysely'

/**
 * Stray money at EVM deposit addresses (docs/push-payments.md, "Stray money"): native ETH, or a token no
 * push scan watches for the payment on that chain, that an operator moves out of the payment's forwarder
 * with `caipay deposits recover`. Not in the ledger (never at a holder it carries), so each recovery is a
 * row: what, where, to whom, and once moved, how much and by which transaction. The executor transaction
 * gets purpose `recover`, its `step` the recovery's id.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund', 'sweep', 'deposit', 'permit', 'charge', 'recover')
        AND (refund_id IS NOT NULL) = (purpose = 'refund')
        AND (step IS NOT NULL OR purpose NOT IN ('sweep', 'deposit', 'recover')));

    CREATE TABLE evm_stray_recoveries (
      id text PRIMARY KEY,
      payment_id text NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
      chain_id text NOT NULL,
      deposit_address text NOT NULL,
      asset text NOT NULL,
      to_address text NOT NULL,
      status text NOT NULL CHECK (status IN ('queued', 'moved', 'failed')),
      amount numeric(78, 0),
      tx_hash text,
      error text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE UNIQUE INDEX evm_stray_recoveries_queued ON evm_stray_recoveries (payment_id, chain_id, asset)
      WHERE status = 'queued';
    CREATE INDEX evm_stray_recoveries_created ON evm_stray_recoveries (created_at);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE evm_stray_recoveries;
    DELETE FROM evm_transactions WHERE purpose = 'recover';
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund', 'sweep', 'deposit', 'permit', 'charge')
        AND (refund_id IS NOT NULL) = (purpose = 'refund')
        AND (step IS NOT NULL OR purpose NOT IN ('sweep', 'deposit')));
  `.execute(db)
}
