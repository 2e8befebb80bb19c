import type { PaymentOption, SubscriptionTerms, WalletRpcAction } from '../contract/gateway.js'
import type { ApprovedAction, GuardContext } from './guard.js'

/**
 * The signer interface: one plain object per CAIP-2 namespace (`eip155`, `solana`, ...).
 * Adapters (caipay/adapters/evm, caipay/adapters/solana, caipay/adapters/walletconnect) build these;
 * the wallet core only routes to them.
 */
export interface SignerRequest {
  /** CAIP-2 chain id of the action, e.g. `eip155:8453`. */
  chainId: string
  method: string
  /** The action's `params`, already parsed from its JSON string. */
  params: readonly unknown[]
  /**
   * The subscription terms of the action's option, when it has them: only then does a signer decode a
   * mandate (a Permit2 `PermitSingle`, an SPL `ApproveChecked`) instead of refusing it, and the guard
   * bounds that mandate by these terms (src/actions/mandate.ts).
   */
  subscription?: SubscriptionTerms
  /** True when more actions of the same option follow; an EVM signer then waits for the receipt. */
  followedByMore?: boolean
  signal?: AbortSignal
}

/** What an action would move, decoded by the adapter so the core's signing guard stays dependency-free. */
export interface ActionInspection {
  /** CAIP-10 account that would sign (must be one of the advertised accounts). */
  account: string
  /** Token movements the signature authorises; empty for attestations such as `personal_sign`. */
  transfers: readonly InspectedTransfer[]
  /**
   * Unix seconds after which the signature can no longer move anything (EIP-3009 `validBefore`);
   * absent when the bytes set no such bound.
   */
  validUntil?: number
  /** Unix seconds before which the signature moves nothing (EIP-3009 `validAfter`); absent when 0 or unset. */
  validFrom?: number
  /**
   * The most the signing account can be charged in fees for this action, in the chain's native asset
   * (CAIP-19), as the bytes bound it (a Solana transaction it pays for); amount 0 when another account
   * pays. Absent when the action bounds no fee: a signature costs nothing, a transaction the wallet
   * sends costs what its own node sets.
   */
  maxFee?: { asset: string; amount: bigint }
  /**
   * A standing allowance the signature grants (a subscription's mandate): decoded only for a request
   * that carries subscription terms, and bounded by them in the guard (docs/subscriptions.md).
   */
  mandate?: InspectedMandate
}

/** A mandate as the signed bytes state it: who may pull how much of what, until when. */
export interface InspectedMandate {
  /** `permit2`: a Permit2 `PermitSingle` allowance; `splDelegate`: an SPL `ApproveChecked` delegation. */
  kind: 'permit2' | 'splDelegate'
  /** CAIP-19 asset the allowance is in (the ERC-20 token, the SPL mint). */
  asset: string
  /** The most the spender may pull in total, minor units. */
  amount: bigint
  /** CAIP-10 account that may pull it (Permit2 `spender`, SPL delegate). */
  spender: string
  /** CAIP-10 account whose funds it draws on (the signing account). */
  owner: string
  /** Unix seconds when the allowance ends (Permit2 `expiration`); absent when the chain sets none (SPL). */
  expiration?: number
  /** Unix seconds after which the grant itself can no longer be submitted (Permit2 `sigDeadline`). */
  deadline?: number
  /** CAIP-10 contract the allowance lives in and pulls go through (Permit2). */
  through?: string
  /** Decimals the bytes state for the asset (SPL `ApproveChecked`). */
  decimals?: number
}

/**
 * What became of a mandate, read from the wallet's own node: `live` while it may still be drawn on (or
 * nothing could be read), `expired` once it can never be drawn on again by time (its expiration or,
 * unused, its grant's deadline passed; a Solana grant never landed), `ended` once the allowance is zero
 * or the delegation gone (revoked, or drawn in full).
 */
export type MandateStatus = 'live' | 'expired' | 'ended'

/** What a mandate is checked against besides itself. */
export interface MandateContext {
  /** The option the mandate is signed for: its terms, account, amount and expiry. */
  option: Pick<PaymentOption, 'account' | 'amount' | 'expiresAt' | 'subscription'>
  /** The action's CAIP-2 chain. */
  chainId: string
  /** The CAIP-10 account the signer would sign with (already bound to the option's account). */
  signer: string
  /** Unix seconds now (the wallet's clock). */
  now: number
  /** What earlier mandates of this payment that may still be drawn on allow, and what else the option moves, minor units. */
  alsoCounted: bigint
}

/** A mandate as stored: plain JSON (amounts as decimal strings). */
export type StoredMandate = Omit<InspectedMandate, 'amount'> & { amount: string }

/**
 * One mandate the wallet granted, as the flow records it once its signer returned: what the guard
 * decoded and checked, the terms it was checked against, and the signed action with its result (what
 * the signer's node is asked about later).
 */
