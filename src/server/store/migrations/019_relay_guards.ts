import { type Kysely, sql } from 'kysely'

/**
 * What bounds the gas hostile callers can make the service's executors spend (payments/relayGuards.ts):
 *
 * - `payer_cooldowns`: a payer (its address, and the code hash of a contract payer) whose relay reverted
 *   on chain after passing its simulation is refused until `until`, on every instance.
 * - `executor_gas_charges`: per credential and chain, the native units a send may cost (`reserved`, from
 *   the moment it is signed until its receipt) and what reverted or failed sends did cost (`spent`). A
 *   send that succeeds gives its reservation back; the rest counts against the credential's budget for
 *   the window.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE payer_cooldowns (
      chain_id text NOT NULL,
      subject text NOT NULL,
      kind text NOT NULL CHECK (kind IN ('address', 'code_hash')),
      until timestamptz NOT NULL,
      reason text NOT NULL,
      payment_id text,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (chain_id, subject)
    );

    CREATE TABLE executor_gas_charges (
      id bigserial PRIMARY KEY,
      chain_id text NOT NULL,
      credential_id text NOT NULL,
      payment_id text NOT NULL,
      state text NOT NULL CHECK (state IN ('reserved', 'spent')),
      amount numeric(78, 0) NOT NULL CHECK (amount >= 0),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX executor_gas_charges_window ON executor_gas_charges (credential_id, chain_id, created_at);
    CREATE INDEX executor_gas_charges_payment ON executor_gas_charges (payment_id) WHERE state = 'reserved';
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE executor_gas_charges;
    DROP TABLE payer_cooldowns;
  `.execute(db)
}
