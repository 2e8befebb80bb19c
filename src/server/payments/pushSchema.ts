/** Row types of migration 021_push, merged into the server's Database interface. */
import type { ColumnType, Selectable } from 'kysely'
import type { Mode, Numeric, Timestamp } from '../store/schema.js'

export interface PushReferencesTable {
  payment_id: string
  /** Base58 public key with no private half: only a marker a Solana Pay transfer carries. */
  reference: string
  created_at: Timestamp
}

/** `pending`: counts toward its open payment; `paid`: part of its success; `deposit`: held for the operator. */
export type PushTransferState = 'pending' | 'paid' | 'deposit'

export interface PushTransfersTable {
  signature: string
  /** CAIP-19, canonical. */
  asset: string
  payment_id: string
  chain_id: string
  /** CAIP-10 of the collection address it reached (ledger/entries.ts holderOf). */
  holder: string
  /** CAIP-10 of the owner whose token account paid (the refund goes there); null when unknown. */
  sender: string | null
  amount: Numeric
  slot: ColumnType<string, string | number | bigint, string | number | bigint>
  state: PushTransferState
  deposit_id: string | null
  found_at: Timestamp
}

export type DepositReason = 'underpaid' | 'overpaid' | 'late' | 'duplicate'
export type DepositStatus = 'held' | 'refunding' | 'refunded' | 'assigned'

export interface DepositsTable {
  id: string
  mode: Mode
  partner_id: string
  merchant_id: string
  payment_id: string | null
  chain_id: string
  asset: string
  holder: string
  sender: string | null
  amount: Numeric
  reason: DepositReason
  status: DepositStatus
  tx_ids: string[]
  refund_tx_id: string | null
  created_at: Timestamp
  updated_at: Timestamp
}

export type DepositRow = Selectable<DepositsTable>
export type PushTransferRow = Selectable<PushTransfersTable>

declare module '../store/schema.js' {
  interface Database {
    push_references: PushReferencesTable
    push_transfers: PushTransfersTable
    deposits: DepositsTable
  }
}
