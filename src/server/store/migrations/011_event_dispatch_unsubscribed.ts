import { type Kysely, sql } from 'kysely'
import { up as notifyOnlyWhenSubscribed } from './010_event_notify_subscribed.js'

/**
 * An event no endpoint will receive (no endpoint of the payment's partner and mode, not deleted, has its
 * type enabled) is written already dispatched. The dispatcher used to claim such events by polling, read
 * them with their snapshots and mark them dispatched: two statements and a row version per event, a
 * tenth of the PostgreSQL work of a test-mode payment when its partner has no endpoints; now it never
 * sees them, and the partial index of pending events does not hold them either. Whether an endpoint
 * receives an event is decided when the event is written, where it was decided when the dispatcher ran
 * a moment later: an endpoint committed after the event's statement began does not receive it. The
 * NOTIFY then only needs the column: a pending event is one somebody will receive.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION caipay_payment_event_unsubscribed() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.dispatched_at IS NULL AND NOT EXISTS (
        SELECT 1 FROM webhook_endpoints e
        WHERE e.partner_id = NEW.snapshot->>'partner_id' AND e.mode = NEW.snapshot->>'mode'
          AND e.deleted_at IS NULL AND NEW.type = ANY (e.enabled_events)
      ) THEN
        NEW.dispatched_at := NEW.created_at;
      END IF;
      RETURN NEW;
    END
    $$;
    CREATE TRIGGER payment_events_unsubscribed BEFORE INSERT ON payment_events
      FOR EACH ROW EXECUTE FUNCTION caipay_payment_event_unsubscribed();

    CREATE OR REPLACE FUNCTION caipay_payment_event_notify() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('caipay_jobs', 'webhook.dispatch');
      RETURN NULL;
    END
    $$;
    DROP TRIGGER payment_events_notify ON payment_events;
    CREATE TRIGGER payment_events_notify AFTER INSERT ON payment_events
      FOR EACH ROW WHEN (NEW.type <> 'payment.created' AND NEW.dispatched_at IS NULL)
      EXECUTE FUNCTION caipay_payment_event_notify();
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER payment_events_unsubscribed ON payment_events;
    DROP FUNCTION caipay_payment_event_unsubscribed();
    DROP TRIGGER payment_events_notify ON payment_events;
    CREATE TRIGGER payment_events_notify AFTER INSERT ON payment_events
      FOR EACH ROW WHEN (NEW.type <> 'payment.created') EXECUTE FUNCTION caipay_payment_event_notify();
  `.execute(db)
  await notifyOnlyWhenSubscribed(db)
}
