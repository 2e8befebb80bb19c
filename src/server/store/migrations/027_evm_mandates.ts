import { type Kysely, sql } from 'kysely'

/**
 * Live EVM subscriptions (docs/subscriptions.md): the executor's transactions of a mandate, recorded and
 * sent once like the others. `permit`: the buyer's signed Permit2 `PermitSingle`, submitted once per
 * subscription (under its first period's payment); `charge`: one period's Permit2 `transferFrom`, under
 * that period's payment.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund', 'sweep', 'deposit', 'permit', 'charge')
        AND (refund_id IS NOT NULL) = (purpose = 'refund')
        AND (step IS NOT NULL OR purpose NOT IN ('sweep', 'deposit')));
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM evm_transactions WHERE purpose IN ('permit', 'charge');
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund', 'sweep', 'deposit')
        AND (refund_id IS NOT NULL) = (purpose = 'refund')
        AND (step IS NOT NULL OR purpose NOT IN ('sweep', 'deposit')));
  `.execute(db)
}
