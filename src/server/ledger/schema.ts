/** Row types of migration 018_ledger, merged into the server's Database interface. */
import type { ColumnType, Generated } from 'kysely'
import type { Mode, Numeric, Timestamp } from '../store/schema.js'

/**
 * What an account holds, at one holding address (docs/live-mode.md, "The ledger"). Stored, never below
 * zero: `collected` (a merchant's money not yet in a settlement), `settling` (in a closed settlement
 * batch, until its transfer is mined), `refunds` (refunds owed, until their transfer is mined), `float`
 * (a partner's, for refunds after settlement), `fees` (a partner's), `unallocated` (the operator's
 * top-ups no partner has been given), `authorized` (a merchant's manual-capture payments, held until
 * captured or voided: migration 020), `deposits` (a partner's: pushed money no open payment explains,
 * until an operator refunds or assigns it; migration 021). Not stored: `world` (everyone outside the
 * service) and
 * `adjustment` (what operators booked by hand).
 */
export type LedgerKind =
  | 'collected'
  | 'settling'
  | 'refunds'
  | 'float'
  | 'fees'
  | 'unallocated'
  | 'authorized'
  | 'deposits'
  | 'world'
  | 'adjustment'

export interface LedgerAccountsTable {
  mode: Mode
  /** CAIP-19, canonical (caip/caip.ts canonicalCaip). */
  asset: string
  /** CAIP-10 of the holding address (the collection address), canonical. */
  holder: string
  kind: LedgerKind
  /** The merchant (collected, settling, refunds, authorized), the partner (float, fees) or '' (the operator's). */
  owner: string
  balance: Numeric
}

export interface LedgerEntriesTable {
  id: Generated<string>
  mode: Mode
  asset: string
  holder: string
  debit_kind: LedgerKind
  debit_owner: string
  credit_kind: LedgerKind
  credit_owner: string
  amount: Numeric
  /** The change that wrote it: payment.collected, settlement.closed, refund.reserved, topup, ... */
  flow: string
  payment_id: string | null
  refund_id: string | null
  batch_id: string | null
  tx_id: string | null
  created_at: Timestamp
}

export interface LedgerScansTable {
  holder: string
  asset: string
  /** The last block whose incoming transfers were read. */
  block: Numeric
  updated_at: Timestamp
}

export interface LedgerDifferencesTable {
  id: Generated<string>
  mode: Mode
  asset: string
  holder: string
  block: Numeric
  chain_balance: Numeric
  ledger_balance: Numeric
  in_flight_out: Numeric
  in_flight_in: Numeric
  /** chain - ledger, outside what is in flight (negative: the chain holds less). */
  difference: Numeric
  detected_at: Timestamp
  acknowledged_at: ColumnType<Date | null, Date | null | undefined, Date | null>
  acknowledged_note: ColumnType<string | null, string | null | undefined, string | null>
}

declare module '../store/schema.js' {
  interface Database {
    ledger_accounts: LedgerAccountsTable
    ledger_entries: LedgerEntriesTable
    ledger_scans: LedgerScansTable
    ledger_differences: LedgerDifferencesTable
  }
}
