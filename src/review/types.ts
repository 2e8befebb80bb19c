import type { ApprovedOption } from '../actions/guard.js'
import type { AssetInfo } from '../actions/types.js'

/** An asset by its canonical CAIP-19 id: the identity the guard compared, never a name the gateway gave. */
export interface ReviewedAsset extends AssetInfo {
  id: string
  /**
   * Who vouches for `symbol`/`decimals`: the wallet's own list, the signer's node, or the signed bytes
   * themselves (an SPL `transferChecked` states its decimals and the token program enforces them).
   * Absent with neither: show the amount in minor units.
   */
  source?: 'wallet' | 'node' | 'action'
}

/**
 * What signing the action does, in the words of ERC-7730 intents: `transfer` (an ERC-20 `transfer`, a
 * native payment, an SPL transfer), `approve` (ERC-20 `approve`), `permit` (EIP-2612), `authorize`
 * (EIP-3009 `TransferWithAuthorization` / `ReceiveWithAuthorization`), `permit2` (Permit2
 * `PermitWitnessTransferFrom`), `mandate` (a subscription's standing allowance: Permit2 `PermitSingle`,
 * SPL `ApproveChecked`), `sign` (a message that moves nothing).
 */
export type ReviewIntent = 'transfer' | 'approve' | 'permit' | 'authorize' | 'permit2' | 'mandate' | 'sign'

export interface ReviewedMovement {
  asset: ReviewedAsset
  /** In the asset's minor units. */
  amount: bigint
  /** CAIP-10 recipient, as decoded; absent for an allowance (nothing moves yet). */
  to?: string
  /** CAIP-10 account that may take the amount: an allowance's spender, the contract a Permit2 pull goes through. */
  spender?: string
}

/**
 * The most the action can charge the signing account in fees: a bound the bytes set, `none` (the
 * service pays, or a signature costs nothing), or `wallet` (a transaction the wallet sends: its own
 * node sets the gas).
 */
export type ReviewedFee = { asset: ReviewedAsset; max: bigint } | 'none' | 'wallet'

export interface ReviewedAction {
  index: number
  chainId: string
  method: string
  intent: ReviewIntent
  /** CAIP-10 account that signs, whose funds move. */
  from: string
  moves: ReviewedMovement[]
  /** Unix seconds: the signature moves nothing before `validFrom` or after `validUntil`. */
  validFrom?: number
  validUntil?: number
  fee: ReviewedFee
  /**
   * A subscription's mandate as decoded (never the gateway's text): the most `spender` may pull in total,
   * until `expiration` (unix seconds; absent for an SPL delegation, which lasts until revoked).
   */
  mandate?: { asset: ReviewedAsset; amount: bigint; spender: string; expiration?: number | undefined }
}

/**
 * What the wallet is about to sign, built only from what the signing guard decoded and approved: the
 * gateway's texts (amount display, symbol, merchant name) never reach it, except the merchant name
 * under `claimedByService`.
 */
export interface PaymentReview {
  optionId: string
  actions: ReviewedAction[]
  /** What the actions move together, as the guard counted it (an allowance and a pull through it once); absent when nothing moves. */
  total?: { asset: ReviewedAsset; amount: bigint }
  /** The sum of the bounded fees, per native asset. */
  maxFees: { asset: ReviewedAsset; max: bigint }[]
  /** Some action is a transaction the wallet sends: its fee is on top of `maxFees`, set by the wallet's node. */
  walletSetsFees: boolean
  /** Unix seconds: the earliest `validUntil` of the actions (each action has its own). */
  validUntil?: number
  /** Said by the service and checked by nobody: show it as the service's claim. */
  claimedByService: { merchant?: string }
}

/** What the flow tells the reviewer besides the guard's decoding. */
export interface ReviewContext {
  optionId: string
  /** The options response's merchant name: the service's claim. */
  merchant?: string
}

/**
 * Builds the review from what the guard approved (`createReviewer` in caipay/review); the flow calls it
 * after the guard, before anything is signed.
 */
export type Reviewer = (approved: ApprovedOption, context: ReviewContext) => Promise<PaymentReview>
