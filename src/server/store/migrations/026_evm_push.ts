import { type Kysely, sql } from 'kysely'

/**
 * EVM push payments (docs/push-payments.md): each payment's deposit address per asset (a counterfactual
 * CREATE2 forwarder) with the amount its EIP-681 link asks; every Transfer log into a deposit address
 * found at a confirmed block, until the executor's sweep has brought it to the collection address and it
 * is applied to its payment; how far each chain's logs are read. An executor transaction gets a `step`
 * where a payment can have several of one purpose: `sweep` (one per round of arrivals), `deposit` (one
 * per deposit sent back), and the `deploy` of the chain's forwarder factory.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE evm_transactions ADD COLUMN step text;
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund', 'sweep', 'deposit')
        AND (refund_id IS NOT NULL) = (purpose = 'refund')
        AND (step IS NOT NULL OR purpose NOT IN ('sweep', 'deposit')));

    CREATE TABLE evm_push_deposits (
      payment_id text NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
      asset text NOT NULL,
      chain_id text NOT NULL,
      address text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      created_at timestamptz NOT NULL,
      PRIMARY KEY (payment_id, asset)
    );
    CREATE INDEX evm_push_deposits_chain ON evm_push_deposits (chain_id, created_at);

    CREATE TABLE evm_push_transfers (
      log_id text PRIMARY KEY,
      payment_id text NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
      chain_id text NOT NULL,
      asset text NOT NULL,
      deposit_address text NOT NULL,
      sender text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      block bigint NOT NULL,
      log_index integer NOT NULL,
      holder text NOT NULL,
      state text NOT NULL CHECK (state IN ('found', 'applied')),
      found_at timestamptz NOT NULL
    );
    CREATE INDEX evm_push_transfers_found ON evm_push_transfers (payment_id, asset) WHERE state = 'found';
    CREATE INDEX evm_push_transfers_in_flight ON evm_push_transfers (asset, holder) WHERE state = 'found';

    CREATE TABLE evm_push_scans (
      chain_id text PRIMARY KEY,
      scanned_to bigint NOT NULL
    );
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE evm_push_scans;
    DROP TABLE evm_push_transfers;
    DROP TABLE evm_push_deposits;
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    DELETE FROM evm_transactions WHERE purpose IN ('sweep', 'deposit') OR step IS NOT NULL;
    ALTER TABLE evm_transactions DROP COLUMN step;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund') AND (refund_id IS NOT NULL) = (purpose = 'refund'));
  `.execute(db)
}
