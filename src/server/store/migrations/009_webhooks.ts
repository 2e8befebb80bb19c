import { type Kysely, sql } from 'kysely'

/**
 * Merchant webhooks: endpoints (per partner and mode, each with its own signing secret, and the previous
 * secret during a rotation's 24-hour overlap) and deliveries (one per endpoint and event, with the exact
 * body every attempt sends). A delivery's attempts run as a job (`jobs.delivery_id`): jobs of a payment
 * stay one per (kind, payment), deliveries one job each.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhook_endpoints (
      id text PRIMARY KEY,
      partner_id text NOT NULL REFERENCES partners(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      url text NOT NULL,
      enabled_events text[] NOT NULL,
      secret text NOT NULL,
      previous_secret text,
      previous_secret_expires_at timestamptz,
      created_at timestamptz NOT NULL,
      deleted_at timestamptz
    );
    CREATE INDEX webhook_endpoints_page ON webhook_endpoints (partner_id, mode, created_at DESC, id DESC)
      WHERE deleted_at IS NULL;

    CREATE TABLE webhook_deliveries (
      id text PRIMARY KEY,
      endpoint_id text NOT NULL REFERENCES webhook_endpoints(id),
      event_id text NOT NULL,
      event_type text NOT NULL,
      payment_id text REFERENCES payments(id) ON DELETE CASCADE,
      body text NOT NULL,
      state text NOT NULL CHECK (state IN ('pending', 'succeeded', 'failed')),
      attempts integer NOT NULL DEFAULT 0,
      last_status_code integer,
      last_error text,
      next_attempt_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      delivered_at timestamptz,
      UNIQUE (endpoint_id, event_id)
    );
    CREATE INDEX webhook_deliveries_page ON webhook_deliveries (endpoint_id, created_at DESC, id DESC);

    ALTER TABLE jobs ADD COLUMN delivery_id text REFERENCES webhook_deliveries(id) ON DELETE CASCADE;
    ALTER TABLE jobs DROP CONSTRAINT jobs_kind_payment_id_key;
    CREATE UNIQUE INDEX jobs_payment_kind ON jobs (kind, payment_id) WHERE delivery_id IS NULL;
    CREATE UNIQUE INDEX jobs_delivery ON jobs (delivery_id) WHERE delivery_id IS NOT NULL;

    -- Wakes the webhook dispatchers of every instance when a state change commits (NOTIFY is delivered
    -- at commit). Not for payment.created: NOTIFY serialises the commits that send it, and creation is
    -- the hot path; its events wake the dispatcher in-process and by polling instead.
    CREATE FUNCTION caipay_payment_event_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('caipay_jobs', 'webhook.dispatch');
      RETURN NULL;
    END
    $$;
    CREATE TRIGGER payment_events_notify AFTER INSERT ON payment_events
      FOR EACH ROW WHEN (NEW.type <> 'payment.created') EXECUTE FUNCTION caipay_payment_event_notify();
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER payment_events_notify ON payment_events;
    DROP FUNCTION caipay_payment_event_notify();
    DELETE FROM jobs WHERE delivery_id IS NOT NULL;
    DROP INDEX jobs_delivery;
    DROP INDEX jobs_payment_kind;
    ALTER TABLE jobs ADD CONSTRAINT jobs_kind_payment_id_key UNIQUE (kind, payment_id);
    ALTER TABLE jobs DROP COLUMN delivery_id;
    DROP TABLE webhook_deliveries, webhook_endpoints;
  `.execute(db)
}
