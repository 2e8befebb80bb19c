import type { MandatePolicy, Signer } from '../actions/types.js'
import type { GatewayApi } from '../client/gatewayApi.js'
import type { GatewayPayment, PaymentOption } from '../contract/gateway.js'
import type { PaymentReview, Reviewer } from '../review/types.js'
import type { CollectDataUrlOptions } from './collectData.js'
import type { PollOptions } from './poll.js'
import type { FlowSnapshot } from './snapshot.js'
import type { PaymentResult } from './types.js'

export interface CollectDataRequest {
  /** The form URL with `prefill`/`theme`/`themeVariables` applied. */
  url: string
  schema?: string
  /** The `error` text of the previous attempt's `IC_ERROR`, when retrying. */
  error?: string
}

/** Opens the hosted form and resolves with the message it posted (`event.data`, string or object). */
export type CollectDataHandler = (request: CollectDataRequest) => Promise<unknown>

export interface ReconcileRequest {
  index: number
  chainId: string
  method: string
  params: readonly unknown[]
}

export interface PaymentFlowOptions {
  gateway: GatewayApi
  paymentId: string
  /** One signer per namespace; only their accounts are advertised. */
  signers: readonly Signer[]
  /** The signing guard; on by default. With it off there is no review. */
  guard?: 'on' | 'off'
  /**
   * Describes what the guard approved, for the `review` event, `review()` and `onReview`:
   * `createReviewer({ assets })` from caipay/review (an entry of its own, outside the core's budget).
   */
  review?: Reviewer
  /**
   * Asked before anything of an option is signed (and again for each round built after `quote_expired`),
   * with the review of exactly what will be signed; false refuses the payment as a user rejection.
   */
  onReview?: (review: PaymentReview) => boolean | Promise<boolean>
  poll?: PollOptions
  /** Stops local work at once (PayError `aborted`); the payment itself is left as it is. */
  signal?: AbortSignal
  /** Lets `execute()` drive the data-collection form itself (otherwise call `completeCollectData`). */
  onCollectData?: CollectDataHandler
  collectDataUrl?: CollectDataUrlOptions
  /** Awaited at every checkpoint of `execute()`, notably before each signer call and after each result. */
  persist?: (snapshot: FlowSnapshot) => void | Promise<void>
  /**
   * After a crash while an action was with its signer, says what became of it: its result (e.g. a
   * transaction hash found on chain) to reuse, or null to sign again. Without it, an unrecorded
   * broadcasting action (`eth_sendTransaction`) fails the flow with `action_in_doubt`.
   */
  reconcile?: (request: ReconcileRequest) => Promise<string | null | undefined>
  /**
   * Lets the guard sign a subscription's mandate (a Permit2 or SPL allowance) within its option's terms,
   * and records each one granted: `createMandates({ signers, store })` from caipay/subscriptions, which
   * also lists and revokes them. Without it no mandate is signed. Needs the guard on.
   */
  mandates?: MandatePolicy
}

export type ResumeFlowOptions = Omit<PaymentFlowOptions, 'paymentId'>

export interface LoadOptionsResult {
  options: readonly PaymentOption[]
  info?: GatewayPayment
  /** Set when the flow already ended: the payment was paid or closed before this wallet got to it. */
  result?: PaymentResult
}
