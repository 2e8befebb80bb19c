import type { InspectedMandate, MandateContext } from '../actions/types.js'
import { sameCaip } from '../caip/caip.js'
import type { SubscriptionTerms } from '../contract/gateway.js'
import { PayError } from '../errors/PayError.js'

/**
 * The most periods a mandate may cover: 1 000 (over 80 years monthly, close to 3 years daily). Terms
 * asking for more are refused as absurd, whether they state `periods` or only an `endAt`.
 */
export const maxMandatePeriods = 1_000

/**
 * How long after the option's `expiresAt` a mandate's grant may still be submitted (Permit2
 * `sigDeadline`): one hour, room for the service's relay window (600 s by default, as for its one-time
 * Permit2 transfers) and then some. A later deadline keeps an unused grant usable for longer than the
 * payment it belongs to.
 */
export const mandateDeadlineSlackS = 3_600

const day = 86_400

/**
 * Unix seconds of the `k`th charge after `start`: days and weeks as fixed seconds, months and years on
 * the UTC calendar, the day of the month clamped to the month's last (Jan 31 + 1 month = Feb 28/29).
 */
export function periodStart(
  start: number,
  terms: Pick<SubscriptionTerms, 'interval' | 'intervalCount'>,
  k: number,
): number {
  const { interval, intervalCount } = terms
  if (interval === 'day' || interval === 'week')
    return start + k * intervalCount * day * (interval === 'week' ? 7 : 1)
  const at = new Date(start * 1000)
  const month = at.getUTCMonth() + k * intervalCount * (interval === 'year' ? 12 : 1)
  const last = new Date(Date.UTC(at.getUTCFullYear(), month + 1, 0)).getUTCDate()
  return (
    Date.UTC(
      at.getUTCFullYear(),
      month,
      Math.min(at.getUTCDate(), last),
      at.getUTCHours(),
      at.getUTCMinutes(),
      at.getUTCSeconds(),
    ) / 1000
  )
}

/**
 * What the terms let a mandate grant at most, checked for sanity: `amountPerPeriod` above zero, `endAt`
 * in the future, the periods bounded. Periods are `terms.periods` when set; when null, the charges that
 * fit before `endAt` counting from `now`: one now, then one each `intervalCount` intervals while the
 * charge time is before `endAt` (a charge at `endAt` itself is not counted). The most is
 * `amountPerPeriod` x periods.
 */
export function mandateBound(terms: SubscriptionTerms, now: number): { periods: number; total: bigint } {
  const perPeriod = BigInt(terms.amountPerPeriod)
  const facts = { subscriptionId: terms.subscriptionId }
  if (perPeriod <= 0n) throw refused('The subscription charges nothing per period.', 'terms_amount', facts)
  if (terms.endAt <= now) {
    throw refused('The subscription has already ended.', 'terms_ended', { ...facts, endAt: terms.endAt, now })
  }
  if (!Number.isSafeInteger(terms.intervalCount) || terms.intervalCount < 1) {
    throw refused('The subscription interval count is not a positive integer.', 'terms_interval', facts)
  }
  let periods = terms.periods
  if (periods === null) {
    periods = 0
    while (periods <= maxMandatePeriods && periodStart(now, terms, periods) < terms.endAt) periods++
  }
  if (!Number.isSafeInteger(periods) || periods < 1 || periods > maxMandatePeriods) {
    throw refused('The subscription asks for more periods than a mandate may cover.', 'terms_periods', {
      ...facts,
      periods,
      max: maxMandatePeriods,
    })
  }
  return { periods, total: perPeriod * BigInt(periods) }
}

/**
 * Refuses (PayError `action_rejected`, `context.rule` naming the check) a mandate that its option's
 * terms do not bound: no terms at all (a one-time payment's option), the asset, chain, spender or owner
 * not the terms' and the option's, an allowance above `amountPerPeriod` x periods (together with
 * `alsoCounted`), an expiration after `endAt`, or a grant deadline past the option's expiry by more than
 * `mandateDeadlineSlackS`. The spender's allow-listing is the signer's (its policy), as for approvals.
 */
export function checkMandate(mandate: InspectedMandate, context: MandateContext): void {
  const { option, chainId, now } = context
  const terms = option.subscription
  const facts = { chainId, kind: mandate.kind, spender: mandate.spender, asset: mandate.asset }
  if (!terms) {
    throw refused(
      'A mandate (a standing allowance) is signed only inside a subscription option.',
      'mandate_outside_subscription',
      facts,
    )
  }
  const { total, periods } = mandateBound(terms, now)
  if (!terms.asset.startsWith(`${chainId}/`) || !sameCaip(mandate.asset, terms.asset)) {
    throw refused('The mandate is for another asset or chain than the subscription’s.', 'mandate_asset', {
      ...facts,
      expected: terms.asset,
    })
  }
  if (!sameCaip(option.amount.unit, `caip19/${terms.asset}`)) {
    throw refused('The subscription’s option is priced in another asset than its terms.', 'terms_asset', {
      ...facts,
      unit: option.amount.unit,
      expected: terms.asset,
    })
  }
  if (!sameCaip(mandate.spender, terms.spender)) {
    throw refused('The mandate names another spender than the subscription’s.', 'mandate_spender', {
      ...facts,
      expected: terms.spender,
    })
  }
  if (!sameCaip(mandate.owner, context.signer) || !sameCaip(mandate.owner, option.account)) {
    throw refused('The mandate draws on another account than the paying one.', 'mandate_owner', {
      ...facts,
      owner: mandate.owner,
      optionAccount: option.account,
    })
  }
  if (mandate.amount + context.alsoCounted > total) {
    throw refused(
      'The mandate allows more than the subscription’s price times its periods.',
      'mandate_amount',
      {
        ...facts,
        amount: mandate.amount.toString(),
        ...(context.alsoCounted > 0n && { alsoCounted: context.alsoCounted.toString() }),
        limit: total.toString(),
        periods,
      },
    )
  }
  if (mandate.expiration !== undefined && mandate.expiration > terms.endAt) {
    throw refused('The mandate outlives the subscription’s end.', 'mandate_expiration', {
      ...facts,
      expiration: mandate.expiration,
      endAt: terms.endAt,
    })
  }
  if (mandate.deadline !== undefined && mandate.deadline > option.expiresAt + mandateDeadlineSlackS) {
    throw refused(
      'The mandate’s grant stays submittable long after the option expires.',
      'mandate_deadline',
      {
        ...facts,
        deadline: mandate.deadline,
        expiresAt: option.expiresAt,
      },
    )
  }
  if (mandate.decimals !== undefined && mandate.decimals !== option.amount.display.decimals) {
    throw refused('The mandate states other decimals than the option shows.', 'mandate_decimals', {
      ...facts,
      decimals: mandate.decimals,
      shown: option.amount.display.decimals,
    })
  }
}

function refused(
  message: string,
  rule: string,
  context: Record<string, unknown>,
): PayError<'action_rejected'> {
  return new PayError({ code: 'action_rejected', message, context: { rule, ...context } })
}
