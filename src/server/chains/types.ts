/**
 * How a chain plugs into the wallet gateway (options -> fetch -> confirm).
 *
 * The gateway owns everything chain-independent: auth, payment state and its transitions, quote expiry,
 * token amounts, data collection, result count/order/form checks, persistence of options. A driver owns
 * what only the chain knows: the actions an option carries, building transactions, and checking and
 * executing what the wallet signed. One driver serves one CAIP-2 chain; test mode uses the simulated
 * driver (`simulated.ts`) for every chain, live mode the drivers handed to the gateway plugin.
 */

import type { RawBuilder } from 'kysely'
import type { AccountId } from '../../caip/caip.js'
import type { Action, PushRequest, SubscriptionTerms, WalletRpcAction } from '../../contract/gateway.js'
import type { Db } from '../store/db.js'

export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue }

export type PaymentMode = 'test' | 'live'

export interface AssetConfig {
  /** CAIP-19 asset id, e.g. `eip155:8453/erc20:0x8335...` or `solana:5eyk.../token:EPjF...`. */
  id: string
  symbol: string
  name: string
  decimals: number
  /** USD price of one whole token, decimal string ("1" for USD stablecoins). */
  usdRate: string
  iconUrl?: string | null
  /** EVM: which option kinds to offer (`eip3009` gasless, `transfer` direct); the driver's default when absent. */
  methods?: readonly string[]
  /** EVM: EIP-712 domain of an EIP-3009 token when it is not read from the chain. */
  eip712?: { name: string; version: string }
  /** false: no push option for this asset (docs/push-payments.md); offered by default. */
  push?: boolean
}

/** The payment as drivers see it: enough to price, label and bind a payload to it. */
export interface DriverPayment {
  id: string
  mode: PaymentMode
  merchantId: string
  amount: { unit: string; value: string }
  /** Unix seconds. */
  expiresAt: number
  /**
   * `manual`: the money must reach an address of the service to be held (docs/capture.md), so a driver
   * offers no path that pays the merchant directly.
   */
  captureMethod?: 'automatic' | 'manual'
}

/** A wallet account, parsed, with its CAIP-10 text in `id`. */
export type WalletAccount = AccountId & { id: string }

export interface QuoteContext {
  payment: DriverPayment
  /** The account this quote is for (on the driver's chain). */
  account: WalletAccount
  /** Every account the wallet advertised, for options that span chains (mixed EVM + Solana). */
  accounts: readonly WalletAccount[]
  asset: AssetConfig
  /** What the buyer pays, in the asset's minor units (already rounded in the merchant's favour). */
  tokenAmount: bigint
  /** Unix seconds after which the quote is void; bind signed payloads to it (e.g. EIP-3009 validBefore). */
  expiresAt: number
  /** Unix seconds. */
  now: number
}

/** What a push option is quoted from (docs/push-payments.md): no wallet account, only the payment. */
export interface PushContext {
  payment: DriverPayment
  asset: AssetConfig
  tokenAmount: bigint
  /** Unix seconds: the payment's own expiry (a push request is not re-quoted). */
  expiresAt: number
  /**
   * The payment's reference key (one per payment, stable across options calls); empty for a driver
   * without `newPushReference` (EVM: the payment's deposit address identifies it).
   */
  reference: string
  /** Shown by the buyer's wallet (the merchant's name). */
  label?: string
  /** The server's public URL (`config.publicBaseUrl`): links back to it (a Solana Pay transaction request). */
  publicBaseUrl?: string
}

/** A Solana Pay transaction request's POST (docs/push-payments.md): the push context and the payer. */
export interface TransactionRequestContext extends PushContext {
  /** The paying wallet's account (checked: a base58 public key). */
  account: string
}

