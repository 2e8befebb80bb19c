/** Row types of migration 026_evm_push, merged into the server's Database interface. */
import type { ColumnType, Selectable } from 'kysely'
import type { Numeric, Timestamp } from '../../store/schema.js'

type BigintColumn = ColumnType<string, string | number | bigint, string | number | bigint>

/** A payment's deposit address for one asset, with the amount its EIP-681 link asks. */
export interface EvmPushDepositsTable {
  payment_id: string
  /** CAIP-19 as configured. */
  asset: string
  chain_id: string
  /** Lower case. */
  address: string
  amount: Numeric
  created_at: Timestamp
}

/** `found`: read from the chain, waiting for its sweep; `applied`: swept and applied to its payment. */
export type EvmPushTransferState = 'found' | 'applied'

export interface EvmPushTransfersTable {
  /** `<transaction hash>:<log index>`: the transfer's identity in payments/push.ts too. */
  log_id: string
  payment_id: string
  chain_id: string
  asset: string
  /** Lower case. */
  deposit_address: string
  /** Lower case: who sent it (where a refund goes). */
  sender: string
  amount: Numeric
  block: BigintColumn
  log_index: number
  /** CAIP-10 of the collection address the sweep brings it to (ledger/entries.ts holderOf). */
  holder: string
  state: EvmPushTransferState
  found_at: Timestamp
}

export interface EvmPushScansTable {
  chain_id: string
  /** The last block whose Transfer logs into deposit addresses were read. */
  scanned_to: BigintColumn
}

export type EvmPushTransferRow = Selectable<EvmPushTransfersTable>

declare module '../../store/schema.js' {
  interface Database {
    evm_push_deposits: EvmPushDepositsTable
    evm_push_transfers: EvmPushTransfersTable
    evm_push_scans: EvmPushScansTable
  }
}
