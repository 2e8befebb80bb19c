/** Row types of migration 003_evm, merged into the server's Database interface. */
import type { ColumnType, Generated, Selectable } from 'kysely'
import type { Timestamp } from '../../store/schema.js'

/**
 * `deploy`: an undeployed (ERC-6492) payer's account, through its factory, before the relay; `refund`:
 * the payment's asset sent back (refund_id says which refund); `sweep`: a push payment's deposit address
 * emptied into the collection address; `deposit`: a push deposit sent back (migration 026); `permit`: a
 * subscription's signed Permit2 grant, once (migration 027); `charge`: one period's Permit2 `transferFrom`;
 * `recover`: stray money moved out of a deposit address by an operator (migration 030); `cancel`: a 0-value
 * transfer to the executor itself at the nonce of a payer's send whose fee bump a budget refused, its
 * `step` the purpose it replaces (migration 033).
 */
export type EvmTxPurpose =
  | 'relay'
  | 'settle'
  | 'deploy'
  | 'refund'
  | 'sweep'
  | 'deposit'
  | 'permit'
  | 'charge'
  | 'recover'
  | 'cancel'
/** `sent`: signed, recorded, broadcast (maybe); `dropped`: its nonce went to another transaction. */
export type EvmTxStatus = 'sent' | 'succeeded' | 'reverted' | 'dropped'

export interface EvmTransactionsTable {
  id: Generated<string>
  payment_id: string
  purpose: EvmTxPurpose
  /** The refund a `refund` transaction pays (migration 015); null for the other purposes. */
  refund_id: ColumnType<string | null, string | null | undefined, string | null>
  /**
   * Which of a payment's several steps of one purpose (migration 026): a `sweep` round, the deposit a
   * `deposit` sends back, the forwarder factory a push payment's `deploy` creates; null for the others.
   */
  step: ColumnType<string | null, string | null | undefined, string | null>
  /**
   * A `cancel`: the code of the budget refusal of the fee bump it replaced (migration 036), which its
   * payment fails with; null for the other purposes (and a cancellation recorded before 036).
   */
  cancel_code: ColumnType<string | null, string | null | undefined, string | null>
  /** CAIP-2. */
  chain_id: string
  /** The executor address, lower case. */
  sender: string
  /** bigint: pg returns text. */
  nonce: ColumnType<string, string | bigint, string | bigint>
  hash: string
  /** The signed transaction, so a restarted job can broadcast exactly the same bytes again. */
  raw: string
  status: EvmTxStatus
  created_at: Timestamp
  updated_at: Timestamp
}

export interface EvmDirectClaimsTable {
  chain_id: string
  /** Lower case. */
  tx_hash: string
  payment_id: string
  created_at: Timestamp
}

export type EvmTransactionRow = Selectable<EvmTransactionsTable>

declare module '../../store/schema.js' {
  interface Database {
    evm_transactions: EvmTransactionsTable
    evm_direct_claims: EvmDirectClaimsTable
  }
}
