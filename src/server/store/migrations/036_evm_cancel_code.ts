import { type Kysely, sql } from 'kysely'

/**
 * `cancel_code`: why a payer's send was replaced by a cancellation (migration 033): the code of the
 * budget refusal of its fee bump (`payer_gas_budget_exhausted`, `gas_budget_exhausted`,
 * `payer_cooling_down`). The cancellation is sent by the in-flight sweep, and the payment fails later,
 * in its relay job: that job fails it with this code (docs/security-model.md, "Fee bumps"). Null on every
 * other purpose, and on a cancellation recorded before this migration (its payment fails
 * `chain_unavailable`, as then).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE evm_transactions ADD COLUMN cancel_code text;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_cancel_code_check
      CHECK (cancel_code IS NULL OR purpose = 'cancel');
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE evm_transactions DROP COLUMN cancel_code;`.execute(db)
}
