/**
 * The wire format of the published WalletConnect Pay SDK (`@walletconnect/pay` 1.1.0, measured against
 * its WASM): what it sends to and expects from `<baseUrl>/v1/gateway/payment/{id}/...`. Server only.
 */
import * as z from 'zod/mini'
import { Amount, Caip2, Caip10, PaymentStatus, UnixSeconds } from '../../contract/common.js'
import { endpoint } from '../../contract/endpoint.js'
import { CancelResponse, PaymentInformation } from '../../contract/status.js'

/** A bare payment id, or a payment link percent-encoded whole (see link.ts). */
export const WcpParams = z.strictObject({ id: z.string().check(z.minLength(1), z.maxLength(2048)) })

export const WcpWalletRpcAction = z.object({
  type: z.literal('walletRpc'),
  // The SDK's field names: snake_case `chain_id`, and `params` as JSON, not a string holding it.
  data: z.object({ chain_id: Caip2, method: z.string(), params: z.array(z.unknown()) }),
})
export type WcpWalletRpcAction = z.infer<typeof WcpWalletRpcAction>
export const WcpBuildAction = z.object({ type: z.literal('build'), data: z.object({ data: z.string() }) })
export const WcpAction = z.discriminatedUnion('type', [WcpWalletRpcAction, WcpBuildAction])
export type WcpAction = z.infer<typeof WcpAction>

/** The SDK's field types; `type` on the wire (its JS API calls it `fieldType`). */
export const wcpFieldTypes = ['text', 'date', 'checkbox'] as const
export const WcpCollectData = z.object({
  fields: z.array(
    z.object({ id: z.string(), name: z.string(), required: z.boolean(), type: z.enum(wcpFieldTypes) }),
  ),
  url: z.optional(z.string()),
  /** The JSON Schema as JSON (the SDK hands it to the wallet as a string). */
  schema: z.optional(z.unknown()),
})
export type WcpCollectData = z.infer<typeof WcpCollectData>

export const WcpPaymentOption = z.object({
  id: z.string(),
  account: z.string(),
  amount: Amount,
  etaS: z.int().check(z.minimum(0)),
  expiresAt: UnixSeconds,
  actions: z.array(WcpAction),
  collectData: z.optional(WcpCollectData),
})
export type WcpPaymentOption = z.infer<typeof WcpPaymentOption>

export const WcpPaymentInfo = z.object({
  status: PaymentStatus,
  amount: Amount,
  expiresAt: UnixSeconds,
  merchant: z.object({ name: z.string(), iconUrl: z.optional(z.string()) }),
})
export type WcpPaymentInfo = z.infer<typeof WcpPaymentInfo>

export const WcpOptionsQuery = z.object({ includePaymentInfo: z.optional(z.enum(['true', 'false'])) })
export const WcpOptionsBody = z.object({
  accounts: z.array(Caip10).check(z.minLength(1), z.maxLength(50)),
  refresh: z.optional(z.array(z.string().check(z.maxLength(64))).check(z.maxLength(50))),
})
export const WcpOptionsResponse = z.object({
  options: z.array(WcpPaymentOption),
  info: z.optional(WcpPaymentInfo),
})
export type WcpOptionsResponse = z.infer<typeof WcpOptionsResponse>

export const WcpFetchBody = z.object({
  optionId: z.string().check(z.minLength(1), z.maxLength(64)),
  /** The build action's data, or empty when the SDK holds no actions of this option. */
  data: z.string().check(z.maxLength(65_536)),
})
export const WcpFetchResponse = z.object({ actions: z.array(WcpWalletRpcAction) })
export type WcpFetchResponse = z.infer<typeof WcpFetchResponse>

export const WcpConfirmBody = z.object({
  optionId: z.string().check(z.minLength(1), z.maxLength(64)),
  /** One object per action, in order; a walletRpc result is its one string in `data`. */
  results: z
    .array(
      z.object({
        type: z.literal('walletRpc'),
        data: z.array(z.string().check(z.maxLength(65_536))).check(z.length(1)),
      }),
    )
    .check(z.minLength(1), z.maxLength(32)),
  collectedData: z.optional(
    z.object({
      fields: z
        .array(
          z.object({ id: z.string().check(z.maxLength(64)), value: z.string().check(z.maxLength(1024)) }),
        )
        .check(z.maxLength(20)),
    }),
  ),
})
export type WcpConfirmBody = z.infer<typeof WcpConfirmBody>

/** The failure codes the SDK can parse. */
export const wcpFailureCodes = [
  'declined_user',
  'internal_error',
  'authorization_expired',
  'broadcast_failed',
] as const

export const WcpStatusResponse = z.object({
  status: PaymentStatus,
  isFinal: z.boolean(),
  pollInMs: z.nullable(z.int().check(z.minimum(0))),
  info: z.optional(PaymentInformation),
  failureCode: z.optional(z.enum(wcpFailureCodes)),
})
export type WcpStatusResponse = z.infer<typeof WcpStatusResponse>

const base = '/wcp/v1/gateway/payment/:id'

export const wcpEndpoints = {
  getPayment: endpoint({
    method: 'GET',
    path: base,
    auth: 'gateway',
    params: WcpParams,
    response: WcpPaymentInfo,
    status: 200,
    errors: ['payment_not_found'],
    summary: 'Payment info (WalletConnect Pay SDK wire format)',
  }),
  status: endpoint({
    method: 'GET',
    path: `${base}/status`,
    auth: 'gateway',
    params: WcpParams,
    response: WcpStatusResponse,
    status: 200,
    errors: ['payment_not_found'],
    summary: 'Payment status (WalletConnect Pay SDK wire format)',
  }),
  options: endpoint({
    method: 'POST',
    path: `${base}/options`,
    auth: 'gateway',
    params: WcpParams,
    query: WcpOptionsQuery,
    body: WcpOptionsBody,
    response: WcpOptionsResponse,
    status: 200,
    errors: ['payment_not_found', 'payment_expired', 'invalid_state', 'sanctioned_user'],
    summary: 'Payment options (WalletConnect Pay SDK wire format)',
  }),
  fetch: endpoint({
    method: 'POST',
    path: `${base}/fetch`,
    auth: 'gateway',
    params: WcpParams,
    body: WcpFetchBody,
    response: WcpFetchResponse,
    status: 200,
    errors: ['payment_not_found', 'payment_expired', 'invalid_state', 'quote_expired'],
    summary: 'Resolve one build action (WalletConnect Pay SDK wire format)',
  }),
  confirm: endpoint({
    method: 'POST',
    path: `${base}/confirm`,
    auth: 'gateway',
    params: WcpParams,
    body: WcpConfirmBody,
    response: WcpStatusResponse,
    status: 200,
    errors: ['payment_not_found', 'payment_expired', 'invalid_state', 'quote_expired', 'sanctioned_user'],
    summary: 'Confirm (WalletConnect Pay SDK wire format)',
  }),
  cancel: endpoint({
    method: 'POST',
    path: `${base}/cancel`,
    auth: 'gateway',
    params: WcpParams,
    response: CancelResponse,
    status: 200,
    errors: ['payment_not_found', 'payment_expired', 'invalid_state'],
    summary: 'Cancel (WalletConnect Pay SDK wire format)',
  }),
} as const
