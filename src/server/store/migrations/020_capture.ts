import { type Kysely, sql } from 'kysely'

/**
 * Authorize now, capture later (docs/capture.md). A payment made with `capture: "manual"` is held once
 * paid: `capture_status` authorized, its money in the ledger's new per-merchant `authorized` account at
 * the collection address and no settlement item, until a capture (authorized -> collected, settled by the
 * normal batches; the rest refunded), a void or the expiry at `capture_by` (everything refunded).
 *
 * `capture_plan` is what the capture settles, fixed when the payment succeeded (the settlement item it
 * would have joined, or the float when the merchant has no destination for the asset; test mode: the
 * asset it settles at once). A refund can be paid from the authorized funds (`paid_from` authorized):
 * the refunds trigger then moves authorized -> refunds, and back to authorized if it fails.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE payments
      ADD COLUMN capture_method text NOT NULL DEFAULT 'automatic' CHECK (capture_method IN ('automatic', 'manual')),
      ADD COLUMN capture_by timestamptz,
      ADD COLUMN capture_status text
        CHECK (capture_status IN ('authorized', 'captured', 'partially_captured', 'voided', 'expired')),
      ADD COLUMN captured_value numeric(78, 0) CHECK (captured_value > 0),
      ADD COLUMN capture_plan jsonb,
      ADD COLUMN captured_at timestamptz,
      ADD COLUMN voided_at timestamptz,
      ADD CONSTRAINT payments_capture_by_manual CHECK ((capture_by IS NOT NULL) = (capture_method = 'manual')),
      ADD CONSTRAINT payments_capture_status_manual CHECK (capture_status IS NULL OR capture_method = 'manual');

    ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_check;
    ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check
      CHECK (kind IN ('collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_debit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_debit_kind_check CHECK (debit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_credit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_credit_kind_check CHECK (credit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated', 'authorized'));

    ALTER TABLE refunds DROP CONSTRAINT refunds_paid_from_check;
    ALTER TABLE refunds ADD CONSTRAINT refunds_paid_from_check
      CHECK (paid_from IN ('collected', 'float', 'authorized'));

    -- As 018's, with refunds of the authorized funds: from the payment's authorized balance at its holding
    -- address (its payment.authorized entry's).
    CREATE OR REPLACE FUNCTION caipay_ledger_refund() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
          amount, flow, payment_id, refund_id, created_at)
        SELECT e.mode, e.asset, e.holder, NEW.paid_from, NEW.merchant_id, 'refunds', NEW.merchant_id,
          NEW.asset_value, 'refund.requested', NEW.payment_id, NEW.id, NEW.created_at
        FROM ledger_entries e
        WHERE e.payment_id = NEW.payment_id AND e.credit_kind = NEW.paid_from
          AND e.flow = CASE WHEN NEW.paid_from = 'authorized' THEN 'payment.authorized' ELSE 'payment.collected' END
        LIMIT 1;
      ELSE
        INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
          amount, flow, payment_id, refund_id, tx_id, created_at)
        SELECT e.mode, e.asset, e.holder, 'refunds', e.credit_owner,
          CASE WHEN NEW.status = 'succeeded' THEN 'world' ELSE e.debit_kind END,
          CASE WHEN NEW.status = 'succeeded' THEN '' ELSE e.debit_owner END,
          e.amount, 'refund.' || NEW.status, NEW.payment_id, NEW.id, NEW.tx_id, NEW.updated_at
        FROM ledger_entries e
        WHERE e.refund_id = NEW.id AND e.flow IN ('refund.requested', 'refund.reserved');
      END IF;
      RETURN NULL;
    END $$;
    DROP TRIGGER refunds_ledger_requested ON refunds;
    CREATE TRIGGER refunds_ledger_requested AFTER INSERT ON refunds FOR EACH ROW
      WHEN (NEW.mode = 'live' AND NEW.paid_from IN ('collected', 'authorized') AND NEW.asset_value IS NOT NULL)
      EXECUTE FUNCTION caipay_ledger_refund();
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER refunds_ledger_requested ON refunds;
    CREATE TRIGGER refunds_ledger_requested AFTER INSERT ON refunds FOR EACH ROW
      WHEN (NEW.mode = 'live' AND NEW.paid_from = 'collected' AND NEW.asset_value IS NOT NULL)
      EXECUTE FUNCTION caipay_ledger_refund();
    ALTER TABLE refunds DROP CONSTRAINT refunds_paid_from_check;
    ALTER TABLE refunds ADD CONSTRAINT refunds_paid_from_check CHECK (paid_from IN ('collected', 'float'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_credit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_credit_kind_check CHECK (credit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated'));
    ALTER TABLE ledger_entries DROP CONSTRAINT ledger_entries_debit_kind_check;
    ALTER TABLE ledger_entries ADD CONSTRAINT ledger_entries_debit_kind_check CHECK (debit_kind IN
      ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated'));
    ALTER TABLE ledger_accounts DROP CONSTRAINT ledger_accounts_kind_check;
    ALTER TABLE ledger_accounts ADD CONSTRAINT ledger_accounts_kind_check
      CHECK (kind IN ('collected', 'settling', 'refunds', 'float', 'fees', 'unallocated'));
    ALTER TABLE payments DROP COLUMN voided_at, DROP COLUMN captured_at, DROP COLUMN capture_plan,
      DROP COLUMN captured_value, DROP COLUMN capture_status, DROP COLUMN capture_by, DROP COLUMN capture_method;
  `.execute(db)
}
