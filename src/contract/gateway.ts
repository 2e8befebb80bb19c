import * as z from 'zod/mini'
import { isAccountId, isAssetId } from '../caip/caip.js'
import { Amount, Caip10, MinorUnits, PaymentStatus, ResponseCaip2, UnixSeconds } from './common.js'
import { PaymentInformation } from './status.js'

export const GatewayPayment = z.object({
  paymentId: z.string(),
  status: PaymentStatus,
  amount: Amount,
  expiresAt: UnixSeconds,
  merchant: z.object({ name: z.string(), iconUrl: z.nullable(z.string()) }),
})
export type GatewayPayment = z.infer<typeof GatewayPayment>

export const WalletRpc = z.object({
  chainId: ResponseCaip2,
  method: z.string().check(z.minLength(1), z.maxLength(128)),
  /** A JSON array, as a string: parse it to use it. */
  params: z.string(),
})
export type WalletRpc = z.infer<typeof WalletRpc>

export const WalletRpcAction = z.object({ type: z.literal('walletRpc'), walletRpc: WalletRpc })
export type WalletRpcAction = z.infer<typeof WalletRpcAction>
export const BuildAction = z.object({ type: z.literal('build'), build: z.object({ data: z.string() }) })
export type BuildAction = z.infer<typeof BuildAction>
export const Action = z.discriminatedUnion('type', [WalletRpcAction, BuildAction])
export type Action = z.infer<typeof Action>

export const CollectData = z.object({ url: z.string(), schema: z.optional(z.string()) })
export type CollectData = z.infer<typeof CollectData>

/**
 * The terms of a subscription option (docs/subscriptions.md): what the mandate the wallet signs may grant.
 * The wallet's guard checks the grant against these (never more than `amountPerPeriod` x `periods`, never
 * past `endAt`, only to `spender`, only in `asset`) and the server charges at most one period's price per
 * period.
 */
export const SubscriptionTerms = z.object({
  subscriptionId: z.string(),
  /** The asset charged each period (CAIP-19). */
  asset: z.string().check(z.refine(isAssetId, 'Expected a CAIP-19 asset id.')),
  /** One period's price in the asset's smallest unit. */
  amountPerPeriod: MinorUnits,
  interval: z.enum(['day', 'week', 'month', 'year']),
  intervalCount: z.int().check(z.minimum(1)),
  /** Periods still to charge, this option's first charge included; null when only `endAt` bounds them. */
  periods: z.nullable(z.int().check(z.minimum(1))),
  /** Unix seconds: nothing is charged after it, and the mandate expires by then. */
  endAt: UnixSeconds,
  /** The charging address the mandate names as its spender (EVM) or delegate (Solana), as CAIP-10. */
  spender: z.string().check(z.refine(isAccountId, 'Expected a CAIP-10 account id.')),
})
export type SubscriptionTerms = z.infer<typeof SubscriptionTerms>

/** How a payment's money arrives (docs/push-payments.md): the wallet signs (`pull`), the buyer sends (`push`), or a mandate is charged. */
export const PaymentSource = z.enum(['pull', 'push', 'mandate'])
export type PaymentSource = z.infer<typeof PaymentSource>

/**
 * A push option's request (docs/push-payments.md): a transfer the buyer sends from any wallet, found by
 * its `reference`. The wallet library never signs anything for it: it shows `url` (a QR code, a link).
 */
export const PushRequest = z.object({
  /** A Solana Pay transfer request (`solana:<recipient>?amount=...&spl-token=...&reference=...`). */
  url: z.string().check(z.minLength(1), z.maxLength(2048)),
  /** A Solana Pay transaction request (`solana:https://...`), when the service is reached over https. */
  transactionUrl: z.optional(z.string().check(z.maxLength(2048))),
  /** The payment's reference key (base58): one per payment, stable across options calls. */
  reference: z.string(),
  /** The owner the transfer must reach (its associated token account of `asset` receives it). */
  recipient: z.string(),
  /** The asset to send (CAIP-19). */
  asset: z.string().check(z.refine(isAssetId, 'Expected a CAIP-19 asset id.')),
  /** The exact amount to send, in the asset's smallest unit. */
  amount: MinorUnits,
  /** Unix seconds: a transfer found after this is held for the operator, not taken as the payment. */
  expiresAt: UnixSeconds,
})
export type PushRequest = z.infer<typeof PushRequest>

export const PaymentOption = z.object({
  id: z.string(),
  account: z.string(),
  amount: Amount,
  etaS: z.int().check(z.minimum(0)),
  expiresAt: UnixSeconds,
  actions: z.array(Action),
  collectData: z.optional(CollectData),
  /** Present only on a subscription's option: the terms its mandate is checked against. */
  subscription: z.optional(SubscriptionTerms),
  /** How this option's money arrives; absent: `pull` (the wallet signs the actions). */
  source: z.optional(PaymentSource),
  /** Present only on a push option (`source: "push"`, no actions): the transfer to send. */
  push: z.optional(PushRequest),
})
export type PaymentOption = z.infer<typeof PaymentOption>

export const OptionsBody = z.strictObject({
  accounts: z.array(Caip10).check(z.maxLength(50)),
  refresh: z.optional(z.array(z.string().check(z.maxLength(64))).check(z.maxLength(50))),
})
export type OptionsBody = z.infer<typeof OptionsBody>

export const OptionsResponse = z.object({
  options: z.array(PaymentOption),
  info: z.optional(GatewayPayment),
  collectData: z.optional(CollectData),
  resultInfo: z.optional(PaymentInformation),
})
export type OptionsResponse = z.infer<typeof OptionsResponse>

export const FetchBody = z.strictObject({
  optionId: z.string().check(z.minLength(1), z.maxLength(64)),
  data: z.string().check(z.maxLength(65_536)),
})
export type FetchBody = z.infer<typeof FetchBody>
export const FetchResponse = z.object({ actions: z.array(WalletRpcAction) })
export type FetchResponse = z.infer<typeof FetchResponse>

export const ConfirmBody = z.strictObject({
  optionId: z.string().check(z.minLength(1), z.maxLength(64)),
  results: z.array(z.string().check(z.maxLength(65_536))).check(z.minLength(1), z.maxLength(32)),
})
export type ConfirmBody = z.infer<typeof ConfirmBody>
export const ConfirmResponse = z.object({
  status: PaymentStatus,
  isFinal: z.boolean(),
  pollInMs: z.nullable(z.int().check(z.minimum(0))),
})
export type ConfirmResponse = z.infer<typeof ConfirmResponse>
