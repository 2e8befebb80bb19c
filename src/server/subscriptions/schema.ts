/** Row types of migration 022_subscriptions, merged into the server's Database interface. */
import type { Selectable } from 'kysely'
import type { SubscriptionInterval, SubscriptionStatus } from '../../contract/subscription.js'
import type { JsonValue } from '../chains/types.js'
import type { Json, Mode, Numeric, Timestamp } from '../store/schema.js'

export type SandboxBuyer = 'funded' | 'empty' | 'revoked'

export interface SubscriptionsTable {
  id: string
  partner_id: string
  merchant_id: string
  mode: Mode
  reference_id: string
  /** One period's price, in the unit the merchant chose (fiat or an asset's minor units). */
  amount_unit: string
  amount_value: Numeric
  interval: SubscriptionInterval
  interval_count: number
  /** Periods in all; null when only `end_at` bounds them. */
  periods: number | null
  /** The anchor: period k is due at start_at + k intervals. */
  start_at: Timestamp
  /** No period starts at or after it; the mandate expires by then. */
  end_at: Timestamp
  test_clock_id: string | null
  status: SubscriptionStatus
  first_payment_id: string
  buyer: string | null
  asset: string | null
  /** Token minor units charged each period (the first period's quote, fixed by the mandate). */
  amount_per_period: Numeric | null
  spender: string | null
  /** What the chain holds as the mandate (the signed permit, the delegation), driver-private. */
  mandate: Json<JsonValue> | null
  periods_charged: number
  next_charge_at: Timestamp | null
  next_attempt_at: Timestamp | null
  failed_attempts: number
  cancel_reason: string | null
  sandbox_buyer: SandboxBuyer
  created_at: Timestamp
  updated_at: Timestamp
  activated_at: Timestamp | null
  cancelled_at: Timestamp | null
  ended_at: Timestamp | null
}

export interface SubscriptionPeriodsTable {
  subscription_id: string
  period: number
  payment_id: string
  due_at: Timestamp
  created_at: Timestamp
}

export interface TestClocksTable {
  id: string
  partner_id: string
  frozen_time: Timestamp
  created_at: Timestamp
  updated_at: Timestamp
}

export type SubscriptionRow = Selectable<SubscriptionsTable>
export type TestClockRow = Selectable<TestClocksTable>

declare module '../store/schema.js' {
  interface Database {
    subscriptions: SubscriptionsTable
    subscription_periods: SubscriptionPeriodsTable
    test_clocks: TestClocksTable
  }
}
