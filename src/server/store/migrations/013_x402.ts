import { type Kysely, sql } from 'kysely'

/**
 * Payments settled through the x402 facilitator (`/x402/settle`), one row per payment. `key` is what the
 * chain lets pay only once (an EIP-3009 authorization's token, payer and nonce; a Solana message's hash),
 * so a payload settled twice finds its payment and answers its transaction. `payment_identifier` is the
 * client's `payment-identifier` extension id, unique per partner: a retry that signed anew under the
 * same id gets the first payment's answer instead of paying again.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE x402_payments (
      key text PRIMARY KEY,
      payment_id text NOT NULL UNIQUE REFERENCES payments(id),
      partner_id text NOT NULL,
      payment_identifier text,
      terms text NOT NULL,
      network text NOT NULL,
      payer text NOT NULL,
      payload jsonb NOT NULL,
      created_at timestamptz NOT NULL
    );
    CREATE UNIQUE INDEX x402_payments_identifier ON x402_payments (partner_id, payment_identifier)
      WHERE payment_identifier IS NOT NULL;
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE x402_payments`.execute(db)
}
