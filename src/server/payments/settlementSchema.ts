/** Row types of migration 016_settlement_batches, merged into the server's Database interface. */
import type { ColumnType, Generated } from 'kysely'
import type { Numeric, Timestamp } from '../store/schema.js'

export interface SettlementBatchesTable {
  id: Generated<string>
  /** CAIP-2. */
  chain_id: string
  asset: string
  destination: string
  /** The batch's first payment: its job and its transactions are recorded under it. */
  payment_id: string
  status: 'open' | 'closed' | 'succeeded'
  close_at: Timestamp
  /** Token minor units the batch's transfer pays, fixed when it closes. */
  amount: ColumnType<string | null, string | null | undefined, string | null>
  tx_id: string | null
  created_at: Timestamp
  updated_at: Timestamp
}

export interface SettlementItemsTable {
  payment_id: string
  batch_id: string
  /** Token minor units collected for the merchant, before refunds. */
  amount: Numeric
  /** Token minor units of the payment the service keeps (the fee), on top of `amount` (migration 018). */
  fee: ColumnType<string, string | bigint | undefined, string | bigint>
  created_at: Timestamp
}

declare module '../store/schema.js' {
  interface Database {
    settlement_batches: SettlementBatchesTable
    settlement_items: SettlementItemsTable
  }
}
