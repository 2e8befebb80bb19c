import type * as z from 'zod/mini'
import { DeletedResponse } from './common.js'
import {
  ConfirmBody,
  ConfirmResponse,
  FetchBody,
  FetchResponse,
  GatewayPayment,
  OptionsBody,
  OptionsResponse,
} from './gateway.js'
import {
  CryptoSettlementCreateBody,
  CryptoSettlementCreateResponse,
  CryptoSettlementResponse,
  CryptoSettlementUpdateBody,
  MerchantCreateBody,
  MerchantIdParams,
  MerchantListQuery,
  MerchantListResponse,
  MerchantResponse,
  MerchantUpdateBody,
  SettlementIdParams,
  SettlementsResponse,
} from './merchant.js'
import {
  CancelResponse,
  MerchantPaymentListQuery,
  Payment,
  PaymentCreateBody,
  PaymentCreateResponse,
  PaymentIdParams,
  PaymentListQuery,
  PaymentListResponse,
  RefundBody,
  RefundResponse,
  SimulateBody,
  StatusResponse,
} from './payment.js'

/**
 * Who may call an endpoint:
 * - `partner`: a partner-role `Api-Key`;
 * - `merchant`: a partner-role `Api-Key` plus `Merchant-Id`;
 * - `gateway`: an `Api-Key` of any role, or `App-Id` + `Client-Id`.
 */
export type EndpointAuth = 'partner' | 'merchant' | 'gateway'

export interface Endpoint {
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE'
  /** Fastify-style path (`:param`). */
  path: string
  auth: EndpointAuth
  params?: z.ZodMiniType
  query?: z.ZodMiniType
  body?: z.ZodMiniType
  response: z.ZodMiniType
  /** HTTP status of success. */
  status: 200 | 201
  idempotencyKey?: 'required' | 'optional'
  deprecated?: boolean
  summary: string
}

function endpoint<const E extends Endpoint>(e: E): E {
  return e
}

