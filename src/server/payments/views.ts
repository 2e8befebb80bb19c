import { isFinalStatus, type PaymentStatus } from '../../contract/common.js'
import {
  captureHeldValue,
  failureCodes,
  type Payment,
  type PaymentCapture,
  type PaymentCreateResponse,
  type PaymentListItem,
  type StatusResponse,
} from '../../contract/payment.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import type { Db } from '../store/db.js'
import { columnsText, namedStatement } from '../store/prepared.js'
import { type PaymentRow, paymentColumns } from '../store/schema.js'
import { toAmount } from './assets.js'
import type { FinalStatuses, KnownFinal } from './finalStatuses.js'
import { withExpiryApplied } from './lifecycle.js'

/** Row -> wire shapes of a payment, shared by the merchant API and the gateway. */

/** How long a client should wait before polling again; null once final. */
export function pollInMs(status: PaymentStatus): number | null {
  if (isFinalStatus(status)) return null
  return status === 'processing' ? 1000 : 2000
}

export function unixSeconds(date: Date): number {
  return Math.floor(date.getTime() / 1000)
}

export function gatewayUrl(config: ServerConfig, paymentId: string): string {
  return `${config.publicBaseUrl}/pay/${paymentId}`
}

export function paymentAmount(row: PaymentRow, config: ServerConfig) {
  return toAmount(row.amount_unit, row.amount_value, config)
}

export function statusJson(row: Pick<PaymentRow, 'status' | 'tx_id'>): StatusResponse {
  return {
    status: row.status,
    isFinal: isFinalStatus(row.status),
    pollInMs: pollInMs(row.status),
    ...(row.status === 'succeeded' && row.tx_id ? { txId: row.tx_id } : {}),
  }
}

export function createdJson(
  row: Pick<PaymentRow, 'id' | 'status' | 'expires_at'>,
  config: ServerConfig,
): PaymentCreateResponse {
  return {
    paymentId: row.id,
    gatewayUrl: gatewayUrl(config, row.id),
    status: row.status,
    expiresAt: unixSeconds(row.expires_at),
    isFinal: isFinalStatus(row.status),
    pollInMs: pollInMs(row.status),
  }
}

export function paymentJson(
  row: PaymentRow,
  config: ServerConfig,
  received?: readonly { asset: string; value: string }[],
): Payment {
  const succeeded = row.status === 'succeeded'
  const failureCode = (failureCodes as readonly string[]).includes(row.failure_code ?? '')
    ? (row.failure_code as (typeof failureCodes)[number])
    : null
  return {
    paymentId: row.id,
    status: row.status,
    referenceId: row.reference_id,
    amount: paymentAmount(row, config),
    failureCode: row.status === 'failed' ? failureCode : null,
    info:
      succeeded && row.tx_id
        ? { txId: row.tx_id, optionAmount: row.option_amount ?? paymentAmount(row, config) }
        : null,
    settlement:
      row.settlement_status === null
        ? null
        : {
            successful:
              row.settlement_status === 'succeeded' && row.settlement_tx_id
                ? { txId: row.settlement_tx_id, amount: { unit: row.settlement_unit ?? row.amount_unit } }
                : null,
          },
    expiresAt: unixSeconds(row.expires_at),
    createdAt: row.created_at.toISOString(),
    source: row.source,
    ...(received?.length ? { received: [...received] } : {}),
    // Only on manual-capture payments: an automatic payment reads as the specification has it.
    ...(row.capture_method === 'manual'
      ? { captureMethod: row.capture_method, capture: captureJson(row, config) }
      : {}),
  }
}

/** A manual-capture payment's hold once paid (docs/capture.md); null before, and for automatic capture. */
export function captureJson(row: PaymentRow, config: ServerConfig): PaymentCapture | null {
  if (row.capture_status === null || row.capture_by === null) return null
  return {
    status: row.capture_status,
    authorizedAmount: paymentAmount(row, config),
    capturedAmount:
      row.captured_value === null ? null : toAmount(row.amount_unit, String(row.captured_value), config),
    heldAmount: toAmount(
      row.amount_unit,
      captureHeldValue(row.capture_status, row.capture_failure_code, row.amount_value, row.captured_value),
      config,
    ),
    failureCode: row.capture_failure_code,
    captureBy: unixSeconds(row.capture_by),
  }
}

