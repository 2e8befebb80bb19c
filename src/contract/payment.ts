import * as z from 'zod/mini'
import {
  Amount,
  AmountInput,
  Cursor,
  httpUrlPattern,
  limitQuery,
  PaymentStatus,
  queryInt,
  UnixSeconds,
} from './common.js'
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

const PaymentCreateFields = {
  referenceId: ReferenceId,
  amount: AmountInput,
  expiresAt: z.optional(UnixSeconds),
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
