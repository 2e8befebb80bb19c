import * as z from 'zod/mini'
import { Amount, PaymentStatus } from './common.js'

// Payment schemas the wallet gateway shares with the merchant API, apart so the wallet core bundles only these.

export const PaymentId = z
  .string()
  .check(z.minLength(1), z.maxLength(64), z.regex(/^pay_[A-Za-z0-9]+$/, 'Expected a payment id (pay_...).'))
export const PaymentIdParams = z.strictObject({ id: PaymentId })

export const StatusResponse = z.object({
  status: PaymentStatus,
  isFinal: z.boolean(),
  pollInMs: z.nullable(z.int().check(z.minimum(0))),
  txId: z.optional(z.string()),
})
export type StatusResponse = z.infer<typeof StatusResponse>

export const PaymentInformation = z.object({ txId: z.string(), optionAmount: Amount })
export type PaymentInformation = z.infer<typeof PaymentInformation>

export const cancelReasons = ['cancelled_by_merchant', 'cancelled_by_user'] as const
export const CancelResponse = z.object({
  paymentId: z.string(),
  status: z.literal('cancelled'),
  cancelledAt: z.string(),
  cancelledReason: z.enum(cancelReasons),
})
export type CancelResponse = z.infer<typeof CancelResponse>
