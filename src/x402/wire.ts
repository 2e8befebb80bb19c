/**
 * x402 v2 HTTP headers as the published packages write them: base64 of UTF-8 JSON. `PAYMENT-REQUIRED`
 * (the resource's terms) is read with a schema; nothing else of it is trusted.
 */
import * as z from 'zod/mini'

const Text = z.string().check(z.minLength(1), z.maxLength(4096))

export const AcceptedRequirement = z.looseObject({
  scheme: Text,
  network: Text,
  amount: Text,
  asset: Text,
  payTo: Text,
  maxTimeoutSeconds: z.int().check(z.positive()),
  extra: z.optional(z.record(z.string(), z.unknown())),
})
export type AcceptedRequirement = z.infer<typeof AcceptedRequirement>

const PaymentRequired = z.looseObject({
  x402Version: z.literal(2),
  resource: z.optional(z.unknown()),
  accepts: z.array(AcceptedRequirement).check(z.minLength(1), z.maxLength(64)),
  extensions: z.optional(z.record(z.string(), z.unknown())),
})
export type PaymentRequired = z.infer<typeof PaymentRequired>

/** The decoded `PAYMENT-RESPONSE`: the facilitator's settlement as the resource server relays it. */
export interface SettleResponse {
  success: boolean
  transaction: string
  network: string
  payer?: string
  errorReason?: string
  [key: string]: unknown
}

export function parsePaymentRequired(value: unknown): PaymentRequired | undefined {
  const parsed = z.safeParse(PaymentRequired, value)
  return parsed.success ? parsed.data : undefined
}

/** The header's JSON, or undefined when it is absent or not base64 JSON. */
export function decodeHeader(value: string | null): unknown {
  if (value === null || value.length > 65_536) return undefined
  try {
    const binary = globalThis.atob(value)
    return JSON.parse(new TextDecoder().decode(Uint8Array.from(binary, (c) => c.charCodeAt(0))))
  } catch {
    return undefined
  }
}

export function encodeHeader(value: unknown): string {
  const bytes = new TextEncoder().encode(JSON.stringify(value))
  return globalThis.btoa(Array.from(bytes, (b) => String.fromCharCode(b)).join(''))
}
