/** Row types of migration 004_solana, merged into the server's Database interface. */
import type { ColumnType, Selectable } from 'kysely'
import type { Timestamp } from '../../store/schema.js'

export type SolanaTxPurpose = 'payment' | 'settlement' | 'refund' | 'deposit' | 'mandate' | 'charge'
/** `dropped`: never landed and never can (its blockhash expired); `failed`: landed with an error or was refused. */
export type SolanaTxState = 'pending' | 'landed' | 'failed' | 'dropped'

export interface SolanaTransactionsTable {
  /** Base58 first signature (the fee payer's): the transaction id. */
  signature: string
  payment_id: string
  purpose: SolanaTxPurpose
  /** The refund a `refund` transaction pays (migration 015); null for the other purposes. */
  refund_id: ColumnType<string | null, string | null | undefined, string | null>
  /** The deposit a `deposit` transaction sends back (migration 021); null for the other purposes. */
  deposit_id: ColumnType<string | null, string | null | undefined, string | null>
  chain_id: string
  /** The complete signed wire transaction, base64. */
  raw: string
  blockhash: string
  /** pg returns bigint as text. */
  last_valid_block_height: ColumnType<string, string | number | bigint, string | number | bigint>
  state: SolanaTxState
  error: string | null
  send_count: ColumnType<number, number | undefined, number>
  first_sent_at: Timestamp | null
  created_at: Timestamp
  updated_at: Timestamp
}

export type SolanaTransactionRow = Selectable<SolanaTransactionsTable>

declare module '../../store/schema.js' {
  interface Database {
    solana_transactions: SolanaTransactionsTable
  }
}
