import { type Kysely, sql } from 'kysely'

/**
 * Subscriptions (docs/subscriptions.md). A subscription is created with its first period's payment (the
 * link the buyer's wallet opens to sign the mandate); each later period is a payment of its own
 * (`payments.source` `mandate`). `subscription_periods` holds one row per (subscription, period): the
 * key that makes a period's money move once, whoever retries. `test_clocks` are test mode's frozen
 * clocks. `payments.source` comes from migration 021 (push payments).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE test_clocks (
      id text PRIMARY KEY,
      partner_id text NOT NULL REFERENCES partners(id),
      frozen_time timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    );

    CREATE TABLE subscriptions (
      id text PRIMARY KEY,
      partner_id text NOT NULL REFERENCES partners(id),
      merchant_id text NOT NULL REFERENCES merchants(id),
      mode text NOT NULL CHECK (mode IN ('test', 'live')),
      reference_id text NOT NULL,
      amount_unit text NOT NULL,
      amount_value numeric(78, 0) NOT NULL CHECK (amount_value > 0),
      interval text NOT NULL CHECK (interval IN ('day', 'week', 'month', 'year')),
      interval_count integer NOT NULL CHECK (interval_count >= 1),
      periods integer CHECK (periods >= 1),
      start_at timestamptz NOT NULL,
      end_at timestamptz NOT NULL CHECK (end_at > start_at),
      test_clock_id text REFERENCES test_clocks(id),
      status text NOT NULL CHECK (status IN ('incomplete', 'active', 'past_due', 'cancelled', 'ended')),
      first_payment_id text NOT NULL UNIQUE REFERENCES payments(id),
      -- The mandate, once signed: who, in what, how much a period at most, to which charging address.
      buyer text,
      asset text,
      amount_per_period numeric(78, 0) CHECK (amount_per_period > 0),
      spender text,
      mandate jsonb,
      periods_charged integer NOT NULL DEFAULT 0 CHECK (periods_charged >= 0
        AND (periods IS NULL OR periods_charged <= periods)),
      -- When the next period is due, and when the next attempt at it runs (a retry, while past due).
      next_charge_at timestamptz,
      next_attempt_at timestamptz,
      failed_attempts integer NOT NULL DEFAULT 0,
      cancel_reason text,
      -- Test mode's stand-in for the buyer's chain: funded, empty (charges fail), revoked.
      sandbox_buyer text NOT NULL DEFAULT 'funded' CHECK (sandbox_buyer IN ('funded', 'empty', 'revoked')),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      activated_at timestamptz,
      cancelled_at timestamptz,
      ended_at timestamptz
    );
    CREATE INDEX subscriptions_merchant_page ON subscriptions (merchant_id, created_at DESC, id DESC);
    CREATE INDEX subscriptions_due ON subscriptions (next_attempt_at)
      WHERE status IN ('active', 'past_due') AND test_clock_id IS NULL;
    CREATE INDEX subscriptions_clock ON subscriptions (test_clock_id, next_attempt_at)
      WHERE test_clock_id IS NOT NULL;

    CREATE TABLE subscription_periods (
      subscription_id text NOT NULL REFERENCES subscriptions(id) ON DELETE CASCADE,
      period integer NOT NULL CHECK (period >= 0),
      payment_id text NOT NULL UNIQUE REFERENCES payments(id) ON DELETE CASCADE,
      due_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (subscription_id, period)
    );
  `.execute(db)
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await sql`
    DROP TABLE subscription_periods;
    DROP TABLE subscriptions;
    DROP TABLE test_clocks;
  `.execute(db)
}
