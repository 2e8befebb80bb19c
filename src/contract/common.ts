import * as z from 'zod/mini'
import { isAccountId, isAssetId, isChainId } from '../caip/caip.js'
import { paymentStatuses } from './statuses.js'

export { finalStatuses, isFinalStatus, paymentStatuses } from './statuses.js'

export const PaymentStatus = z.enum(paymentStatuses)
export type PaymentStatus = z.infer<typeof PaymentStatus>

export const Caip2 = z
  .string()
  .check(z.refine(isChainId, 'Expected a CAIP-2 chain id (namespace:reference).'))
export const Caip10 = z
  .string()
  .check(z.refine(isAccountId, 'Expected a CAIP-10 account id (namespace:reference:address).'))
export const Caip19 = z
  .string()
  .check(z.refine(isAssetId, 'Expected a CAIP-19 asset id (chain/namespace:reference).'))

/** Minor units as a decimal integer string: no floats on the wire. */
export const MinorUnits = z
  .string()
  .check(z.regex(/^(0|[1-9][0-9]{0,38})$/, 'Expected an integer string of minor units.'))
export const PositiveMinorUnits = z
  .string()
  .check(z.regex(/^[1-9][0-9]{0,38}$/, 'Expected a positive integer string of minor units.'))

/** `iso4217/USD` or `caip19/<CAIP-19>`. */
export const AmountUnit = z.string().check(
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

export const Amount = z.object({ unit: AmountUnit, value: MinorUnits, display: AmountDisplay })
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

/** Query-string integers arrive as text. */
export function limitQuery(max: number) {
  return z.optional(
    z.coerce.number().check(z.refine(Number.isInteger, 'Expected an integer.'), z.minimum(1), z.maximum(max)),
  )
}

export const DeletedResponse = z.object({ id: z.string(), deleted: z.literal(true) })
export type DeletedResponse = z.infer<typeof DeletedResponse>
