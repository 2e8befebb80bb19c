import { type Kysely, sql } from 'kysely'

/**
 * The executor key's sender numbers each group of transactions past the highest nonce any instance
 * recorded for the key (chains/evm/sender.ts): read from this index, not from the whole history.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE INDEX evm_transactions_sender_nonce ON evm_transactions (chain_id, sender, nonce)`.execute(
    db,
  )
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX evm_transactions_sender_nonce`.execute(db)
}
