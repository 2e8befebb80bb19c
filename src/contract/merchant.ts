import * as z from 'zod/mini'
import { parseAccountId, parseAssetId } from '../caip/caip.js'
import { Caip10, Caip19, Cursor, httpUrlPattern, limitQuery } from './common.js'

export const merchantStatuses = ['active', 'inactive', 'suspended'] as const
export const MerchantStatus = z.enum(merchantStatuses)
export type MerchantStatus = z.infer<typeof MerchantStatus>

// Bounds apply to the text as sent (so the published schema states them); it is stored trimmed.
const MerchantName = z
  .string()
  .check(z.minLength(1), z.maxLength(256), z.regex(/\S/, 'Expected a name, not only spaces.'), z.trim())
const MerchantEmail = z.email().check(z.maxLength(320))
export const IconUrl = z
  .string()
  .check(z.maxLength(2048), z.regex(httpUrlPattern('https'), 'Expected an https URL.'))

export const CryptoSettlement = z.object({ id: z.string(), asset: Caip19, destination: Caip10 })
export type CryptoSettlement = z.infer<typeof CryptoSettlement>

export const FiatSettlement = z.looseObject({ id: z.string() })

export const SettlementsResponse = z.object({
  crypto: z.array(CryptoSettlement),
  fiat: z.array(FiatSettlement),
})
export type SettlementsResponse = z.infer<typeof SettlementsResponse>

export const Merchant = z.object({
  id: z.string(),
  name: z.string(),
  email: z.string(),
  iconUrl: z.nullable(z.string()),
  status: MerchantStatus,
  createdAt: z.string(),
  settlements: z.optional(SettlementsResponse),
})
export type Merchant = z.infer<typeof Merchant>

export const MerchantCreateBody = z.strictObject({
  merchantName: MerchantName,
  merchantEmail: MerchantEmail,
  iconUrl: z.optional(z.nullable(IconUrl)),
})
export type MerchantCreateBody = z.infer<typeof MerchantCreateBody>

export const MerchantUpdateBody = z
  .strictObject({
    merchantName: z.optional(MerchantName),
    merchantEmail: z.optional(MerchantEmail),
    iconUrl: z.optional(z.nullable(IconUrl)),
  })
  .check(
    z.refine((body) => Object.keys(body).length > 0, 'At least one of merchantName, merchantEmail, iconUrl.'),
  )
export type MerchantUpdateBody = z.infer<typeof MerchantUpdateBody>

export const MerchantResponse = z.object({ merchant: Merchant })
export type MerchantResponse = z.infer<typeof MerchantResponse>

export const MerchantListQuery = z.strictObject({
  status: z.optional(MerchantStatus),
  search: z.optional(z.string().check(z.maxLength(256))),
  cursor: z.optional(Cursor),
  limit: limitQuery(100),
})
export type MerchantListQuery = z.infer<typeof MerchantListQuery>

export const MerchantListResponse = z.object({ data: z.array(Merchant), nextCursor: z.nullable(z.string()) })
export type MerchantListResponse = z.infer<typeof MerchantListResponse>

export const MerchantIdParams = z.strictObject({
  merchantId: z.string().check(z.minLength(1), z.maxLength(64)),
})
export const SettlementIdParams = z.strictObject({
  merchantId: z.string().check(z.minLength(1), z.maxLength(64)),
  id: z.string().check(z.minLength(1), z.maxLength(64)),
})

function sameChain(entry: { asset: string; destination: string }): boolean {
  try {
    return parseAssetId(entry.asset).chainId === parseAccountId(entry.destination).chainId
  } catch {
    return false
  }
}

export const CryptoSettlementInput = z.strictObject({ asset: Caip19, destination: Caip10 }).check(
  z.refine(sameChain, {
    message: 'destination must be on the same chain as asset.',
    path: ['destination'],
  }),
)

export const CryptoSettlementCreateBody = z.strictObject({
  settlements: z.array(CryptoSettlementInput).check(z.minLength(1), z.maxLength(50)),
})
export type CryptoSettlementCreateBody = z.infer<typeof CryptoSettlementCreateBody>

export const CryptoSettlementCreateResponse = z.object({ settlements: z.array(CryptoSettlement) })
export type CryptoSettlementCreateResponse = z.infer<typeof CryptoSettlementCreateResponse>

export const CryptoSettlementUpdateBody = z.strictObject({ destination: Caip10 })
export type CryptoSettlementUpdateBody = z.infer<typeof CryptoSettlementUpdateBody>

export const CryptoSettlementResponse = CryptoSettlement
