import * as z from 'zod/mini'
import { Amount, AmountInput, Caip10, Cursor, limitQuery } from './common.js'
import { PaymentId } from './status.js'

/**
 * Refunds (`/v1/refunds`): money sent back to the payer (or another account on the payment's chain) in
 * the asset it paid, in full or in part. `pending` until the transfer is mined, then `succeeded`;
 * `failed` when it cannot be made. See docs/refunds.md.
 */

export const refundStatuses = ['pending', 'succeeded', 'failed'] as const
export const RefundStatus = z.enum(refundStatuses)
export type RefundStatus = z.infer<typeof RefundStatus>

/**
 * `insufficient_funds`: the collection address cannot pay it yet (the refund stays pending and is
 * retried); `transfer_failed`: the transfer could not be made (final, nothing was sent).
 */
export const refundFailureCodes = ['insufficient_funds', 'transfer_failed'] as const
export const RefundFailureCode = z.enum(refundFailureCodes)

export const RefundId = z
  .string()
  .check(z.minLength(1), z.maxLength(64), z.regex(/^ref_[A-Za-z0-9]+$/, 'Expected a refund id (ref_...).'))
export const RefundIdParams = z.strictObject({ id: RefundId })

/**
 * `{paymentId}` alone refunds what remains refundable (all of it, the first time). `amount` is in the
 * payment's unit (its `amount.unit`), at most what remains; `destination` a CAIP-10 account on the chain
 * the payment was paid on (default: the account that paid).
 */
export const RefundBody = z.strictObject({
  paymentId: PaymentId,
  amount: z.optional(AmountInput),
  reason: z.optional(z.string().check(z.minLength(1), z.maxLength(500))),
  // The CAIP-10 pattern bounds its length (at most 170 characters).
  destination: z.optional(Caip10),
})
export type RefundBody = z.infer<typeof RefundBody>

export const Refund = z.object({
  refundId: z.string(),
  paymentId: z.string(),
  status: RefundStatus,
  amount: Amount,
  /** CAIP-10; null only for a test-mode payment that no wallet paid. */
  destination: z.nullable(z.string()),
  reason: z.optional(z.nullable(z.string())),
  /** The transfer's transaction id once sent (`test:<refundId>` in test mode). */
  txId: z.optional(z.string()),
  failureCode: z.optional(RefundFailureCode),
  createdAt: z.string(),
})
export type Refund = z.infer<typeof Refund>

export const RefundListQuery = z.strictObject({
  paymentId: z.optional(PaymentId),
  cursor: z.optional(Cursor),
  limit: limitQuery(100),
})
export type RefundListQuery = z.infer<typeof RefundListQuery>

export const RefundListResponse = z.object({
  data: z.array(Refund),
  nextCursor: z.nullable(z.string()),
})
export type RefundListResponse = z.infer<typeof RefundListResponse>

export const refundSimulateOutcomes = ['succeeded', 'failed'] as const
export const RefundSimulateBody = z.strictObject({ outcome: z.enum(refundSimulateOutcomes) })
export type RefundSimulateBody = z.infer<typeof RefundSimulateBody>
