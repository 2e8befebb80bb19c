import * as z from 'zod/mini'
import { Amount, PaymentStatus } from './common.js'

// Payment schemas the wallet gateway shares with the merchant API, apart so the wallet core bundles only these.

export const PaymentId = z
  .string()
  .check(z.minLength(1), z.maxLength(64), z.regex(/^pay_[A-Za-z0-9]+$/, 'Expected a payment id (pay_...).'))
export const PaymentIdParams = z.strictObject({ id: PaymentId })

// RFC 7240 `Prefer` (1#preference; preference = token [= word] *(; token [= word])), what the status reads
// accept: `wait=<seconds>` holds the answer until the payment's status changes, other preferences are
// ignored as the RFC asks, and a value outside the grammar is `400 invalid_params`.
const token = "[-!#$%&'*+.^_`|~0-9A-Za-z]+"
const word = `(?:${token}|"(?:[ !#-\\[\\]-~]|\\\\[ -~])*")`
const pair = `${token}(?:[ \\t]*=[ \\t]*${word})?`
const preference = `${pair}(?:[ \\t]*;[ \\t]*${pair})*`
export const preferPattern = new RegExp(`^${preference}(?:[ \\t]*,[ \\t]*${preference})*$`)
export const PreferHeader = z
  .string()
  .check(z.maxLength(1024), z.regex(preferPattern, 'Expected RFC 7240 preferences, e.g. wait=10.'))

const pairAt = new RegExp(`[ \\t]*([,;]?)[ \\t]*(${token})(?:[ \\t]*=[ \\t]*(${word}))?`, 'y')

/** The seconds of a `Prefer` value's `wait` preference (RFC 7240 4.3), or undefined; the value matches PreferHeader. */
export function preferredWaitSeconds(prefer: string): number | undefined {
  pairAt.lastIndex = 0
  let first = true
  for (let m = pairAt.exec(prefer); m; m = pairAt.exec(prefer)) {
    const isPreference = first || m[1] === ','
    first = false
    if (!isPreference || m[2]!.toLowerCase() !== 'wait' || m[3] === undefined) continue
    const value = m[3].startsWith('"') ? m[3].slice(1, -1) : m[3]
    if (/^\d{1,9}$/.test(value)) return Number(value)
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
