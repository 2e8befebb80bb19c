import { type Kysely, sql } from 'kysely'

/**
 * Push payments (docs/push-payments.md): a payment's `source` (pull, push, mandate); its one reference
 * key (Solana Pay), stable across options calls; every transfer found by that key, once per signature
 * and asset, with what it went to (the open payment, its success, or a deposit); and deposits, what no
 * open payment explains (underpaid at expiry, overpaid when refunded, late, paid twice), held in the
 * ledger as the partner's `deposits` until an operator refunds or assigns them.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE payments ADD COLUMN source text NOT NULL DEFAULT 'pull'
      CHECK (source IN ('pull', 'push', 'mandate'));

    CREATE TABLE push_references (
      payment_id text PRIMARY KEY REFERENCES payments(id) ON DELETE CASCADE,
      reference text NOT NULL UNIQUE,
      created_at timestamptz NOT NULL
    );

    CREATE TABLE deposits (
      id text PRIMARY KEY,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      partner_id text NOT NULL,
      merchant_id text NOT NULL,
      payment_id text REFERENCES payments(id) ON DELETE CASCADE,
      chain_id text NOT NULL,
      asset text NOT NULL,
      holder text NOT NULL,
      sender text,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      reason text NOT NULL CHECK (reason IN ('underpaid', 'overpaid', 'late', 'duplicate')),
      status text NOT NULL CHECK (status IN ('held', 'refunding', 'refunded', 'assigned')),
      tx_ids text[] NOT NULL,
      refund_tx_id text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX deposits_partner ON deposits (partner_id, created_at DESC, id DESC);
    CREATE INDEX deposits_payment ON deposits (payment_id) WHERE payment_id IS NOT NULL;

    CREATE TABLE push_transfers (
      signature text NOT NULL,
      asset text NOT NULL,
      payment_id text NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
      chain_id text NOT NULL,
      holder text NOT NULL,
      sender text,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      slot bigint NOT NULL,
      state text NOT NULL CHECK (state IN ('pending', 'paid', 'deposit')),
      deposit_id text REFERENCES deposits(id),
      found_at timestamptz NOT NULL,
      PRIMARY KEY (signature, asset)
    );
    CREATE INDEX push_transfers_payment ON push_transfers (payment_id, state);
    CREATE INDEX push_transfers_pending ON push_transfers (asset, holder) WHERE state = 'pending';

    ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_check;
    ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check
      CHECK (kind IN ('collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized', 'deposits'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_debit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_debit_kind_check CHECK (debit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized', 'deposits'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_credit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_credit_kind_check CHECK (credit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized', 'deposits'));

    ALTER TABLE solana_transactions ADD COLUMN deposit_id text REFERENCES deposits(id);
    ALTER TABLE solana_transactions DROP CONSTRAINT solana_transactions_purpose_check;
    ALTER TABLE solana_transactions ADD CONSTRAINT solana_transactions_purpose_check
      CHECK (purpose IN ('payment', 'settlement', 'refund', 'deposit')
        AND (refund_id IS NOT NULL) = (purpose = 'refund') AND (deposit_id IS NOT NULL) = (purpose = 'deposit'));
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE solana_transactions DROP CONSTRAINT solana_transactions_purpose_check;
    DELETE FROM solana_transactions WHERE deposit_id IS NOT NULL;
    ALTER TABLE solana_transactions DROP COLUMN deposit_id;
    ALTER TABLE solana_transactions ADD CONSTRAINT solana_transactions_purpose_check
      CHECK (purpose IN ('payment', 'settlement', 'refund') AND (refund_id IS NOT NULL) = (purpose = 'refund'));
    DROP TABLE push_transfers;
    DROP TABLE deposits;
    DROP TABLE push_references;
    ALTER TABLE payments DROP COLUMN source;
    ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_check;
    ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check
      CHECK (kind IN ('collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_debit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_debit_kind_check CHECK (debit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_credit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_credit_kind_check CHECK (credit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized'));
  `.execute(db)
}
