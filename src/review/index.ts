// caipay/review: what a wallet shows before it signs, built from the signing guard's own decoding.
// An entry of its own so the wallet core stays within its budget (src/review/review.test.ts states this one's).

export type { AssetInfo, KnownAsset } from '../actions/types.js'
export { createReviewer, type ReviewerOptions } from './describe.js'
export type {
  PaymentReview,
  ReviewContext,
  ReviewedAction,
  ReviewedAsset,
  ReviewedFee,
  ReviewedMovement,
  Reviewer,
  ReviewIntent,
} from './types.js'
