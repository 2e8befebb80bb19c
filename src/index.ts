// The wallet library: everything a wallet app needs to pay a payment link. No Node built-ins here.

export { type ApprovedAction, type ApprovedOption, type GuardContext, guardActions } from './actions/guard.js'
export { createSignerRegistry, knownNamespaces, type SignerRegistry } from './actions/registry.js'
export { isUserRejection, userRejectedCode } from './actions/rejection.js'
export type {
  ActionInspection,
  AssetInfo,
  GrantedMandate,
  InspectedMandate,
  InspectedTransfer,
  KnownAsset,
  MandateContext,
  MandateGrant,
  MandatePolicy,
  MandateStatus,
  SignatureStatus,
  Signer,
  SignerRequest,
  StoredMandate,
} from './actions/types.js'
export { formatAmount, fromDecimalString, parseMinor, toDecimalString } from './amount/amount.js'
export {
  type AccountId,
  type AssetId,
  type ChainId,
  canonicalCaip,
  formatAccountId,
  isAccountId,
  isAssetId,
  isChainId,
  isValidAddress,
  namespaceOf,
  parseAccountId,
  parseAssetId,
  parseChainId,
  sameCaip,
} from './caip/caip.js'
export { createGatewayClient, type GatewayClientConfig } from './client/gateway.js'
export type { CallOptions, GatewayApi } from './client/gatewayApi.js'
export type { Credentials, Fetch } from './client/http.js'
export { defaultRetryPolicy, type RetryPolicy } from './client/retry.js'
// The catalogues of codes (serviceErrorCodes, clientErrorCodes, serviceErrorStatus) are values a wallet
// never needs at run time: they are exported by caipay/client; the core keeps their types.
export { apiVersions, type ServiceErrorCode } from './contract/errors.js'
export type { SubscriptionTerms } from './contract/gateway.js'
// Types only from the zod contract modules: importing their values would bundle zod (the core checks with
// the JSON Schemas generated from them, src/contract/generated).
export type {
  Action,
  Amount,
  AmountDisplay,
  CollectData,
  ConfirmResponse,
  GatewayPayment,
  OptionsResponse,
  PaymentOption,
  PaymentSource,
  PaymentStatus,
  PushRequest,
  WalletRpc,
  WalletRpcAction,
} from './contract/index.js'
export type { StatusResponse } from './contract/status.js'
export { broadcastingMethods } from './contract/walletMethods.js'
export {
  type ClientErrorCode,
  isPayError,
  PayError,
  type PayErrorCode,
  type PayErrorOptions,
} from './errors/PayError.js'
export {
  buildCollectDataUrl,
  type CollectDataMessage,
  type CollectDataUrlOptions,
  parseCollectDataMessage,
} from './flow/collectData.js'
export {
  type CollectDataHandler,
  type CollectDataRequest,
  createPaymentFlow,
  type LoadOptionsResult,
  type PaymentFlow,
  type PaymentFlowOptions,
  type ReconcileRequest,
  type ResumeFlowOptions,
  resumePaymentFlow,
} from './flow/createPaymentFlow.js'
export { isPushOption, pushFallback } from './flow/options.js'
export type { PollOptions } from './flow/poll.js'
export { type FlowSnapshot, parseFlowSnapshot } from './flow/snapshot.js'
export {
  canTransition,
  type FlowState,
  flowStates,
  flowTransitions,
  isTerminalState,
  type TerminalState,
  terminalStates,
} from './flow/states.js'
export type {
  ActionEvent,
  CollectDataEvent,
  FlowEvents,
  OptionsEvent,
  PaymentResult,
  StateEvent,
  StatusEvent,
} from './flow/types.js'
export { type ParsePaymentLinkOptions, type PaymentLink, parsePaymentLink } from './link/parsePaymentLink.js'
export {
  createPayClient,
  type FlowOverrides,
  type PayClient,
  type PayClientConfig,
  type PayOptions,
} from './pay/createPayClient.js'
// The review's types; its code (createReviewer) is in caipay/review, outside the core's budget.
export type { PaymentReview, ReviewContext, Reviewer } from './review/types.js'
