import { type Kysely, sql } from 'kysely'

/** Accounts, merchants, settlements, payments, jobs and idempotency records. */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE partners (
      id text PRIMARY KEY,
      name text,
      api_version text NOT NULL,
      created_at timestamptz NOT NULL
    );

    CREATE TABLE api_keys (
      id text PRIMARY KEY,
      partner_id text NOT NULL REFERENCES partners(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      role text NOT NULL CHECK (role IN ('partner', 'wallet')),
      key_hash text NOT NULL UNIQUE,
      key_prefix text NOT NULL,
      created_at timestamptz NOT NULL,
      revoked_at timestamptz
    );
    CREATE INDEX api_keys_partner ON api_keys (partner_id, mode);

    CREATE TABLE apps (
      id text PRIMARY KEY,
      partner_id text NOT NULL REFERENCES partners(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      created_at timestamptz NOT NULL,
      revoked_at timestamptz
    );
    CREATE INDEX apps_partner ON apps (partner_id, mode);

    CREATE TABLE merchants (
      id text PRIMARY KEY,
      partner_id text NOT NULL REFERENCES partners(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      name text NOT NULL,
      email text NOT NULL,
      icon_url text,
      status text NOT NULL CHECK (status IN ('active', 'inactive', 'suspended')),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      deleted_at timestamptz
    );
    CREATE INDEX merchants_page ON merchants (partner_id, mode, created_at DESC, id DESC)
      WHERE deleted_at IS NULL;

    CREATE TABLE crypto_settlements (
      id text PRIMARY KEY,
      merchant_id text NOT NULL REFERENCES merchants(id),
      partner_id text NOT NULL REFERENCES partners(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      asset text NOT NULL,
      asset_key text NOT NULL,
      destination text NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      UNIQUE (merchant_id, asset_key)
    );

    CREATE TABLE payments (
      id text PRIMARY KEY,
      partner_id text NOT NULL REFERENCES partners(id),
      merchant_id text NOT NULL REFERENCES merchants(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      reference_id text NOT NULL,
      amount_unit text NOT NULL,
      amount_value numeric(78, 0) NOT NULL CHECK (amount_value > 0),
      status text NOT NULL CHECK (status IN
        ('requires_action', 'processing', 'succeeded', 'failed', 'expired', 'cancelled')),
      failure_code text,
      expires_at timestamptz NOT NULL,
      selected_option_id text,
      buyer text,
      option_amount jsonb,
      tx_id text,
      settlement_status text CHECK (settlement_status IN ('pending', 'succeeded')),
      settlement_tx_id text,
      settlement_unit text,
      refunded_at timestamptz,
      cancelled_at timestamptz,
      cancelled_reason text,
      checkout jsonb,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );
    CREATE INDEX payments_page ON payments (partner_id, mode, created_at DESC, id DESC);
    CREATE INDEX payments_merchant_page ON payments (merchant_id, created_at DESC, id DESC);
    CREATE INDEX payments_status ON payments (partner_id, mode, status, created_at DESC);
    CREATE INDEX payments_reference ON payments (partner_id, mode, reference_id);
    -- The expiry sweep only looks at payments still waiting for the buyer.
    CREATE INDEX payments_due ON payments (expires_at) WHERE status = 'requires_action';

    CREATE TABLE jobs (
      id bigserial PRIMARY KEY,
      kind text NOT NULL,
      payment_id text NOT NULL REFERENCES payments(id),
      state text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'running', 'succeeded', 'failed')),
      attempts integer NOT NULL DEFAULT 0,
      run_at timestamptz NOT NULL,
      locked_until timestamptz,
      payload jsonb NOT NULL DEFAULT '{}',
      result jsonb,
      last_error text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      UNIQUE (kind, payment_id)
    );
    CREATE INDEX jobs_ready ON jobs (run_at) WHERE state IN ('pending', 'running');

    CREATE TABLE idempotency_keys (
      partner_id text NOT NULL REFERENCES partners(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      key text NOT NULL,
      fingerprint text NOT NULL,
      state text NOT NULL CHECK (state IN ('in_flight', 'done')),
      response_status integer,
      response_body text,
      response_headers jsonb,
      locked_until timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL,
      PRIMARY KEY (partner_id, mode, key)
    );
    CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE idempotency_keys, jobs, payments, crypto_settlements, merchants, apps, api_keys, partners;
  `.execute(db)
}
