import { type Kysely, sql } from 'kysely'

/**
 * `cancel`: the executor's 0-value transfer to itself at a payer's nonce, sent when the fee bump of that
 * payer's relay or deployment is refused by a budget (docs/security-model.md, "Fee bumps"): the key moves
 * on instead of waiting behind a send below the market fee. Its `step` names the send it replaces
 * (`relay`, `deploy`).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund', 'sweep', 'deposit', 'permit', 'charge', 'recover', 'cancel')
        AND (refund_id IS NOT NULL) = (purpose = 'refund')
        AND (step IS NOT NULL OR purpose NOT IN ('sweep', 'deposit', 'recover', 'cancel')));
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DELETE FROM evm_transactions WHERE purpose = 'cancel';
    ALTER TABLE evm_transactions DROP CONSTRAINT evm_transactions_purpose_check;
    ALTER TABLE evm_transactions ADD CONSTRAINT evm_transactions_purpose_check
      CHECK (purpose IN ('relay', 'settle', 'deploy', 'refund', 'sweep', 'deposit', 'permit', 'charge', 'recover')
        AND (refund_id IS NOT NULL) = (purpose = 'refund')
        AND (step IS NOT NULL OR purpose NOT IN ('sweep', 'deposit', 'recover')));
  `.execute(db)
}
