import { type Kysely, sql } from 'kysely'

/**
 * The ledger (docs/live-mode.md, "The ledger"): every unit of a token the service holds, as double-entry
 * accounts per (mode, asset, holding address). An entry is a transfer of `amount` from one account to
 * another of the same book, so every entry balances by construction; entries are append-only (the
 * trigger below refuses UPDATE and DELETE). Stored balances are kept by a statement-level trigger, one
 * upsert per account per statement, and a CHECK refuses any stored balance below zero: an entry that
 * would take a merchant's collected or settling balance, a float, refunds owed or fees below zero fails
 * with the statement that wrote it. The outside world (`world`) and operator adjustments are the
 * accounts money comes from and goes to: their balances are not stored (no hot row every payment would
 * lock) and are the sums of their entries.
 *
 * A flow writes each entry once: `(flow, payment_id, refund_id, batch_id, debit, credit)` is unique, so a
 * step that runs again (a job after a crash) writes nothing twice (ON CONFLICT DO NOTHING).
 *
 * `ledger_scans` is how far the top-up scan read each holding address's incoming transfers;
 * `ledger_differences` what reconciliation found, until an operator acknowledges it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE ledger_accounts (
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      asset text NOT NULL,
      holder text NOT NULL,
      kind text NOT NULL CHECK (kind IN ('collected', 'settling', 'refunds', 'float', 'fees', 'unallocated')),
      owner text NOT NULL,
      balance numeric(78, 0) NOT NULL CHECK (balance >= 0),
      PRIMARY KEY (mode, asset, holder, kind, owner)
    );

    CREATE TABLE ledger_entries (
      id bigserial PRIMARY KEY,
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      asset text NOT NULL,
      holder text NOT NULL,
      debit_kind text NOT NULL,
      debit_owner text NOT NULL,
      credit_kind text NOT NULL,
      credit_owner text NOT NULL,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      flow text NOT NULL,
      payment_id text,
      refund_id text,
      batch_id bigint,
      tx_id text,
      created_at timestamptz NOT NULL,
      CHECK ((debit_kind, debit_owner) IS DISTINCT FROM (credit_kind, credit_owner)),
      CHECK (debit_kind IN ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated')),
      CHECK (credit_kind IN ('world', 'adjustment', 'collected', 'settling', 'refunds', 'float', 'fees', 'unallocated'))
    );
    CREATE UNIQUE INDEX ledger_entries_once ON ledger_entries
      (flow, coalesce(payment_id, ''), coalesce(refund_id, ''), coalesce(batch_id, 0), coalesce(tx_id, ''),
        debit_kind, debit_owner, credit_kind, credit_owner);
    CREATE INDEX ledger_entries_payment ON ledger_entries (payment_id) WHERE payment_id IS NOT NULL;
    CREATE INDEX ledger_entries_refund ON ledger_entries (refund_id) WHERE refund_id IS NOT NULL;
    CREATE INDEX ledger_entries_batch ON ledger_entries (batch_id) WHERE batch_id IS NOT NULL;

    CREATE FUNCTION caipay_ledger_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      RAISE EXCEPTION 'ledger entries are append-only: % refused', TG_OP USING ERRCODE = 'insufficient_privilege';
    END $$;
    CREATE TRIGGER ledger_entries_append_only BEFORE UPDATE OR DELETE ON ledger_entries
      FOR EACH ROW EXECUTE FUNCTION caipay_ledger_append_only();
    CREATE TRIGGER ledger_entries_no_truncate BEFORE TRUNCATE ON ledger_entries
      FOR EACH STATEMENT EXECUTE FUNCTION caipay_ledger_append_only();

    -- A CHECK is evaluated on the row an INSERT proposes before ON CONFLICT looks for the existing one, so
    -- an upsert cannot carry a debit: missing accounts are created at zero, the statement's accounts are
    -- locked in one order (no two writers wait on each other in a cycle), then each moves by its net.
    CREATE FUNCTION caipay_ledger_post() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO ledger_accounts (mode, asset, holder, kind, owner, balance)
      SELECT mode, asset, holder, kind, owner, 0 FROM (
        SELECT mode, asset, holder, kind, owner, sum(delta) AS delta FROM (
          SELECT mode, asset, holder, credit_kind AS kind, credit_owner AS owner, amount AS delta FROM posted
          UNION ALL
          SELECT mode, asset, holder, debit_kind, debit_owner, -amount FROM posted
        ) AS sides
        WHERE kind NOT IN ('world', 'adjustment')
        GROUP BY mode, asset, holder, kind, owner
      ) AS m
      ORDER BY mode, asset, holder, kind, owner
      ON CONFLICT DO NOTHING;
      PERFORM 1 FROM ledger_accounts AS a JOIN (
        SELECT mode, asset, holder, kind, owner, sum(delta) AS delta FROM (
          SELECT mode, asset, holder, credit_kind AS kind, credit_owner AS owner, amount AS delta FROM posted
          UNION ALL
          SELECT mode, asset, holder, debit_kind, debit_owner, -amount FROM posted
        ) AS sides
        WHERE kind NOT IN ('world', 'adjustment')
        GROUP BY mode, asset, holder, kind, owner
      ) AS m USING (mode, asset, holder, kind, owner)
      ORDER BY a.mode, a.asset, a.holder, a.kind, a.owner FOR UPDATE OF a;
      UPDATE ledger_accounts AS a SET balance = a.balance + m.delta FROM (
        SELECT mode, asset, holder, kind, owner, sum(delta) AS delta FROM (
          SELECT mode, asset, holder, credit_kind AS kind, credit_owner AS owner, amount AS delta FROM posted
          UNION ALL
          SELECT mode, asset, holder, debit_kind, debit_owner, -amount FROM posted
        ) AS sides
        WHERE kind NOT IN ('world', 'adjustment')
        GROUP BY mode, asset, holder, kind, owner
      ) AS m
      WHERE (a.mode, a.asset, a.holder, a.kind, a.owner) = (m.mode, m.asset, m.holder, m.kind, m.owner)
        AND m.delta <> 0;
      RETURN NULL;
    END $$;
    CREATE TRIGGER ledger_entries_post AFTER INSERT ON ledger_entries
      REFERENCING NEW TABLE AS posted FOR EACH STATEMENT EXECUTE FUNCTION caipay_ledger_post();

    CREATE TABLE ledger_scans (
      holder text NOT NULL,
      asset text NOT NULL,
      block numeric(78, 0) NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (holder, asset)
    );

    CREATE TABLE ledger_differences (
      id bigserial PRIMARY KEY,
      mode text NOT NULL,
      asset text NOT NULL,
      holder text NOT NULL,
      block numeric(78, 0) NOT NULL,
      chain_balance numeric(78, 0) NOT NULL,
      ledger_balance numeric(78, 0) NOT NULL,
      in_flight_out numeric(78, 0) NOT NULL,
      in_flight_in numeric(78, 0) NOT NULL,
      difference numeric(78, 0) NOT NULL,
      detected_at timestamptz NOT NULL,
      acknowledged_at timestamptz,
      acknowledged_note text
    );
    CREATE UNIQUE INDEX ledger_differences_open ON ledger_differences (holder, asset) WHERE acknowledged_at IS NULL;

    -- A refund's entries follow its row, whoever writes it: asked from the collected funds, the merchant's
    -- collected balance at the payment's holding address (its collection entry's) becomes refunds owed at
    -- once; asked from the float, the refund job reserves the float before it signs (ledger/refunds.ts).
    -- Succeeded, what is owed leaves for the world; failed (nothing was sent), it goes back where it came.
    CREATE FUNCTION caipay_ledger_refund() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
          amount, flow, payment_id, refund_id, created_at)
        SELECT e.mode, e.asset, e.holder, 'collected', NEW.merchant_id, 'refunds', NEW.merchant_id,
          NEW.asset_value, 'refund.requested', NEW.payment_id, NEW.id, NEW.created_at
        FROM ledger_entries e
        WHERE e.payment_id = NEW.payment_id AND e.flow = 'payment.collected' AND e.credit_kind = 'collected'
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
    CREATE TRIGGER refunds_ledger_requested AFTER INSERT ON refunds FOR EACH ROW
      WHEN (NEW.mode = 'live' AND NEW.paid_from = 'collected' AND NEW.asset_value IS NOT NULL)
      EXECUTE FUNCTION caipay_ledger_refund();
    CREATE TRIGGER refunds_ledger_finished AFTER UPDATE OF status ON refunds FOR EACH ROW
      WHEN (NEW.mode = 'live' AND OLD.status = 'pending' AND NEW.status IN ('succeeded', 'failed'))
      EXECUTE FUNCTION caipay_ledger_refund();

    ALTER TABLE settlement_items ADD COLUMN fee numeric(78, 0) NOT NULL DEFAULT 0 CHECK (fee >= 0);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE settlement_items DROP COLUMN fee;
    DROP TRIGGER refunds_ledger_finished ON refunds;
    DROP TRIGGER refunds_ledger_requested ON refunds;
    DROP FUNCTION caipay_ledger_refund();
    DROP TABLE ledger_differences, ledger_scans;
    DROP TABLE ledger_entries;
    DROP FUNCTION caipay_ledger_post();
    DROP FUNCTION caipay_ledger_append_only();
    DROP TABLE ledger_accounts;
  `.execute(db)
}
