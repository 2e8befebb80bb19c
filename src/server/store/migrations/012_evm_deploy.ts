import { type Kysely, sql } from 'kysely'

/** The executor's third kind of transaction: deploying an undeployed (ERC-6492) payer before its relay. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy'));
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM evm_transactions WHERE purpose = 'deploy';
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle'));
  `.execute(db)
}