export interface GrantedMandate {
  /** `<paymentId>:<action index>`: one grant per signed action. */
  id: string
  paymentId: string
  optionId: string
  terms: SubscriptionTerms
  mandate: StoredMandate
  action: WalletRpcAction
  result: string
  /** Unix seconds, the wallet's clock. */
  grantedAt: number
  /** The revoking transaction's id, once `revokeMandate` sent one. */
  revokedBy?: string
}

/**
 * What lets a flow sign mandates at all (`createMandates` in caipay/subscriptions, outside the core's
 * budget): `check` bounds each mandate by its option's terms (throws a PayError to refuse), `record`
 * keeps each one granted. Without it the guard signs no mandate.
 */
export interface MandatePolicy {
  /**
   * Throws a PayError unless every mandate among the approved actions is within its option's terms,
   * together with `oneTime` (what the option moves once, as the guard counted it) and the context's
   * `stillMandated`.
   */
  check(approved: readonly ApprovedAction[], context: GuardContext & { oneTime: bigint }): void
  /**
   * What a mandate an earlier round signed still allows: its whole amount until its signer's node
   * proves it expired or ended, then 0.
   */
  stillAllowed(
    signer: Signer,
    request: SignerRequest,
    result: string,
    mandate: InspectedMandate,
  ): Promise<bigint>
  record(grant: MandateGrant): void | Promise<void>
}

/** What the flow hands `MandatePolicy.record` once a mandate's signer returned. */
export interface MandateGrant {
  paymentId: string
  option: PaymentOption
  action: WalletRpcAction
  /** The action's index in its option. */
  index: number
  result: string
  mandate: InspectedMandate
}

/** What a wallet knows of an asset from a source it trusts (its own list or node), never the gateway. */
export interface AssetInfo {
  symbol?: string
  decimals?: number
}

/** An entry of the wallet's own list of assets it vouches for: CAIP-19 id, symbol, decimals. */
export interface KnownAsset extends AssetInfo {
  asset: string
}

/** `spent`: the chain used it; `live`: it may still execute; `dead`: it provably never will. */
export type SignatureStatus = 'spent' | 'live' | 'dead'

export interface InspectedTransfer {
  /** CAIP-19 asset id, e.g. `eip155:1/erc20:0xa0b8...` or `solana:5eyk.../token:EPjF...`. */
  asset: string
  /** Amount in the asset's minor units. */
  amount: bigint
  /** CAIP-10 recipient when known. */
  to?: string
  /** The decimals the action itself states for the asset (SPL `transferChecked`), when it states them. */
  decimals?: number
  /** An allowance (ERC-20 `approve`): `to` may take the amount, nothing has moved yet. */
  approval?: true
  /**
   * CAIP-10 of the contract that pulls this transfer out of an allowance (Permit2): an approval of that
   * contract in the same option and this transfer are one movement, and the guard counts it once.
   */
  through?: string
}

export interface Signer {
  /** CAIP-2 namespace this signer serves, e.g. `eip155` or `solana`. */
  readonly namespace: string
  /** CAIP-10 accounts the signer holds keys for; only these are advertised to the service. */
  accounts(): readonly string[]
  /** RPC methods this signer implements. */
  readonly methods: readonly string[]
  /**
   * Executes one wallet RPC action. Resolves with the action's result string: an EVM tx hash or
   * signature, or for Solana the complete signed transaction, base64. Rejects with a PayError
   * `user_rejected` when the user declines (EIP-1193 code 4001 or equivalent).
   */
  request(request: SignerRequest): Promise<string>
  /**
   * Decodes an action for the signing guard without signing anything. With the guard on, an action
   * whose signer has no `inspect` is not signed.
   */
  inspect?(request: SignerRequest): ActionInspection | Promise<ActionInspection>
  /**
   * What became of a signature this signer gave for `request` (`result` is what `request` returned),
   * read from the wallet's own node: `spent` once the chain shows it used, `dead` only when the node
   * proves it unused and unusable for good (EIP-3009: nonce unused and `validBefore` passed; Solana:
   * no status and the blockhash expired), `live` otherwise, including when the node cannot be read.
   * Without it, every earlier signature counts as live. See docs/exposure.md.
   */
  signatureStatus?(request: SignerRequest, result: string): Promise<SignatureStatus>
  /**
   * The symbol and decimals of a CAIP-19 asset, read from the wallet's own node (an ERC-20's `symbol()`
   * and `decimals()`); the review (review.ts) shows them when the wallet's own list has no entry.
   */
  describeAsset?(asset: string): Promise<AssetInfo | undefined>
  /**
   * What became of a mandate this signer granted (`request` carrying its subscription terms, `result`
   * what `request` returned), read from the wallet's own node. Without it a mandate counts as live
   * until its expiration. See docs/exposure.md.
   */
  mandateStatus?(request: SignerRequest, result: string): Promise<MandateStatus>
  /**
   * Ends a mandate on chain with the wallet's own key: Permit2 `approve(token, spender, 0, 0)`, SPL
   * `Revoke`. Built from the decoded mandate only; resolves with the revoking transaction's id once
   * the chain accepted it.
   */
  revokeMandate?(mandate: InspectedMandate, options?: { signal?: AbortSignal }): Promise<string>
}
