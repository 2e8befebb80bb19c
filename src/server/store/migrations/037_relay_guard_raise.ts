import { type Kysely, sql } from 'kysely'

/**
 * `caipay_relay_guard_or_raise`: the confirm's relay guard (payments/relayGuards.ts `guardRefusal`: the
 * payer cooled down, or what the payer's, then the credential's, failed and in-flight sends took in the
 * window leaves no room) as an expression of the statement that moves the payment (an EVM gasless
 * confirm in one statement, gateway/confirm.ts). It reads what `guardRefusal` reads, takes no lock and
 * writes nothing; a refusal raises SQLSTATE `CP429` with what it read as JSON in its detail (`guard`:
 * true; amounts as text: wei exceed a JSON number), rolling the whole statement back (the move, its
 * event and job included), and the server words the refusal from that detail as `guardRefusal` does.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION caipay_relay_guard_or_raise(
      p_chain text, p_credential text, p_payer text, p_subjects text[],
      p_credential_budget numeric, p_payer_budget numeric, p_since timestamptz, p_now timestamptz
    ) RETURNS boolean
    LANGUAGE plpgsql VOLATILE AS $fn$
    DECLARE
      cooled_subject text;
      cooled_kind text;
      cooled_until timestamptz;
      cooled_reason text;
      payer_used numeric;
      credential_used numeric;
    BEGIN
      SELECT c.subject, c.kind, c.until, c.reason INTO cooled_subject, cooled_kind, cooled_until, cooled_reason
        FROM payer_cooldowns c
        WHERE c.chain_id = p_chain AND c.subject = ANY (p_subjects) AND c.until > p_now
        ORDER BY c.until DESC LIMIT 1;
      SELECT coalesce(sum(g.amount), 0) INTO payer_used FROM executor_gas_charges g
        WHERE p_payer IS NOT NULL AND g.payer = p_payer AND g.chain_id = p_chain AND g.created_at > p_since;
      SELECT coalesce(sum(g.amount), 0) INTO credential_used FROM executor_gas_charges g
        WHERE g.credential_id = p_credential AND g.chain_id = p_chain AND g.created_at > p_since;
      IF cooled_subject IS NOT NULL OR (p_payer IS NOT NULL AND payer_used >= p_payer_budget)
          OR credential_used >= p_credential_budget THEN
        RAISE EXCEPTION 'caipay: relay guard refused'
          USING ERRCODE = 'CP429', DETAIL = json_build_object('guard', true, 'subject', cooled_subject,
            'kind', cooled_kind, 'until', cooled_until, 'reason', cooled_reason,
            'payer_used', payer_used::text, 'credential_used', credential_used::text)::text;
      END IF;
      RETURN true;
    END
    $fn$;
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP FUNCTION caipay_relay_guard_or_raise(text, text, text, text[], numeric, numeric, timestamptz, timestamptz);
  `.execute(db)
}
