import { type Kysely, sql } from 'kysely'

/**
 * Batched settlements: a succeeded payment's settlement is an item of the open batch of its (chain, asset,
 * destination); the batch closes `close_at` (the configured interval after its first item) and pays the
 * merchant its items' sum in ONE transfer. An item belongs to exactly one batch (its primary key is the
 * payment); the partial unique index leaves at most one batch open per destination, so an item added while
 * the batch closes waits for the close and opens the next batch. `payment_id` is the batch's first
 * payment: the batch's job and its transactions are recorded under it (its transaction is that payment's
 * settlement as much as every other item's).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE settlement_batches (
      id bigserial PRIMARY KEY,
      chain_id text NOT NULL,
      asset text NOT NULL,
      destination text NOT NULL,
      payment_id text NOT NULL UNIQUE REFERENCES payments(id) ON DELETE CASCADE,
      status text NOT NULL CHECK (status IN ('open', 'closed', 'succeeded')),
      close_at timestamptz NOT NULL,
      amount numeric(78, 0) CHECK (amount >= 0),
      tx_id text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      CHECK ((status = 'open') = (amount IS NULL))
    );
    CREATE UNIQUE INDEX settlement_batches_open ON settlement_batches (chain_id, asset, destination)
      WHERE status = 'open';

    CREATE TABLE settlement_items (
      payment_id text PRIMARY KEY REFERENCES payments(id) ON DELETE CASCADE,
      batch_id bigint NOT NULL REFERENCES settlement_batches(id) ON DELETE CASCADE,
      amount numeric(78, 0) NOT NULL CHECK (amount > 0),
      created_at timestamptz NOT NULL
    );
    CREATE INDEX settlement_items_batch ON settlement_items (batch_id);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`DROP TABLE settlement_items, settlement_batches;`.execute(db)
}
