import { type Kysely, sql } from 'kysely'

/**
 * `caipay_reserve_executor_fees`: the relay guard (migration 024's `caipay_reserve_executor_fee`) for
 * every relay of one executor key's group, in the sender's database transaction (chains/evm/sender.ts),
 * under its key lock: one call per group where there was one per relay, and each reservation committed
 * with its relay's record. Each relay's verdict is the single function's, in the group's order, tagged
 * with its position (`ord`, from 1). Every payer's lock, then every credential's, is taken first, each in
 * one sorted order: the single function takes a payer's then a credential's, so a group that took a
 * credential's and then wanted a payer's could wait on a single call waiting on it.
 *
 * `caipay_reserve_executor_fee_or_raise`: the single function for a statement that must not go on when it
 * refuses (a Solana confirm in one statement, gateway/confirm.ts): a refusal raises SQLSTATE `CP429` with
 * the verdict as JSON in its detail (amounts as text: wei exceed a JSON number), rolling the whole
 * statement back (the payment's move included).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION caipay_reserve_executor_fees(
      p_chain text, p_payments text[], p_credentials text[], p_payers text[], p_subjects jsonb,
      p_amounts numeric[], p_credential_budgets numeric[], p_payer_budgets numeric[],
      p_since timestamptz[], p_now timestamptz
    ) RETURNS TABLE (
      ord integer, refusal text, subject text, reason text, used numeric, budget numeric, until timestamptz
    )
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      k text;
      i integer;
    BEGIN
      FOR k IN
        SELECT DISTINCT coalesce(r.payer, g.payer)
          FROM unnest(p_payments, p_payers) AS r(payment, payer)
          LEFT JOIN executor_gas_charges g
            ON g.payment_id = r.payment AND g.chain_id = p_chain AND g.state = 'reserved'
          WHERE coalesce(r.payer, g.payer) IS NOT NULL ORDER BY 1
      LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('caipay.gas.payer:' || p_chain || ':' || k, 0));
      END LOOP;
      FOR k IN
        SELECT DISTINCT coalesce(r.credential, g.credential_id)
          FROM unnest(p_payments, p_credentials) AS r(payment, credential)
          LEFT JOIN executor_gas_charges g
            ON g.payment_id = r.payment AND g.chain_id = p_chain AND g.state = 'reserved'
          WHERE coalesce(r.credential, g.credential_id) IS NOT NULL ORDER BY 1
      LOOP
        PERFORM pg_advisory_xact_lock(hashtextextended('caipay.gas:' || p_chain || ':' || k, 0));
      END LOOP;
      FOR i IN 1 .. coalesce(array_length(p_payments, 1), 0) LOOP
        RETURN QUERY SELECT i, f.* FROM caipay_reserve_executor_fee(
          p_chain, p_payments[i], p_credentials[i], p_payers[i],
          ARRAY(SELECT jsonb_array_elements_text(p_subjects -> (i - 1))),
          p_amounts[i], p_credential_budgets[i], p_payer_budgets[i], p_since[i], p_now) f;
      END LOOP;
    END
    $fn$;

    CREATE FUNCTION caipay_reserve_executor_fee_or_raise(
      p_chain text, p_payment text, p_credential text, p_payer text, p_subjects text[],
      p_amount numeric, p_credential_budget numeric, p_payer_budget numeric,
      p_since timestamptz, p_now timestamptz
    ) RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      verdict record;
    BEGIN
      SELECT * INTO verdict FROM caipay_reserve_executor_fee(p_chain, p_payment, p_credential, p_payer,
        p_subjects, p_amount, p_credential_budget, p_payer_budget, p_since, p_now);
      IF verdict.refusal IS NOT NULL THEN
        RAISE EXCEPTION 'caipay: executor fee reservation refused (%)', verdict.refusal
          USING ERRCODE = 'CP429', DETAIL = json_build_object('refusal', verdict.refusal,
            'subject', verdict.subject, 'reason', verdict.reason, 'used', verdict.used::text,
            'budget', verdict.budget::text, 'until', verdict.until)::text;
      END IF;
      RETURN true;
    END
    $fn$;
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP FUNCTION caipay_reserve_executor_fee_or_raise(text, text, text, text, text[], numeric, numeric, numeric, timestamptz, timestamptz);
    DROP FUNCTION caipay_reserve_executor_fees(text, text[], text[], text[], jsonb, numeric[], numeric[], numeric[], timestamptz[], timestamptz);
  `.execute(db)
}
