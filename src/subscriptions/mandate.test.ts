import { describe, expect, it } from 'vitest'
import type { SubscriptionTerms } from '../contract/gateway.js'
import { mandateBound, maxMandatePeriods, periodStart } from './mandate.js'

const terms = (over: Partial<SubscriptionTerms>): SubscriptionTerms => ({
  subscriptionId: 's',
  asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  amountPerPeriod: '100',
  interval: 'month',
  intervalCount: 1,
  periods: null,
  endAt: 0,
  spender: 'eip155:8453:0x2222222222222222222222222222222222222222',
  ...over,
})
const at = (iso: string) => Date.parse(iso) / 1000

describe('the periods a mandate may cover', () => {
  it('adds months on the UTC calendar, the day clamped to the month’s last', () => {
    const jan31 = at('2027-01-31T12:00:00Z')
    expect(periodStart(jan31, { interval: 'month', intervalCount: 1 }, 1)).toBe(at('2027-02-28T12:00:00Z'))
    expect(periodStart(jan31, { interval: 'month', intervalCount: 1 }, 2)).toBe(at('2027-03-31T12:00:00Z'))
    expect(periodStart(jan31, { interval: 'year', intervalCount: 1 }, 1)).toBe(at('2028-01-31T12:00:00Z'))
    expect(periodStart(jan31, { interval: 'week', intervalCount: 2 }, 1)).toBe(jan31 + 14 * 86_400)
  })

  it('without `periods`, counts the charges before `endAt` from now: one now, one each interval', () => {
    const now = at('2027-01-01T00:00:00Z')
    // Charges on Jan 1 ... Dec 1: twelve; a charge on the end instant itself is not counted.
    expect(mandateBound(terms({ endAt: at('2028-01-01T00:00:00Z') }), now)).toEqual({
      periods: 12,
      total: 1200n,
    })
    expect(mandateBound(terms({ endAt: at('2028-01-01T00:00:01Z') }), now).periods).toBe(13)
    expect(mandateBound(terms({ endAt: now + 1 }), now).periods).toBe(1)
    expect(mandateBound(terms({ periods: 3, endAt: now + 1 }), now)).toEqual({ periods: 3, total: 300n })
  })

  it('refuses terms that are not sane, each by its rule', () => {
    const now = at('2027-01-01T00:00:00Z')
    const rule = (over: Partial<SubscriptionTerms>) => {
      try {
        mandateBound(terms({ endAt: now + 86_400, ...over }), now)
      } catch (error) {
        return (error as { code: string; context: { rule: string } }).context.rule
      }
      return 'accepted'
    }
    expect(rule({ amountPerPeriod: '0' })).toBe('terms_amount')
    expect(rule({ endAt: now })).toBe('terms_ended')
    expect(rule({ periods: maxMandatePeriods + 1 })).toBe('terms_periods')
    expect(rule({ periods: maxMandatePeriods })).toBe('accepted')
    expect(rule({ interval: 'day', endAt: now + (maxMandatePeriods + 1) * 86_400 })).toBe('terms_periods')
    expect(rule({ interval: 'day', endAt: now + maxMandatePeriods * 86_400 })).toBe('accepted')
  })
})
