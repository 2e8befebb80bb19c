import * as z from 'zod/mini'
import {
  Amount,
  AmountInput,
  Cursor,
  httpUrlPattern,
  limitQuery,
  MinorUnits,
  PaymentStatus,
  PositiveMinorUnits,
  queryInt,
  UnixSeconds,
} from './common.js'
import { PaymentSource } from './gateway.js'
import { PaymentInformation } from './status.js'

export {
  CancelResponse,
  cancelReasons,
  PaymentId,
  PaymentIdParams,
  PaymentInformation,
  StatusResponse,
} from './status.js'

export const ReferenceId = z
  .string()
  .check(
    z.minLength(1),
    z.maxLength(35),
    z.regex(/^[A-Za-z0-9 /:.,+-]+$/, 'referenceId allows A-Z a-z 0-9 space / : . , + -'),
  )

/** `manual`: the money is held once paid until the merchant captures or voids it (docs/capture.md). */
export const captureMethods = ['automatic', 'manual'] as const
export const CaptureMethod = z.enum(captureMethods)
export type CaptureMethod = z.infer<typeof CaptureMethod>

const PaymentCreateFields = {
  referenceId: ReferenceId,
  amount: AmountInput,
  expiresAt: z.optional(UnixSeconds),
  /** caipay's: `automatic` (the default) settles once paid; `manual` holds it for capture. */
  capture: z.optional(CaptureMethod),
  /** Manual capture only: when the held money is voided by itself (unix seconds; default and bound in config). */
  captureBy: z.optional(UnixSeconds),
}

/** Stable version (2026-02-18). */
export const PaymentCreateBody = z.strictObject(PaymentCreateFields)
export type PaymentCreateBody = z.infer<typeof PaymentCreateBody>

const RedirectUrl = z
  .string()
  .check(z.maxLength(2048), z.regex(httpUrlPattern('https?'), 'Expected an http(s) URL.'))
export const CheckoutUrls = z.strictObject({ successUrl: RedirectUrl, errorUrl: RedirectUrl })

/** Preview version (2026-02-19.preview) also takes hosted checkout redirects. */
export const PaymentCreateBodyPreview = z.strictObject({
  ...PaymentCreateFields,
  checkout: z.optional(CheckoutUrls),
})
export type PaymentCreateBodyPreview = z.infer<typeof PaymentCreateBodyPreview>

export const PaymentCreateResponse = z.object({
  paymentId: z.string(),
  gatewayUrl: z.string(),
  status: PaymentStatus,
  expiresAt: UnixSeconds,
  isFinal: z.boolean(),
  pollInMs: z.nullable(z.int()),
})
export type PaymentCreateResponse = z.infer<typeof PaymentCreateResponse>

export const PaymentsSettlementSuccessful = z.object({
  txId: z.string(),
  amount: z.object({ unit: z.string() }),
})
export const PaymentsSettlementInformation = z.object({
  successful: z.nullable(PaymentsSettlementSuccessful),
})
export type PaymentsSettlementInformation = z.infer<typeof PaymentsSettlementInformation>

/**
 * `declined_user`: the buyer's wallet refused. A subscription's period (`source: mandate`) also fails
 * with `insufficient_funds` (after the last retry), `mandate_revoked` (the buyer revoked it on chain) or
 * `subscription_cancelled` (the merchant cancelled while it was being retried).
 */
export const failureCodes = [
  'declined_user',
  'insufficient_funds',
  'mandate_revoked',
  'subscription_cancelled',
] as const

export const captureStatuses = ['authorized', 'captured', 'partially_captured', 'voided', 'expired'] as const
export const CaptureStatus = z.enum(captureStatuses)
export type CaptureStatus = z.infer<typeof CaptureStatus>

/** `transfer_failed`: money a void, the expiry or a partial capture gave back did not go; it is held again. */
export const captureFailureCodes = ['transfer_failed'] as const

/**
 * A manual-capture payment's hold, once paid (null before): `authorizedAmount` is what the buyer paid,
 * `capturedAmount` what the capture took (null until captured), `heldAmount` what the service still
 * holds for it (all of it while authorized; a partial capture's rest that could not go back), all in the
 * payment's unit. `failureCode` says why money meant to go back is held again (docs/capture.md).
 */
export const PaymentCapture = z.object({
  status: CaptureStatus,
  authorizedAmount: Amount,
  capturedAmount: z.nullable(Amount),
  heldAmount: Amount,
  failureCode: z.nullable(z.enum(captureFailureCodes)),
  /** Unix seconds: still authorized then, the payment is voided by itself (status `expired`). */
  captureBy: UnixSeconds,
})
export type PaymentCapture = z.infer<typeof PaymentCapture>

/**
 * What the service still holds for a manual-capture payment, in its unit: all of it while authorized, a
 * partial capture's rest that could not go back, nothing once captured or given back.
 */
export function captureHeldValue(
  status: string | null,
  failureCode: string | null,
  amount: string | number | bigint,
  captured: string | number | bigint | null,
): string {
  if (status === 'authorized') return String(amount)
  if (status === 'partially_captured' && failureCode !== null)
    return String(BigInt(amount) - BigInt(captured ?? 0))
  return '0'
}

