import type { SubscriptionInterval } from '../../contract/subscription.js'

/**
 * Period arithmetic. Every due date is computed from the anchor (never from the previous one), so a
 * month that clamps (Jan 31 -> Feb 28) does not shift the months after it.
 */

const dayMs = 24 * 60 * 60 * 1000

/** `anchor` plus `count` intervals, in UTC; months and years clamp to the month's last day. */
export function addIntervals(anchor: Date, interval: SubscriptionInterval, count: number): Date {
  if (interval === 'day') return new Date(anchor.getTime() + count * dayMs)
  if (interval === 'week') return new Date(anchor.getTime() + count * 7 * dayMs)
  const months = interval === 'month' ? count : count * 12
  const year = anchor.getUTCFullYear()
  const month = anchor.getUTCMonth() + months
  const lastDay = new Date(Date.UTC(year, month + 1, 0)).getUTCDate()
  const out = new Date(anchor.getTime())
  out.setUTCFullYear(year, month, Math.min(anchor.getUTCDate(), lastDay))
  return out
}

export interface Schedule {
  start: Date
  interval: SubscriptionInterval
  intervalCount: number
}

/** When period `period` (0 = the first) is due. */
export function dueAt(schedule: Schedule, period: number): Date {
  return addIntervals(schedule.start, schedule.interval, period * schedule.intervalCount)
}

/** How many periods start before `end` (at most `cap`, to bound the count). */
export function periodsBefore(schedule: Schedule, end: Date, cap: number): number {
  let n = 0
  while (n < cap && dueAt(schedule, n).getTime() < end.getTime()) n++
  return n
}
