import type { GatewayPayment } from '../../contract/gateway.js'
import type { DriverPayment } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { withExpiryApplied } from '../payments/lifecycle.js'
import { paymentAmount, unixSeconds } from '../payments/views.js'
import type { Db } from '../store/db.js'
import { preparedStatement } from '../store/prepared.js'
import { type Mode, type PaymentRow, paymentColumns } from '../store/schema.js'

export interface GatewayPaymentRow extends PaymentRow {
  merchant_name: string
  merchant_icon_url: string | null
}

/** By primary key alone, the mode checked on the row: see selectPaymentById. */
const selectGatewayPayment = preparedStatement((db: Db, paymentId: string) =>
  db
    .selectFrom('payments')
    .innerJoin('merchants', 'merchants.id', 'payments.merchant_id')
    .select(paymentColumns.map((column) => `payments.${column}` as const))
    .select(['merchants.name as merchant_name', 'merchants.icon_url as merchant_icon_url'])
    .where('payments.id', '=', paymentId),
)

/**
 * A payment as the gateway sees it, expiry applied. Wallets pay other partners' merchants (a payment
 * link reaches any compatible wallet), so the scope is the mode only: a test credential never sees a
 * live payment and the other way round; both are `404 payment_not_found`.
 */
export async function findGatewayPayment(
  db: Db,
  paymentId: string,
  mode: Mode | null,
  now: Date,
): Promise<GatewayPaymentRow> {
  const [row] = (await selectGatewayPayment(db, paymentId)).rows
  if (!row || (mode !== null && row.mode !== mode))
    fail('payment_not_found', 'Payment not found.', { paymentId })
  const current = await withExpiryApplied(db, row, now)
  return { ...current, merchant_name: row.merchant_name, merchant_icon_url: row.merchant_icon_url }
}

/** `404`/`410`/`409` unless the buyer can still act on the payment. */
export function assertPayable(row: PaymentRow): void {
  if (row.status === 'expired') fail('payment_expired', 'The payment has expired.', { paymentId: row.id })
  if (row.status !== 'requires_action') {
    fail('invalid_state', `The payment is ${row.status}.`, { paymentId: row.id, status: row.status })
  }
}

export function gatewayPaymentJson(row: GatewayPaymentRow, config: ServerConfig): GatewayPayment {
  return {
    paymentId: row.id,
    status: row.status,
    amount: paymentAmount(row, config),
    expiresAt: unixSeconds(row.expires_at),
    merchant: { name: row.merchant_name, iconUrl: row.merchant_icon_url },
  }
}

export function driverPayment(row: PaymentRow): DriverPayment {
  return {
    id: row.id,
    mode: row.mode,
    merchantId: row.merchant_id,
    amount: { unit: row.amount_unit, value: row.amount_value },
    expiresAt: unixSeconds(row.expires_at),
  }
}
