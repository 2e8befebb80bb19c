/** Row types of migrations 019_relay_guards and 024_relay_reservations, merged into the server's Database interface. */
import type { ColumnType, Generated } from 'kysely'
import type { Numeric, Timestamp } from '../store/schema.js'

export interface PayerCooldownsTable {
  /** CAIP-2. */
  chain_id: string
  /** A payer address (EVM lowercased) or a contract payer's code hash. */
  subject: string
  kind: 'address' | 'code_hash'
  until: Timestamp
  reason: string
  /** The payment whose failed send started the cool-down. */
  payment_id: string | null
  created_at: Timestamp
}

export interface ExecutorGasChargesTable {
  id: Generated<string>
  chain_id: string
  /** The API key id or app id whose callers' payment the send was for. */
  credential_id: string
  /** The payer whose payment it was (an EVM address lowercased, a Solana address): the per-payer budget. */
  payer: string | null
  payment_id: string
  /** `reserved`: a send's worst case while it is in flight; `spent`: what a reverted or failed send cost. */
  state: 'reserved' | 'spent'
  /** The chain's smallest native unit (wei, lamports). */
  amount: Numeric
  /** In a reservation: what the payment's sends that already landed cost (an ERC-6492 deployment). */
  landed: ColumnType<string, string | bigint | undefined, string | bigint>
  created_at: Timestamp
  updated_at: Timestamp
}

declare module '../store/schema.js' {
  interface Database {
    payer_cooldowns: PayerCooldownsTable
    executor_gas_charges: ExecutorGasChargesTable
  }
}
