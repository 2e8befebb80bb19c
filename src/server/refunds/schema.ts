/** Row types of migration 015_refunds, merged into the server's Database interface. */
import type { Selectable } from 'kysely'
import type { Mode, Numeric, Timestamp } from '../store/schema.js'

export type RefundStatus = 'pending' | 'succeeded' | 'failed'
/**
 * `collected`: the payment's own funds, not yet settled; `float`: the collection address's float;
 * `authorized`: a manual-capture payment's held funds (its void, or what its capture did not take).
 */
export type RefundSource = 'collected' | 'float' | 'authorized'

export interface RefundsTable {
  id: string
  payment_id: string
  partner_id: string
  merchant_id: string
  mode: Mode
  /** In the payment's unit and minor units. */
  amount_unit: string
  amount_value: Numeric
  /** CAIP-19 asset sent back, and how much of it (minor units); null when the payment has no token. */
  asset: string | null
  asset_value: Numeric | null
  /** CAIP-10; null only in test mode for a payment no wallet paid. */
  destination: string | null
  reason: string | null
  paid_from: RefundSource
  status: RefundStatus
  failure_code: string | null
  tx_id: string | null
  created_at: Timestamp
  updated_at: Timestamp
  succeeded_at: Timestamp | null
  failed_at: Timestamp | null
}

export interface SettlementAmountsTable {
  payment_id: string
  /** Token minor units the settlement pays the merchant. */
  value: Numeric
  created_at: Timestamp
}

export type RefundRow = Selectable<RefundsTable>

declare module '../store/schema.js' {
  interface Database {
    refunds: RefundsTable
    settlement_amounts: SettlementAmountsTable
  }
}
