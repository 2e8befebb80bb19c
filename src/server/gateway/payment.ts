import type { GatewayPayment } from '../../contract/gateway.js'
import type { DriverPayment } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { withExpiryApplied } from '../payments/lifecycle.js'
import { paymentAmount, unixSeconds } from '../payments/views.js'
import type { Db } from '../store/db.js'
import { columnsText, namedStatement } from '../store/prepared.js'
import { type Mode, type PaymentRow, paymentColumns } from '../store/schema.js'
import type { PaymentOptionRow } from './schema.js'
import { optionColumns } from './store.js'

export interface GatewayPaymentRow extends PaymentRow {
  merchant_name: string
  merchant_icon_url: string | null
}

const gatewayPaymentColumns = `${columnsText(paymentColumns, 'payments')},
  merchants.name AS merchant_name, merchants.icon_url AS merchant_icon_url`

/** By primary key alone, the mode checked on the row: see selectPaymentById. */
const selectGatewayPayment = namedStatement<GatewayPaymentRow>(
  `SELECT ${gatewayPaymentColumns}
  FROM payments JOIN merchants ON merchants.id = payments.merchant_id
  WHERE payments.id = $1`,
)

/**
 * The payment and one option in one round trip (fetch and confirm need both): the option by its primary
 * key alone, its payment checked on the row; its columns come back prefixed `option_`. With them, the
 * merchant's crypto settlement for the option's asset, by its unique key (test mode's confirm settles at
 * once and needs it): the key is the asset's canonical identity (canonicalCaip, caip/caip.ts) in SQL.
 */
const selectGatewayPaymentAndOption = namedStatement<Record<string, unknown>>(
  `SELECT ${gatewayPaymentColumns},
    ${optionColumns.map((column) => `payment_options.${column} AS option_${column}`).join(', ')},
    crypto_settlements.asset AS settlement_asset_of_option
  FROM payments JOIN merchants ON merchants.id = payments.merchant_id
  LEFT JOIN payment_options ON payment_options.id = $1
  LEFT JOIN crypto_settlements ON crypto_settlements.merchant_id = payments.merchant_id
    AND crypto_settlements.asset_key = CASE WHEN payment_options.asset LIKE 'eip155:%'
      THEN lower(payment_options.asset) ELSE payment_options.asset END
  WHERE payments.id = $2`,
)

/**
 * The option named, looked up with its payment: `row` undefined when there is no such option of this
 * payment; with it, the asset of the merchant's crypto settlement for the option's asset (null: none).
 */
export interface OptionRead {
  row: PaymentOptionRow | undefined
  settlementAsset?: string | null
}

/** What fetch and confirm act on: the payment (as findGatewayPayment) and the option named, if it is this payment's. */
export interface PaymentAndOption {
  payment: GatewayPaymentRow
  option: OptionRead
}

export async function findGatewayPaymentAndOption(
  db: Db,
  paymentId: string,
  optionId: string,
  mode: Mode | null,
  now: Date,
): Promise<PaymentAndOption> {
  const [joined] = (await selectGatewayPaymentAndOption(db, optionId, paymentId)).rows
  const raw = joined ?? {}
  const row =
    joined &&
    (Object.fromEntries(
      [...paymentColumns, 'merchant_name', 'merchant_icon_url'].map((c) => [c, raw[c]]),
    ) as unknown as GatewayPaymentRow)
  const payment = await applyGatewayScope(db, paymentId, row, mode, now)
  if (raw.option_id === null || raw.option_payment_id !== paymentId)
    return { payment, option: { row: undefined } }
  const option = Object.fromEntries(
    optionColumns.map((c) => [c, raw[`option_${c}`]]),
  ) as unknown as PaymentOptionRow
  return {
    payment,
    option: {
      row: option,
      settlementAsset: (raw.settlement_asset_of_option as string | null) ?? null,
    },
  }
}

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
  return applyGatewayScope(db, paymentId, row, mode, now)
}

async function applyGatewayScope(
  db: Db,
  paymentId: string,
  row: GatewayPaymentRow | undefined,
  mode: Mode | null,
  now: Date,
): Promise<GatewayPaymentRow> {
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

export function driverPayment(
  row: Pick<
    PaymentRow,
    'id' | 'mode' | 'merchant_id' | 'amount_unit' | 'amount_value' | 'expires_at' | 'capture_method'
  >,
): DriverPayment {
  return {
    id: row.id,
    mode: row.mode,
    merchantId: row.merchant_id,
    amount: { unit: row.amount_unit, value: row.amount_value },
    expiresAt: unixSeconds(row.expires_at),
    captureMethod: row.capture_method,
  }
}
