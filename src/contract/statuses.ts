// Plain values, no zod: the wallet core needs these at runtime without pulling in the schema library.

export const paymentStatuses = [
  'requires_action',
  'processing',
  'succeeded',
  'failed',
  'expired',
  'cancelled',
] as const

export const finalStatuses: readonly (typeof paymentStatuses)[number][] = [
  'succeeded',
  'failed',
  'cancelled',
  'expired',
]
/** Final: neither of the two statuses a payment can still leave. */
export function isFinalStatus(status: (typeof paymentStatuses)[number]): boolean {
  return status !== 'requires_action' && status !== 'processing'
}
