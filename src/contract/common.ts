import * as z from 'zod/mini'
import {
  accountIdPattern,
  assetIdPattern,
  chainIdPattern,
  isAccountId,
  isAssetId,
  isChainId,
} from '../caip/caip.js'
import { fiatUnits } from './currencies.js'
import { paymentStatuses } from './statuses.js'

export { finalStatuses, isFinalStatus, paymentStatuses } from './statuses.js'

export const PaymentStatus = z.enum(paymentStatuses)
export type PaymentStatus = z.infer<typeof PaymentStatus>

// The CAIP patterns are regexes, so the published JSON Schema states them as `pattern`; only what a
// regex cannot say (an address valid for its namespace) is a refinement, published beside it (openapi.ts).
export const Caip2 = z
  .string()
  .check(z.regex(chainIdPattern, 'Expected a CAIP-2 chain id (namespace:reference).'))
export const Caip10 = z.string().check(
  z.regex(accountIdPattern, 'Expected a CAIP-10 account id (namespace:reference:address).'),
  z.refine(
    (value) => !accountIdPattern.test(value) || isAccountId(value),
    'Expected an address valid for its namespace (eip155: 0x + 40 hex; solana: a base58 32-byte key).',
  ),
)
export const Caip19 = z
  .string()
  .check(z.regex(assetIdPattern, 'Expected a CAIP-19 asset id (chain/namespace:reference).'))

/** Minor units as a decimal integer string: no floats on the wire. */
export const MinorUnits = z
  .string()
  .check(z.regex(/^(0|[1-9][0-9]{0,38})$/, 'Expected an integer string of minor units.'))
export const PositiveMinorUnits = z
  .string()
  .check(z.regex(/^[1-9][0-9]{0,38}$/, 'Expected a positive integer string of minor units.'))

/** A fiat unit the service prices in: published as an `enum`, from the list the server prices with. */
export const FiatUnit = z.enum(fiatUnits)

/** `caip19/<CAIP-19>`: which assets this server prices is its configuration, checked when a payment is made. */
export const AssetUnit = z
  .string()
  .check(
    z.maxLength(256),
    z.regex(new RegExp(`^caip19/${assetIdPattern.source.slice(1, -1)}$`), 'Expected caip19/<asset id>.'),
  ) as unknown as z.ZodMiniType<`caip19/${string}`, `caip19/${string}`>
// (The cast only names the type the pattern guarantees, for the merchant client's types; a template
// literal schema would say the same but drops `maxLength`.)

/** `iso4217/USD` (a supported currency) or `caip19/<CAIP-19>`. */
export const AmountUnit = z.union([FiatUnit, AssetUnit], {
  error: `Expected iso4217/<currency> (one of ${fiatUnits.map((unit) => unit.slice(8)).join(', ')}) or caip19/<asset id>.`,
})
export type AmountUnit = z.infer<typeof AmountUnit>

const octet = '(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])'
const port = '(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3}))?'

/**
 * An absolute URL of `scheme` (a regex alternative, e.g. `https?`) as a regex, so the published schema
 * says exactly what is accepted: a DNS name (its last label starting with a letter) or an IPv4 address,
 * a port, then printable ASCII; no credentials, no fragment. Everything it matches parses as a URL.
 */
export function httpUrlPattern(scheme: string): RegExp {
  const host = `(?:(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\\.)*[A-Za-z](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?|${octet}(?:\\.${octet}){3})`
  return new RegExp(`^(?:${scheme})://${host}${port}(?:[/?][\\x21-\\x22\\x24-\\x7e]*)?$`)
}

/**
 * What responses carry: the same rules as refinements, which the wallet core's generated validator leaves
 * out (its bundle budget; routing refuses a malformed chain id or unit anyway). Requests use the patterns.
 */
export const ResponseCaip2 = z
  .string()
  .check(z.refine(isChainId, 'Expected a CAIP-2 chain id (namespace:reference).'))
/**
 * Any three-letter code, not only `fiatUnits`: a wallet built today keeps reading payments in a currency a
 * later server adds. The published documents state the server's list (src/server/openapi.ts).
 */
export const ResponseAmountUnit = z.string().check(
  z.maxLength(256),
  z.refine(
    (unit) => /^iso4217\/[A-Z]{3}$/.test(unit) || (unit.startsWith('caip19/') && isAssetId(unit.slice(7))),
    'Expected iso4217/<currency> or caip19/<asset id>.',
  ),
)

export const UnixSeconds = z.int().check(z.minimum(0))

export const AmountDisplay = z.object({
  assetName: z.string(),
  assetSymbol: z.string(),
  decimals: z.int().check(z.minimum(0), z.maximum(2_147_483_647)),
  iconUrl: z.optional(z.nullable(z.string())),
  networkIconUrl: z.optional(z.nullable(z.string())),
  networkName: z.optional(z.nullable(z.string())),
})
export type AmountDisplay = z.infer<typeof AmountDisplay>

export const Amount = z.object({ unit: ResponseAmountUnit, value: MinorUnits, display: AmountDisplay })
export type Amount = z.infer<typeof Amount>

/** What a caller sends: the display part is the service's to fill in. */
export const AmountInput = z.strictObject({ unit: AmountUnit, value: PositiveMinorUnits })
export type AmountInput = z.infer<typeof AmountInput>

export const ErrorResponse = z.object({
  code: z.string(),
  message: z.string(),
  issues: z.optional(z.array(z.object({ path: z.string(), message: z.string() }))),
})
export type ErrorResponse = z.infer<typeof ErrorResponse>

export const Cursor = z.string().check(z.minLength(1), z.maxLength(512))

/**
 * An integer query parameter: the text of a decimal integer (no sign, exponent, hex, spaces or
 * fraction), published as `type: integer` with its bounds.
 */
export function queryInt(min: number, max: number) {
  return z.pipe(
    z.transform((value: unknown) =>
      typeof value === 'string' && /^(0|[1-9][0-9]{0,15})$/.test(value) ? Number(value) : value,
    ),
    z.int().check(z.minimum(min), z.maximum(max)),
  )
}

/** Query-string page size. */
export function limitQuery(max: number) {
  return z.optional(queryInt(1, max))
}

export const DeletedResponse = z.object({ id: z.string(), deleted: z.literal(true) })
export type DeletedResponse = z.infer<typeof DeletedResponse>
