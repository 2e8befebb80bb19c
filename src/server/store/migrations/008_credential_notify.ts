import { type Kysely, sql } from 'kysely'

/**
 * Every change to a credential or a merchant row notifies `caipay_credentials` (payload
 * `<table>:<id>`) when its transaction commits, whoever made it (any instance, an operator's SQL):
 * each server LISTENs and forgets that entry of its auth cache at once (see authCache.ts), so a
 * revoked key is refused by every instance within a round trip, not after its cache TTL.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION caipay_notify_credentials() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('caipay_credentials', TG_TABLE_NAME || ':' || OLD.id);
      RETURN NULL;
    END $$;
    CREATE TRIGGER api_keys_notify AFTER UPDATE OR DELETE ON api_keys
      FOR EACH ROW EXECUTE FUNCTION caipay_notify_credentials();
    CREATE TRIGGER apps_notify AFTER UPDATE OR DELETE ON apps
      FOR EACH ROW EXECUTE FUNCTION caipay_notify_credentials();
    CREATE TRIGGER merchants_notify AFTER UPDATE OR DELETE ON merchants
      FOR EACH ROW EXECUTE FUNCTION caipay_notify_credentials();
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TRIGGER merchants_notify ON merchants;
    DROP TRIGGER apps_notify ON apps;
    DROP TRIGGER api_keys_notify ON api_keys;
    DROP FUNCTION caipay_notify_credentials();
  `.execute(db)
}
