/** Row types of migration 013_x402, merged into the server's Database interface. */
import type { Timestamp } from '../store/schema.js'

export interface X402PaymentsTable {
  key: string
  payment_id: string
  partner_id: string
  payment_identifier: string | null
  /** network|asset|payTo|amount: what a payment-identifier was first used for. */
  terms: string
  network: string
  payer: string
  /** The x402 payment payload as settled (JSON text on insert). */
  payload: string
  created_at: Timestamp
}

declare module '../store/schema.js' {
  interface Database {
    x402_payments: X402PaymentsTable
  }
}