/** A subscription's first period: the option grants a mandate bounded by these terms. */
export interface MandateQuoteContext extends QuoteContext {
  mandate: {
    subscriptionId: string
    interval: SubscriptionTerms['interval']
    intervalCount: number
    /** As the subscription states it (null: only `endAt` bounds it). */
    periods: number | null
    /** Periods in all, this first one included: the mandate grants at most tokenAmount x this. */
    totalPeriods: number
    /** Unix seconds: the mandate expires by then. */
    endAt: number
  }
}

/** A mandate option: the draft and the charging address it names (CAIP-10: spender or delegate). */
export interface MandateDraft extends OptionDraft {
  spender: string
}

/** A live subscription's period to charge under its mandate (subscriptions/lifecycle.ts, attemptCharge). */
export interface MandateCharge {
  subscriptionId: string
  /** The period's payment (`source: mandate`, processing). */
  paymentId: string
  /** 0 is the first period. */
  period: number
  /** When the attempt is scheduled: the subscription's time for what it decides. */
  at: Date
}

export interface OptionDraft {
  /**
   * Tells apart several options for one (account, asset), e.g. `eip3009`, `transfer`, `mixed`.
   * A refresh re-quotes and keeps the draft of the same kind.
   */
  kind: string
  /** Wallet RPC actions and `build` actions, in the order the wallet must execute them. */
  actions: Action[]
  /** Expected seconds from confirm to a final status. */
  etaS: number
  /** Driver-private JSON stored with the option and handed back to build/verify/confirm. */
  state?: JsonValue
}

/** An option as stored by the gateway. */
export interface StoredOption {
  id: string
  paymentId: string
  kind: string
  account: string
  /** CAIP-19 asset id. */
  asset: string
  tokenAmount: bigint
  /** As offered, `build` actions unresolved. */
  actions: Action[]
  /** Unix seconds. */
  expiresAt: number
  state: JsonValue | null
  /** The resolved actions once fetch built them (what the wallet signs), else null. */
  built: WalletRpcAction[] | null
}

export interface BuildContext {
  payment: DriverPayment
  option: StoredOption
  asset: AssetConfig
  now: number
}

export interface BuildResult {
  /** The option's actions with every `build` resolved: exactly what the results of confirm answer. */
  actions: WalletRpcAction[]
  /** Replaces the option's state, e.g. the serialized transactions for a byte comparison at confirm. */
  state?: JsonValue
}

export interface ConfirmContext {
  payment: DriverPayment
  option: StoredOption
  asset: AssetConfig
  /** The actions the results answer (built when the option had `build` actions), same length as `results`. */
  actions: readonly WalletRpcAction[]
  /** Already checked by the gateway for count, order and form (see gateway/results.ts). */
  results: readonly string[]
  now: number
  /**
   * The caller's credential (API key id or app id): a driver whose executor pays the chain's fees
   * refuses it once its fee budget is spent, and charges it what a failed send costs.
   */
  credentialId: string
  /**
   * In `confirm`: the transaction that has just moved the payment to `processing`; enqueue jobs on it so
   * they exist exactly when the transition does. In `verify`: the plain database handle.
   */
  db: Db
  /**
   * In `confirm`: runs `fn` once the request's writes are committed or rolled back (so `fn` must find out
   * which, e.g. by the rows it needs). Lets a driver start at once what its job would start later.
   */
  afterCommit?: (fn: () => void) => void
  /**
   * In `verify`: the gateway will write this confirm as planConfirm's plan if the driver gives one (a
   * FastPath: one statement), so a check the plan carries in that statement may be left out of verify.
   */
  planned?: boolean
}

export type ConfirmOutcome =
  /** Finished at once (test mode): the gateway moves the payment to `succeeded`. */
  | { status: 'succeeded'; txId: string }
  /** Finished at once and failed. */
  | { status: 'failed'; failureCode: 'declined_user' }
  /** Work continues in a job the driver enqueued on `ctx.db`; the job finishes the payment. */
  | { status: 'processing' }

/**
 * A confirm whose writes all ride in the payment's move to `processing` (one statement, no transaction
 * of several; a FastPath, gateway/confirm.ts): what `confirm` would write on `ctx.db`, as data.
 */
