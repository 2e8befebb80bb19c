import { type Kysely, sql } from 'kysely'

/**
 * Payment lists in keyset order at any table size (found by `npm run bench`, scale part):
 * - a status filter walks (partner, mode, status) in the exact (created_at, id) order of the page, so
 *   the cursor is an index condition and no Incremental Sort is needed;
 * - a merchant's list filtered by status no longer filters the partner's rows of that status one by one
 *   (a small merchant of a big partner read most of them);
 * - a referenceId filter (several payments may share one) pages without sorting every match.
 * Same number of indexes on `payments` plus one (merchant, status).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX payments_status;
    CREATE INDEX payments_status ON payments (partner_id, mode, status, created_at DESC, id DESC);
    CREATE INDEX payments_merchant_status ON payments (merchant_id, status, created_at DESC, id DESC);
    DROP INDEX payments_reference;
    CREATE INDEX payments_reference ON payments (partner_id, mode, reference_id, created_at DESC, id DESC);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP INDEX payments_reference;
    CREATE INDEX payments_reference ON payments (partner_id, mode, reference_id);
    DROP INDEX payments_merchant_status;
    DROP INDEX payments_status;
    CREATE INDEX payments_status ON payments (partner_id, mode, status, created_at DESC);
  `.execute(db)
}
