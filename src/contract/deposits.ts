import * as z from 'zod/mini'
import { Amount, limitQuery } from './common.js'

/** Pushed money no open payment explains (docs/push-payments.md, "Deposits"). */
export const Deposit = z.object({
  depositId: z.string(),
  merchantId: z.string(),
  /** The payment whose reference the transfer carried. */
  paymentId: z.nullable(z.string()),
  chainId: z.string(),
  amount: Amount,
  /** CAIP-10 of the owner that sent it (where a refund goes); null when unknown. */
  sender: z.nullable(z.string()),
  /** `underpaid` (the payment closed before the rest arrived), `overpaid` (the excess, refunded by config), `late`, `duplicate`. */
  reason: z.enum(['underpaid', 'overpaid', 'late', 'duplicate']),
  /** `held` until an operator refunds (`refunding`, then `refunded`) or assigns it (kept as the partner's float). */
  status: z.enum(['held', 'refunding', 'refunded', 'assigned']),
  txIds: z.array(z.string()),
  refundTxId: z.nullable(z.string()),
  createdAt: z.string(),
})
export type Deposit = z.infer<typeof Deposit>

export const DepositListQuery = z.strictObject({
  status: z.optional(z.enum(['held', 'refunding', 'refunded', 'assigned'])),
  limit: limitQuery(100),
})
export type DepositListQuery = z.infer<typeof DepositListQuery>

export const DepositListResponse = z.object({ deposits: z.array(Deposit) })
export type DepositListResponse = z.infer<typeof DepositListResponse>
