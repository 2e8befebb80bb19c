import { type Kysely, sql } from 'kysely'

/**
 * Refunds that move money. A refund is recorded `pending` and its own job sends the payment's asset back
 * from the collection address (`jobs.refund_id`: a payment's refunds get one job each, where its other
 * jobs stay one per kind). Its transactions are recorded like relays' and settlements' (`purpose`
 * `refund`, `refund_id`), before they are sent.
 *
 * What a payment can still refund is decided under its row lock (refunds/create.ts); the trigger below
 * refuses, whoever writes, refunds that would add up to more than was paid, so no code path can get past
 * it. `settlement_amounts` fixes what a settlement pays the merchant (the collected amount less the
 * refunds recorded before it): a refund recorded after that is paid from the collection address's float.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE refunds (
      id text PRIMARY KEY,
      payment_id text NOT NULL REFERENCES payments(id) ON DELETE CASCADE,
      partner_id text NOT NULL REFERENCES partners(id),
      merchant_id text NOT NULL REFERENCES merchants(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      amount_unit text NOT NULL,
      amount_value numeric(78, 0) NOT NULL CHECK (amount_value > 0),
      asset text,
      asset_value numeric(78, 0) CHECK (asset_value > 0),
      destination text,
      reason text,
      paid_from text NOT NULL CHECK (paid_from IN ('collected', 'float')),
      status text NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
      failure_code text,
      tx_id text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      succeeded_at timestamptz,
      failed_at timestamptz
    );
    CREATE INDEX refunds_payment_page ON refunds (payment_id, created_at DESC, id DESC);
    CREATE INDEX refunds_merchant_page ON refunds (merchant_id, created_at DESC, id DESC);

    CREATE FUNCTION caipay_refunds_within_payment() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      paid numeric;
      refunded numeric;
    BEGIN
      SELECT amount_value INTO paid FROM payments WHERE id = NEW.payment_id FOR UPDATE;
      SELECT coalesce(sum(amount_value), 0) INTO refunded FROM refunds
        WHERE payment_id = NEW.payment_id AND status <> 'failed';
      IF refunded > paid THEN
        RAISE EXCEPTION 'refunds of payment % add up to % of %', NEW.payment_id, refunded, paid
          USING ERRCODE = 'check_violation';
      END IF;
      RETURN NULL;
    END
    $$;
    CREATE CONSTRAINT TRIGGER refunds_within_payment AFTER INSERT OR UPDATE ON refunds
      FOR EACH ROW EXECUTE FUNCTION caipay_refunds_within_payment();

    CREATE TABLE settlement_amounts (
      payment_id text PRIMARY KEY REFERENCES payments(id) ON DELETE CASCADE,
      value numeric(78, 0) NOT NULL CHECK (value >= 0),
      created_at timestamptz NOT NULL
    );

    ALTER TABLE jobs ADD COLUMN refund_id text REFERENCES refunds(id) ON DELETE CASCADE;
    DROP INDEX jobs_payment_kind;
    CREATE UNIQUE INDEX jobs_payment_kind ON jobs (kind, payment_id)
      WHERE delivery_id IS NULL AND refund_id IS NULL;
    CREATE UNIQUE INDEX jobs_refund ON jobs (refund_id) WHERE refund_id IS NOT NULL;

    ALTER TABLE evm_transactions ADD COLUMN refund_id text REFERENCES refunds(id);
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund') AND (refund_id IS NOT NULL) = (purpose = 'refund'));
    CREATE INDEX evm_transactions_refund ON evm_transactions (refund_id, id) WHERE refund_id IS NOT NULL;

    ALTER TABLE solana_transactions ADD COLUMN refund_id text REFERENCES refunds(id);
    ALTER TABLE solana_transactions DROP CONSTRAINT solana_transactions_purpose_check;
    ALTER TABLE solana_transactions ADD CONSTRAINT solana_transactions_purpose_check
      CHECK (purpose IN ('payment', 'settlement', 'refund') AND (refund_id IS NOT NULL) = (purpose = 'refund'));
    CREATE INDEX solana_transactions_refund ON solana_transactions (refund_id, created_at)
      WHERE refund_id IS NOT NULL;
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX solana_transactions_refund;
    ALTER TABLE solana_transactions DROP CONSTRAINT solana_transactions_purpose_check;
    DELETE FROM solana_transactions WHERE refund_id IS NOT NULL;
    ALTER TABLE solana_transactions DROP COLUMN refund_id;
    ALTER TABLE solana_transactions ADD CONSTRAINT solana_transactions_purpose_check
      CHECK (purpose IN ('payment', 'settlement'));
    DROP INDEX evm_transactions_refund;
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    DELETE FROM evm_transactions WHERE refund_id IS NOT NULL;
    ALTER TABLE evm_transactions DROP COLUMN refund_id;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy'));
    DELETE FROM jobs WHERE refund_id IS NOT NULL;
    DROP INDEX jobs_refund;
    DROP INDEX jobs_payment_kind;
    ALTER TABLE jobs DROP COLUMN refund_id;
    CREATE UNIQUE INDEX jobs_payment_kind ON jobs (kind, payment_id) WHERE delivery_id IS NULL;
    DROP TABLE settlement_amounts;
    DROP TRIGGER refunds_within_payment ON refunds;
    DROP FUNCTION caipay_refunds_within_payment();
    DROP TABLE refunds;
  `.execute(db)
}