/** `{amount?}`: in the payment's unit, at most what was authorized; absent captures all of it. */
export const CaptureBody = z.strictObject({ amount: z.optional(AmountInput) })
export type CaptureBody = z.infer<typeof CaptureBody>

export const Payment = z.object({
  paymentId: z.string(),
  status: PaymentStatus,
  referenceId: z.string(),
  amount: Amount,
  failureCode: z.optional(z.nullable(z.enum(failureCodes))),
  info: z.optional(z.nullable(PaymentInformation)),
  settlement: z.optional(z.nullable(PaymentsSettlementInformation)),
  expiresAt: UnixSeconds,
  createdAt: z.string(),
  /** caipay's: how the payment's money is taken (docs/capture.md). */
  captureMethod: z.optional(CaptureMethod),
  /** caipay's: a manual-capture payment's hold, once paid; null otherwise. */
  capture: z.optional(z.nullable(PaymentCapture)),
  /** How its money arrived: `pull` (the gateway flow), `push` (a transfer the buyer sent), `mandate`. */
  source: z.optional(PaymentSource),
  /**
   * What transfers found by the payment's push reference brought, per asset (minor units), whatever
   * they went to (docs/push-payments.md); shown while the payment is open and for a push payment.
   */
  received: z.optional(z.array(z.object({ asset: z.string(), value: MinorUnits }))),
})
export type Payment = z.infer<typeof Payment>

export const PaymentListItem = z.object({
  paymentId: z.string(),
  merchantId: z.string(),
  referenceId: z.string(),
  status: PaymentStatus,
  amount: Amount,
  optionAmount: z.optional(z.nullable(Amount)),
  buyer: z.optional(z.nullable(z.string())),
  txId: z.optional(z.nullable(z.string())),
  refunded: z.boolean(),
  createdAt: z.string(),
  updatedAt: z.string(),
})
export type PaymentListItem = z.infer<typeof PaymentListItem>

const statusFilter = z.optional(z.union([PaymentStatus, z.array(PaymentStatus).check(z.maxLength(6))]))
/**
 * 9999-12-31T23:59:59Z. Far larger values reached PostgreSQL as an invalid Date, a 500; no payment is
 * created that late, so the bound filters nothing out.
 */
const maxFilterTs = 253_402_300_799
const tsFilter = z.optional(queryInt(0, maxFilterTs))

const paymentListFilters = {
  status: statusFilter,
  referenceId: z.optional(ReferenceId),
  startTs: tsFilter,
  endTs: tsFilter,
  cursor: z.optional(Cursor),
  limit: limitQuery(200),
}
/** Row 14/15: the merchant comes from the header or the path. */
export const MerchantPaymentListQuery = z.strictObject(paymentListFilters)
export type MerchantPaymentListQuery = z.infer<typeof MerchantPaymentListQuery>
/** Row 11: across the partner's merchants, optionally one. */
export const PaymentListQuery = z.strictObject({
  ...paymentListFilters,
  merchantId: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
})
export type PaymentListQuery = z.infer<typeof PaymentListQuery>

export const PaymentListResponse = z.object({
  data: z.array(PaymentListItem),
  nextCursor: z.nullable(z.string()),
})
export type PaymentListResponse = z.infer<typeof PaymentListResponse>

export const simulateOutcomes = ['succeeded', 'failed', 'expired', 'cancelled'] as const
export const SimulateBody = z.strictObject({ outcome: z.enum(simulateOutcomes) })
export type SimulateBody = z.infer<typeof SimulateBody>

/**
 * A pushed transfer the sandbox pretends arrived by the payment's reference (docs/push-payments.md):
 * `amount` in the asset's minor units (default: the exact price), so underpaid, overpaid, late and
 * paid-twice transfers can be tried without a chain.
 */
/**
 * The sandbox's test assets (CAIP-19): what test mode offers without a config file (the server's
 * payments/assets.ts describes each) and what a simulated push pays in, published as an `enum`.
 */
export const testAssetIds = [
  'eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
  'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v',
] as const

export const SimulatePushBody = z.strictObject({
  amount: z.optional(PositiveMinorUnits),
  /**
   * A test asset that can price the payment (a USD amount: any; a `caip19/` amount: only that asset);
   * default the first that can.
   */
  asset: z.optional(z.enum(testAssetIds)),
})
export type SimulatePushBody = z.infer<typeof SimulatePushBody>

export const SimulatePushResponse = z.object({
  /** What the transfer did: counts toward the open payment, completed it, or became a deposit. */
  outcome: z.enum(['pending', 'succeeded', 'deposit']),
  status: PaymentStatus,
  received: MinorUnits,
  due: MinorUnits,
  depositId: z.optional(z.string()),
  reason: z.optional(z.enum(['underpaid', 'overpaid', 'late', 'duplicate'])),
})
export type SimulatePushResponse = z.infer<typeof SimulatePushResponse>
