import { type Kysely, sql } from 'kysely'

/**
 * A manual-capture payment whose money could not be given back (docs/capture.md, "When the money cannot
 * go back"): the refund of a void, an expiry or a partial capture's rest failed for good
 * (`transfer_failed`, nothing sent), its ledger entries returned the money to the merchant's `authorized`
 * account, and `capture_failure_code` says so on the payment. A void or expiry is then `authorized`
 * again (the hold is back); a partial capture stays `partially_captured`, its rest held. The next void
 * (or capture) clears it.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE payments
      ADD COLUMN capture_failure_code text CHECK (capture_failure_code IN ('transfer_failed')),
      ADD CONSTRAINT payments_capture_failure_held
        CHECK (capture_failure_code IS NULL OR capture_status IN ('authorized', 'partially_captured'));
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE payments DROP COLUMN capture_failure_code;`.execute(db)
}
