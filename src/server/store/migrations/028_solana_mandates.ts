import { type Kysely, sql } from 'kysely'

/**
 * Live Solana subscriptions (docs/subscriptions.md, "Solana, live"): the buyer's signed `ApproveChecked`
 * (purpose `mandate`, the first period's confirm) and each period's delegated `transferChecked` signed by
 * the service (purpose `charge`) are recorded in `solana_transactions` before they are sent, as every
 * other transaction the service lands.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE solana_transactions DROP CONSTRAINT solana_transactions_purpose_check;
    ALTER TABLE solana_transactions ADD CONSTRAINT solana_transactions_purpose_check
      CHECK (purpose IN ('payment', 'settlement', 'refund', 'deposit', 'mandate', 'charge')
        AND (refund_id IS NOT NULL) = (purpose = 'refund') AND (deposit_id IS NOT NULL) = (purpose = 'deposit'));
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE solana_transactions DROP CONSTRAINT solana_transactions_purpose_check;
    DELETE FROM solana_transactions WHERE purpose IN ('mandate', 'charge');
    ALTER TABLE solana_transactions ADD CONSTRAINT solana_transactions_purpose_check
      CHECK (purpose IN ('payment', 'settlement', 'refund', 'deposit')
        AND (refund_id IS NOT NULL) = (purpose = 'refund') AND (deposit_id IS NOT NULL) = (purpose = 'deposit'));
  `.execute(db)
}
