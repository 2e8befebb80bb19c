import { type Kysely, sql } from 'kysely'

/**
 * Every change of a payment's status notifies `caipay_payment_status` (payload: the payment id) when its
 * transaction commits, whoever made it (any instance, any code path, an operator's SQL): a status read
 * held with `Prefer: wait` (payments/statusChanges.ts) answers at that moment instead of at its timeout.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION caipay_notify_payment_status() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('caipay_payment_status', NEW.id);
      RETURN NULL;
    END $$;
    CREATE TRIGGER payments_status_notify AFTER UPDATE OF status ON payments
      FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
      EXECUTE FUNCTION caipay_notify_payment_status();
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER payments_status_notify ON payments;
    DROP FUNCTION caipay_notify_payment_status();
  `.execute(db)
}
