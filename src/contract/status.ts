import * as z from 'zod/mini'
import { Amount, PaymentStatus } from './common.js'

// Payment schemas the wallet gateway shares with the merchant API, apart so the wallet core bundles only these.

export const PaymentId = z
  .string()
  .check(z.minLength(1), z.maxLength(64), z.regex(/^pay_[A-Za-z0-9]+$/, 'Expected a payment id (pay_...).'))
export const PaymentIdParams = z.strictObject({ id: PaymentId })

// RFC 7240 `Prefer` (1#preference; preference = token [= word] *(; token [= word])), as the status reads
// read it: `wait=<seconds>` holds the answer until the payment's status changes; other preferences, and
// whatever follows a part that does not parse, are ignored, as the RFC asks of what a server does not
// understand.
const token = "[-!#$%&'*+.^_`|~0-9A-Za-z]+"
const word = `(?:${token}|"(?:[ !#-\\[\\]-~]|\\\\[ -~])*")`
// Empty list elements (`wait=1,,x`) are allowed, as RFC 9110 5.6.1 asks of a recipient.
const pairAt = new RegExp(`[ \\t]*((?:,[ \\t]*)+|;[ \\t]*)?(${token})(?:[ \\t]*=[ \\t]*(${word}))?`, 'y')

/** The seconds of a `Prefer` value's first `wait` preference (RFC 7240 4.3), or undefined. */
export function preferredWaitSeconds(prefer: string): number | undefined {
  pairAt.lastIndex = 0
  let first = true
  for (let m = pairAt.exec(prefer); m; m = pairAt.exec(prefer)) {
    const isPreference = first || m[1]?.startsWith(',')
    first = false
    if (!isPreference || m[2]!.toLowerCase() !== 'wait') continue
    // Only the first occurrence of a preference counts.
    const value = m[3]?.startsWith('"') ? m[3].slice(1, -1) : m[3]
    return value !== undefined && /^\d{1,9}$/.test(value) ? Number(value) : undefined
  }
  return undefined
}

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
