import { type Kysely, sql } from 'kysely'

/**
 * A committed state change NOTIFYs the webhook dispatchers only when some endpoint will receive its
 * event (an endpoint of the payment's partner and mode, not deleted, with the type enabled). Every
 * NOTIFY serialises its commit with every other notifying commit and wakes each instance's dispatcher,
 * which then runs its claim transaction; for the payments of partners without endpoints (most test-mode
 * traffic) that was a third of the gateway flow's round trips, for nothing to deliver. Their events are
 * still marked dispatched, by the dispatcher's polling in batches. An endpoint created while the event
 * commits is seen by the dispatch itself (it reads endpoints when it runs); only the wake-up waits for
 * the next poll.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION caipay_payment_event_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF EXISTS (
        SELECT 1 FROM webhook_endpoints e
        WHERE e.partner_id = NEW.snapshot->>'partner_id' AND e.mode = NEW.snapshot->>'mode'
          AND e.deleted_at IS NULL AND NEW.type = ANY (e.enabled_events)
      ) THEN
        PERFORM pg_notify('caipay_jobs', 'webhook.dispatch');
      END IF;
      RETURN NULL;
    END
    $$;
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE OR REPLACE FUNCTION caipay_payment_event_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('caipay_jobs', 'webhook.dispatch');
      RETURN NULL;
    END
    $$;
  `.execute(db)
}
