import * as z from 'zod/mini'
import { Amount, AmountInput, Cursor, limitQuery, MinorUnits, UnixSeconds } from './common.js'
import { ReferenceId } from './payment.js'

/**
 * Subscriptions (`/v1/subscriptions`): the buyer signs a bounded mandate once (through the first
 * period's payment link), and the service charges one period's price each period, each charge a payment
 * of the merchant (`source: "mandate"`). See docs/subscriptions.md.
 */

export const subscriptionStatuses = ['incomplete', 'active', 'past_due', 'cancelled', 'ended'] as const
export const SubscriptionStatus = z.enum(subscriptionStatuses)
export type SubscriptionStatus = z.infer<typeof SubscriptionStatus>

export const subscriptionIntervals = ['day', 'week', 'month', 'year'] as const
export const SubscriptionInterval = z.enum(subscriptionIntervals)
export type SubscriptionInterval = z.infer<typeof SubscriptionInterval>

/**
 * Why a subscription stopped: the merchant cancelled it, its charges kept failing past the last retry,
 * the buyer revoked the mandate on chain, or the buyer never signed before the first payment expired.
 */
export const subscriptionCancelReasons = [
  'cancelled_by_merchant',
  'payment_failed',
  'mandate_revoked',
  'not_activated',
] as const
export const SubscriptionCancelReason = z.enum(subscriptionCancelReasons)

export const SubscriptionId = z
  .string()
  .check(
    z.minLength(1),
    z.maxLength(64),
    z.regex(/^sub_[A-Za-z0-9]+$/, 'Expected a subscription id (sub_...).'),
  )
export const SubscriptionIdParams = z.strictObject({ id: SubscriptionId })

export const TestClockId = z
  .string()
  .check(
    z.minLength(1),
    z.maxLength(64),
    z.regex(/^clock_[A-Za-z0-9]+$/, 'Expected a test clock id (clock_...).'),
  )
export const TestClockIdParams = z.strictObject({ id: TestClockId })

/** Far past any date the service charges at: 9999-12-31T23:59:59Z. */
const maxUnixSeconds = 253_402_300_799
const ClockTime = UnixSeconds.check(z.maximum(maxUnixSeconds))

/** At most 1200 periods (a century of months). */
const maxPeriods = 1200

/**
 * `amount` is one period's price, in a fiat unit or an asset's minor units as payments take it. Exactly
 * one of `periods` (how many periods in all) or `endAt` (unix seconds; no period starts at or after it)
 * bounds the mandate. `startAt` (default now) anchors the periods: period k is due at startAt + k
 * intervals; the first period is charged when the buyer signs. `testClock` (test mode): the clock the
 * subscription runs on.
 */
export const SubscriptionCreateBody = z.strictObject({
  referenceId: ReferenceId,
  amount: AmountInput,
  interval: SubscriptionInterval,
  intervalCount: z.optional(z.int().check(z.minimum(1), z.maximum(365))),
  periods: z.optional(z.int().check(z.minimum(1), z.maximum(maxPeriods))),
  endAt: z.optional(ClockTime),
  startAt: z.optional(ClockTime),
  testClock: z.optional(TestClockId),
})
export type SubscriptionCreateBody = z.infer<typeof SubscriptionCreateBody>

/** The mandate the buyer granted, once active. */
export const SubscriptionMandate = z.object({
  /** CAIP-10 of the account that signed it. */
  buyer: z.string(),
  /** CAIP-19 asset charged. */
  asset: z.string(),
  /** One period's charge, in the asset's minor units. */
  amountPerPeriod: MinorUnits,
  /** CAIP-10 of the charging address (EVM: Permit2 spender; Solana: SPL delegate). */
  spender: z.string(),
})

export const Subscription = z.object({
  subscriptionId: z.string(),
  merchantId: z.string(),
  referenceId: z.string(),
  status: SubscriptionStatus,
  amount: Amount,
  interval: SubscriptionInterval,
  intervalCount: z.int(),
  periods: z.nullable(z.int()),
  /** Unix seconds: no period starts at or after it. */
  endAt: UnixSeconds,
  startAt: UnixSeconds,
  /** The first period's payment link: the buyer's wallet opens it and signs the mandate. */
  gatewayUrl: z.string(),
  firstPaymentId: z.string(),
  /** Periods charged so far. */
  periodsCharged: z.int(),
  /** Unix seconds when the next period is due; null once nothing more will be charged. */
  nextChargeAt: z.nullable(UnixSeconds),
  mandate: z.nullable(SubscriptionMandate),
  cancelReason: z.nullable(SubscriptionCancelReason),
  testClock: z.nullable(z.string()),
  createdAt: z.string(),
  cancelledAt: z.nullable(z.string()),
  endedAt: z.nullable(z.string()),
})
export type Subscription = z.infer<typeof Subscription>

export const SubscriptionListQuery = z.strictObject({
  status: z.optional(SubscriptionStatus),
  cursor: z.optional(Cursor),
  limit: limitQuery(100),
})
export type SubscriptionListQuery = z.infer<typeof SubscriptionListQuery>

export const SubscriptionListResponse = z.object({
  data: z.array(Subscription),
  nextCursor: z.nullable(z.string()),
})
export type SubscriptionListResponse = z.infer<typeof SubscriptionListResponse>

/** A test clock (test mode): time frozen at `frozenTime` until advanced. */
export const TestClock = z.object({
  id: z.string(),
  /** Unix seconds. */
  frozenTime: UnixSeconds,
  createdAt: z.string(),
})
export type TestClock = z.infer<typeof TestClock>

export const TestClockCreateBody = z.strictObject({ frozenTime: z.optional(ClockTime) })
/** Moves the clock forward to `frozenTime` and charges every period due by then, in order. */
export const TestClockAdvanceBody = z.strictObject({ frozenTime: ClockTime })

/**
 * Sandbox stand-ins for what the chain decides in live mode: `empty` makes the buyer's charges fail for
 * want of funds until `funded` again; `revoked` is the buyer revoking the mandate on chain.
 */
export const subscriptionSimulations = ['funded', 'empty', 'revoked'] as const
export const SubscriptionSimulateBody = z.strictObject({ buyer: z.enum(subscriptionSimulations) })