export interface ConfirmPlan {
  /** The job that finishes the payment (as `confirm` would enqueue it). */
  job: { kind: string; payload: JsonValue }
  /** Rows the chain records with the move, each an INSERT ... SELECT from the changed payment's CTE. */
  inserts?: readonly ((changed: string) => RawBuilder<unknown>)[]
  /** Once the statement committed (as ConfirmContext.afterCommit): e.g. send the recorded transaction. */
  afterCommit?: () => void
  /**
   * Evaluated with the move, after it, and able to refuse by raising (AlongWrites.guard): a fee
   * reservation. `refused` turns the statement's error into the request's (fail(...)) when it is the
   * guard's, and returns otherwise.
   */
  guard?: {
    check: RawBuilder<unknown>
    refused(error: unknown): void
    /**
     * The check when it is migration 037's `caipay_relay_guard_or_raise`: its arguments, in order, so the
     * gateway's named statement can carry it (payments/lifecycle.ts confirmWithJob).
     */
    relayGuardArguments?: readonly unknown[]
  }
}

export interface ChainDriver {
  /** CAIP-2 chain id this driver serves. */
  readonly caip2: string
  /** CAIP-2 namespace (`eip155`, `solana`). */
  readonly namespace: string
  readonly assets: readonly AssetConfig[]
  /**
   * Options for one account and asset. Return `[]` when this account cannot pay (balance short, method
   * not supported); never throw for that. Must not write anything: the gateway persists the drafts.
   */
  quote(ctx: QuoteContext): Promise<OptionDraft[]>
  /**
   * Options of a subscription's first period: the buyer grants a mandate (Permit2 allowance, SPL
   * delegation) bounded by `ctx.mandate` to the driver's charging address. A driver without it offers
   * nothing for a subscription.
   */
  quoteMandate?(ctx: MandateQuoteContext): Promise<MandateDraft[]>
  /**
   * Live subscriptions: starts charging one period under the mandate the first period granted, as a job
   * armed on `db` (the transaction that created the period's payment: subscriptions/liveCharges.ts
   * `armChargeJob`), which reports the chain's verdict with `reportLiveCharge`. A driver without it
   * charges no live subscription.
   */
  startMandateCharge?(db: Db, charge: MandateCharge): Promise<void>
  /** Resolves an option's `build` actions (fetch). Required when `quote` emits `build` actions. */
  build?(ctx: BuildContext, data: string): Promise<BuildResult>
  /**
   * Whether what an earlier fetch built can still land (e.g. a Solana transaction's blockhash has not
   * expired). When false, fetch builds again and the new build replaces the stored one. Default: true.
   */
  builtUsable?(ctx: BuildContext): Promise<boolean>
  /**
   * Chain-level checks of the results before any state change (signature valid, bytes identical to
   * what was built). Throw a PayError `params_validation` naming the result index. No side effects.
   */
  verify?(ctx: ConfirmContext): Promise<void>
  /** Executes the payment after the gateway won the move to `processing` (see ConfirmContext.db). */
  confirm(ctx: ConfirmContext): Promise<ConfirmOutcome>
  /**
   * `confirm` as data, when all it would do is enqueue a job (and record rows, and start something
   * after commit) and answer `processing`; undefined: run `confirm`. Writes nothing itself.
   */
  planConfirm?(ctx: Omit<ConfirmContext, 'db' | 'afterCommit'>): ConfirmPlan | undefined
  /** A new reference key for a payment's push options; drivers without push options have none. */
  newPushReference?(): string
  /** The push request of one asset (a transfer any wallet can send); undefined: none for this asset. */
  pushRequest?(ctx: PushContext): Promise<PushRequest | undefined>
  /**
   * The transaction a push option's transaction request answers for `ctx.account`: base64, partly signed
   * (the service's fee-payer signature), the buyer's signature missing.
   */
  transactionRequest?(ctx: TransactionRequestContext): Promise<string>
}
