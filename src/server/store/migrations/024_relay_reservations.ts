import { type Kysely, sql } from 'kysely'

/**
 * Executor fee reservations that a relay holds once, per payer as well as per credential
 * (payments/relayGuards.ts, docs/security-model.md):
 *
 * - one `reserved` row per (payment, chain): every send of the payment (the ERC-6492 deployment, the
 *   relay, its re-sends and fee bumps) raises that row, never adds another, and the payment's end turns
 *   it into what its sends really cost (or deletes it when the payer's money moved);
 * - `payer`: whose payment it was, so one payer's failed sends count against a per-payer budget before
 *   they reach the credential's;
 * - `landed`: what the payment's sends that already landed cost (an ERC-6492 deployment ahead of its
 *   relay), charged with the relay's own cost if the payment fails;
 * - `caipay_reserve_executor_fee`: the whole guard before a signature in one round trip: the payment's
 *   earlier on-chain revert, the payer's cool-down, both budgets under their locks, the reservation. A
 *   VOLATILE function: each statement after a lock reads a snapshot taken after it (one plain statement
 *   would read one taken before it, and race).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE executor_gas_charges
      ADD COLUMN payer text,
      ADD COLUMN landed numeric(78, 0) NOT NULL DEFAULT 0 CHECK (landed >= 0);
    DROP INDEX executor_gas_charges_payment;
    CREATE UNIQUE INDEX executor_gas_charges_reservation
      ON executor_gas_charges (payment_id, chain_id) WHERE state = 'reserved';
    CREATE INDEX executor_gas_charges_payer_window
      ON executor_gas_charges (payer, chain_id, created_at) WHERE payer IS NOT NULL;

    CREATE FUNCTION caipay_reserve_executor_fee(
      p_chain text, p_payment text, p_credential text, p_payer text, p_subjects text[],
      p_amount numeric, p_credential_budget numeric, p_payer_budget numeric,
      p_since timestamptz, p_now timestamptz
    ) RETURNS TABLE (refusal text, subject text, reason text, used numeric, budget numeric, until timestamptz)
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      held executor_gas_charges%ROWTYPE;
      cooled payer_cooldowns%ROWTYPE;
      v_credential text;
      v_payer text;
      wanted numeric;
      spent numeric;
    BEGIN
      IF EXISTS (SELECT 1 FROM evm_transactions t WHERE t.payment_id = p_payment
                 AND t.purpose IN ('relay', 'deploy') AND t.status = 'reverted') THEN
        RETURN QUERY SELECT 'reverted'::text, NULL::text, NULL::text, NULL::numeric, NULL::numeric, NULL::timestamptz;
        RETURN;
      END IF;
      SELECT * INTO cooled FROM payer_cooldowns c
        WHERE c.chain_id = p_chain AND c.subject = ANY (p_subjects) AND c.until > p_now
        ORDER BY c.until DESC LIMIT 1;
      IF FOUND THEN
        RETURN QUERY SELECT 'cooling_down'::text, cooled.subject, cooled.reason, NULL::numeric, NULL::numeric, cooled.until;
        RETURN;
      END IF;
      SELECT * INTO held FROM executor_gas_charges g
        WHERE g.payment_id = p_payment AND g.chain_id = p_chain AND g.state = 'reserved';
      v_credential := coalesce(p_credential, held.credential_id);
      v_payer := coalesce(p_payer, held.payer);
      IF v_credential IS NULL THEN
        RETURN QUERY SELECT NULL::text, NULL::text, NULL::text, NULL::numeric, NULL::numeric, NULL::timestamptz;
        RETURN;
      END IF;
      -- Always payer first, then credential: no two callers wait on each other's lock.
      IF v_payer IS NOT NULL THEN
        PERFORM pg_advisory_xact_lock(hashtextextended('caipay.gas.payer:' || p_chain || ':' || v_payer, 0));
      END IF;
      PERFORM pg_advisory_xact_lock(hashtextextended('caipay.gas:' || p_chain || ':' || v_credential, 0));
      SELECT * INTO held FROM executor_gas_charges g
        WHERE g.payment_id = p_payment AND g.chain_id = p_chain AND g.state = 'reserved';
      wanted := coalesce(held.landed, 0) + p_amount;
      IF held.id IS NOT NULL AND held.amount >= wanted THEN
        RETURN QUERY SELECT NULL::text, NULL::text, NULL::text, NULL::numeric, NULL::numeric, NULL::timestamptz;
        RETURN;
      END IF;
      IF v_payer IS NOT NULL AND p_payer_budget IS NOT NULL THEN
        SELECT coalesce(sum(g.amount), 0) INTO spent FROM executor_gas_charges g
          WHERE g.payer = v_payer AND g.chain_id = p_chain AND g.created_at > p_since
            AND g.id IS DISTINCT FROM held.id;
        IF spent + wanted > p_payer_budget THEN
          RETURN QUERY SELECT 'payer_budget'::text, NULL::text, NULL::text, spent, p_payer_budget, NULL::timestamptz;
          RETURN;
        END IF;
      END IF;
      SELECT coalesce(sum(g.amount), 0) INTO spent FROM executor_gas_charges g
        WHERE g.credential_id = v_credential AND g.chain_id = p_chain AND g.created_at > p_since
          AND g.id IS DISTINCT FROM held.id;
      IF spent + wanted > p_credential_budget THEN
        RETURN QUERY SELECT 'credential_budget'::text, NULL::text, NULL::text, spent, p_credential_budget, NULL::timestamptz;
        RETURN;
      END IF;
      IF held.id IS NULL THEN
        INSERT INTO executor_gas_charges
          (chain_id, credential_id, payer, payment_id, state, amount, created_at, updated_at)
          VALUES (p_chain, v_credential, v_payer, p_payment, 'reserved', wanted, p_now, p_now);
      ELSE
        UPDATE executor_gas_charges SET amount = wanted, updated_at = p_now WHERE id = held.id;
      END IF;
      RETURN QUERY SELECT NULL::text, NULL::text, NULL::text, NULL::numeric, NULL::numeric, NULL::timestamptz;
    END
    $fn$;
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP FUNCTION caipay_reserve_executor_fee(text, text, text, text, text[], numeric, numeric, numeric, timestamptz, timestamptz);
    DROP INDEX executor_gas_charges_payer_window;
    DROP INDEX executor_gas_charges_reservation;
    CREATE INDEX executor_gas_charges_payment ON executor_gas_charges (payment_id) WHERE state = 'reserved';
    ALTER TABLE executor_gas_charges DROP COLUMN landed, DROP COLUMN payer;
  `.execute(db)
}