export function listItemJson(row: PaymentRow, config: ServerConfig): PaymentListItem {
  return {
    paymentId: row.id,
    merchantId: row.merchant_id,
    referenceId: row.reference_id,
    status: row.status,
    amount: paymentAmount(row, config),
    optionAmount: row.option_amount,
    buyer: row.buyer,
    txId: row.tx_id,
    refunded: row.refunded_at !== null,
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  }
}

/**
 * By primary key alone; the owner is checked on the row. With `merchant_id = $2` in the statement, the
 * generic plan a connection caches while the table is small can pick `payments_merchant_status`
 * (merchant_id, status, created_at, id) instead of the key, and keep it after the merchant's payments
 * grow: every read then walks the merchant's whole index range (see store/prepared.ts).
 */
const selectPaymentById = namedStatement<PaymentRow>(
  `SELECT ${columnsText(paymentColumns)} FROM payments WHERE id = $1`,
)

/** What the status reads need of a payment, and no more: every column read is parsed, dates cost most. */
const statusColumns = ['id', 'merchant_id', 'mode', 'status', 'tx_id', 'expires_at'] as const
type StatusRow = Pick<PaymentRow, (typeof statusColumns)[number]>

/** By primary key alone, like selectPaymentById; the owner or mode is checked on the row. */
const selectPaymentStatus = namedStatement<StatusRow>(
  `SELECT ${columnsText(statusColumns)} FROM payments WHERE id = $1`,
)

/**
 * A payment's status (expiry applied) for its merchant (`merchantId`) or for the gateway (`mode`: a test
 * credential never sees a live payment, and the other way round); else `404 payment_not_found`.
 * `finals`, the app's kept final answers (fastPath.ts), answers a final payment without a read; the
 * same visibility check applies to a kept answer.
 */
export async function findPaymentStatus(
  db: Db,
  paymentId: string,
  scope: { merchantId: string } | { mode: PaymentRow['mode'] | null },
  now: Date,
  finals?: FinalStatuses,
): Promise<StatusResponse> {
  const known = finals?.get(paymentId)
  if (known) return visibleTo(scope, paymentId, known).answer
  const [row] = (await selectPaymentStatus(db, paymentId)).rows
  const owner = visibleTo(scope, paymentId, row && { merchantId: row.merchant_id, mode: row.mode })
  const answer = statusJson(await withExpiryApplied(db, row!, now))
  // Only what is committed: a read inside a transaction may still roll back.
  if (!db.isTransaction) finals?.remember(paymentId, { ...owner, answer })
  return answer
}

/** `owner` when the scope may see its payment; else `404 payment_not_found`. */
function visibleTo<O extends Pick<KnownFinal, 'merchantId' | 'mode'>>(
  scope: { merchantId: string } | { mode: PaymentRow['mode'] | null },
  paymentId: string,
  owner: O | undefined,
): O {
  const visible =
    owner !== undefined &&
    ('merchantId' in scope
      ? owner.merchantId === scope.merchantId
      : scope.mode === null || owner.mode === scope.mode)
  if (!visible) fail('payment_not_found', 'Payment not found.', { paymentId })
  return owner
}

/** A payment of this merchant (expiry applied), else `404 payment_not_found`. */
export async function findMerchantPayment(
  db: Db,
  merchantId: string,
  paymentId: string,
  now: Date,
): Promise<PaymentRow> {
  const [row] = (await selectPaymentById(db, paymentId)).rows
  if (!row || row.merchant_id !== merchantId) fail('payment_not_found', 'Payment not found.', { paymentId })
  return withExpiryApplied(db, row, now)
}
