// caipay/x402: paying x402 resources with caipay signers under the signing guard.
export type { AcceptedRequirement, SettleResponse } from './wire.js'
export {
  type X402Budget,
  type X402FetchFn,
  type X402FetchOptions,
  type X402SolanaBuilder,
  type X402SolanaTransfer,
  x402Fetch,
} from './x402Fetch.js'
