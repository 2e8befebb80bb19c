/** Row types of migration 030_evm_stray_recoveries, merged into the server's Database interface. */
import type { Selectable } from 'kysely'
import type { Numeric, Timestamp } from '../../store/schema.js'

/** `queued`: its job has yet to move it; `moved`: the executor's transaction landed; `failed`: gave up. */
export type EvmStrayRecoveryStatus = 'queued' | 'moved' | 'failed'

/** Money at a deposit address the ledger does not carry, moved out by an operator (chains/evm/stray.ts). */
export interface EvmStrayRecoveriesTable {
  id: string
  payment_id: string
  chain_id: string
  /** Lower case. */
  deposit_address: string
  /** CAIP-19: `…/slip44:60` (native) or `…/erc20:0x…`. */
  asset: string
  /** Lower case: the sender, or an operator's address. */
  to_address: string
  status: EvmStrayRecoveryStatus
  /** What moved, read from the receipt; null until then. */
  amount: Numeric | null
  tx_hash: string | null
  error: string | null
  created_at: Timestamp
  updated_at: Timestamp
}

export type EvmStrayRecoveryRow = Selectable<EvmStrayRecoveriesTable>

declare module '../../store/schema.js' {
  interface Database {
    evm_stray_recoveries: EvmStrayRecoveriesTable
  }
}