/** The whole contract: spec rows 1-23 plus the sandbox simulate endpoint. Server and clients both read it. */
export const endpoints = {
  listMerchants: endpoint({
    method: 'GET',
    path: '/v1/merchants',
    auth: 'partner',
    query: MerchantListQuery,
    response: MerchantListResponse,
    status: 200,
    summary: 'List merchants',
  }),
  createMerchant: endpoint({
    method: 'POST',
    path: '/v1/merchants',
    auth: 'partner',
    body: MerchantCreateBody,
    response: MerchantResponse,
    status: 201,
    idempotencyKey: 'required',
    summary: 'Create a merchant',
  }),
  getMerchant: endpoint({
    method: 'GET',
    path: '/v1/merchants/:merchantId',
    auth: 'partner',
    params: MerchantIdParams,
    response: MerchantResponse,
    status: 200,
    summary: 'Read a merchant with its settlements',
  }),
  updateMerchant: endpoint({
    method: 'PATCH',
    path: '/v1/merchants/:merchantId',
    auth: 'partner',
    params: MerchantIdParams,
    body: MerchantUpdateBody,
    response: MerchantResponse,
    status: 200,
    summary: 'Update a merchant',
  }),
  deleteMerchant: endpoint({
    method: 'DELETE',
    path: '/v1/merchants/:merchantId',
    auth: 'partner',
    params: MerchantIdParams,
    response: DeletedResponse,
    status: 200,
    summary: 'Delete a merchant (soft, idempotent)',
  }),
  listSettlements: endpoint({
    method: 'GET',
    path: '/v1/merchants/:merchantId/settlements',
    auth: 'partner',
    params: MerchantIdParams,
    response: SettlementsResponse,
    status: 200,
    summary: 'List settlement destinations',
  }),
  createCryptoSettlements: endpoint({
    method: 'POST',
    path: '/v1/merchants/:merchantId/settlements/crypto',
    auth: 'partner',
    params: MerchantIdParams,
    body: CryptoSettlementCreateBody,
    response: CryptoSettlementCreateResponse,
    status: 201,
    idempotencyKey: 'required',
    summary: 'Register crypto settlement destinations',
  }),
  updateCryptoSettlement: endpoint({
    method: 'PUT',
    path: '/v1/merchants/:merchantId/settlements/crypto/:id',
    auth: 'partner',
    params: SettlementIdParams,
    body: CryptoSettlementUpdateBody,
    response: CryptoSettlementResponse,
    status: 200,
    summary: 'Change a settlement destination',
  }),
  deleteCryptoSettlement: endpoint({
    method: 'DELETE',
    path: '/v1/merchants/:merchantId/settlements/crypto/:id',
    auth: 'partner',
    params: SettlementIdParams,
    response: DeletedResponse,
    status: 200,
    summary: 'Remove a crypto settlement',
  }),
  createPayment: endpoint({
    method: 'POST',
    path: '/v1/payments',
    auth: 'merchant',
    body: PaymentCreateBody,
    response: PaymentCreateResponse,
    status: 201,
    idempotencyKey: 'optional',
    summary: 'Create a payment',
  }),
  listPayments: endpoint({
    method: 'GET',
    path: '/v1/payments',
    auth: 'partner',
    query: PaymentListQuery,
    response: PaymentListResponse,
    status: 200,
    summary: "List the partner's payments",
  }),
  getPayment: endpoint({
    method: 'GET',
    path: '/v1/payments/:id',
    auth: 'merchant',
    params: PaymentIdParams,
    response: Payment,
    status: 200,
    summary: 'Read a payment',
  }),
  getPaymentStatus: endpoint({
    method: 'GET',
    path: '/v1/payments/:id/status',
    auth: 'merchant',
    params: PaymentIdParams,
    response: StatusResponse,
    status: 200,
    summary: 'Payment status',
  }),
  listMerchantPayments: endpoint({
    method: 'GET',
    path: '/v1/merchants/payments',
    auth: 'merchant',
    query: MerchantPaymentListQuery,
    response: PaymentListResponse,
    status: 200,
    summary: "List the merchant's payments",
  }),
  listMerchantPaymentsDeprecated: endpoint({
    method: 'GET',
    path: '/v1/merchants/:merchantId/payments',
    auth: 'partner',
    params: MerchantIdParams,
    query: MerchantPaymentListQuery,
    response: PaymentListResponse,
    status: 200,
    deprecated: true,
    summary: "List the merchant's payments (deprecated: use /v1/merchants/payments)",
  }),
  cancelPayment: endpoint({
    method: 'POST',
    path: '/v1/payments/:id/cancel',
    auth: 'merchant',
    params: PaymentIdParams,
    response: CancelResponse,
    status: 200,
    idempotencyKey: 'optional',
    summary: 'Cancel a payment (merchant)',
  }),
  createRefund: endpoint({
    method: 'POST',
    path: '/v1/refunds',
    auth: 'merchant',
    body: RefundBody,
    response: RefundResponse,
    status: 200,
    idempotencyKey: 'optional',
    summary: 'Mark a payment refunded (full)',
  }),
  simulatePayment: endpoint({
    method: 'POST',
    path: '/v1/test/payments/:id/simulate',
    auth: 'merchant',
    params: PaymentIdParams,
    body: SimulateBody,
    response: StatusResponse,
    status: 200,
    summary: 'Force an outcome (test mode only)',
  }),

  gatewayGetPayment: endpoint({
    method: 'GET',
    path: '/v1/gateway/payment/:id',
    auth: 'gateway',
    params: PaymentIdParams,
    response: GatewayPayment,
    status: 200,
    summary: 'Payment info for display',
  }),
  gatewayGetStatus: endpoint({
    method: 'GET',
    path: '/v1/gateway/payment/:id/status',
    auth: 'gateway',
    params: PaymentIdParams,
    response: StatusResponse,
    status: 200,
    summary: 'Payment status (wallet)',
  }),
  gatewayOptions: endpoint({
    method: 'POST',
    path: '/v1/gateway/payment/:id/options',
    auth: 'gateway',
    params: PaymentIdParams,
    body: OptionsBody,
    response: OptionsResponse,
    status: 200,
    idempotencyKey: 'optional',
    summary: 'Payment options for the wallet accounts',
  }),
  gatewayFetch: endpoint({
    method: 'POST',
    path: '/v1/gateway/payment/:id/fetch',
    auth: 'gateway',
    params: PaymentIdParams,
    body: FetchBody,
    response: FetchResponse,
    status: 200,
    idempotencyKey: 'optional',
    summary: "Resolve an option's build actions",
  }),
  gatewayCancel: endpoint({
    method: 'POST',
    path: '/v1/gateway/payment/:id/cancel',
    auth: 'gateway',
    params: PaymentIdParams,
    response: CancelResponse,
    status: 200,
    idempotencyKey: 'optional',
    summary: 'Cancel a payment (wallet)',
  }),
  gatewayConfirm: endpoint({
    method: 'POST',
    path: '/v1/gateway/payment/:id/confirm',
    auth: 'gateway',
    params: PaymentIdParams,
    body: ConfirmBody,
    response: ConfirmResponse,
    status: 200,
    idempotencyKey: 'optional',
    summary: 'Confirm with the action results',
  }),
} as const

export type Endpoints = typeof endpoints
export type EndpointName = keyof Endpoints
