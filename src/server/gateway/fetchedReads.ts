import { type RawBuilder, sql } from 'kysely'
import { foldAsset } from '../payments/assets.js'
import type { Db } from '../store/db.js'
import { processMemo } from '../store/processMemo.js'
import type { Mode } from '../store/schema.js'
import type { GatewayPaymentRow } from './payment.js'
import type { PaymentOptionRow } from './schema.js'

/**
 * What a fetch read, kept by this process for the confirm that follows it within seconds, so that the
 * confirm needs no read of its own (test mode's confirm is then one statement): the payment, the option,
 * the merchant's settlement asset for the option's asset, and the option row's version.
 *
 * The version is the row's `xmin`, the id of the transaction that wrote this version of the row: every
 * UPDATE of the row changes it (a refreshed quote, a stored build, completed form data), whatever the
 * clock says. It is the usual optimistic-concurrency token on PostgreSQL.
 *
 * A kept read is never the ground for a refusal: confirm plans on it only to reach its single write,
 * which holds only while the option row and the settlement are still as read (stillAsFetched) and the
 * payment is still payable (the write locks it in that state). When a check fails nothing is written and
 * the confirm is planned again on a fresh read (StalePlan), as is any plan on a kept read that is not
 * that write.
 */
export interface FetchedRead {
  payment: GatewayPaymentRow
  option: { row: PaymentOptionRow; settlementAsset: string | null; version: string }
}

/** Enough for every wallet between fetch and confirm at once; an abandoned fetch's read ages out. */
export const fetchedReadLimit = 5_000
const fetched = processMemo<FetchedRead>(fetchedReadLimit)

/**
 * Test mode's reads only: a live payment's confirm executes on a chain in a transaction, never as one
 * planned write, so a kept read would only run its checks twice.
 */
export function rememberFetched(db: Db, read: FetchedRead): void {
  if (read.payment.mode === 'test') fetched.set(db, read.option.row.id, read)
}

/** The read kept for this payment's option, when `mode` (null: any) may see it; a confirm uses it once. */
export function takeFetched(
  db: Db,
  paymentId: string,
  optionId: string,
  mode: Mode | null,
): FetchedRead | undefined {
  const read = fetched.get(db, optionId)
  if (!read || read.payment.id !== paymentId || read.option.row.payment_id !== paymentId) return undefined
  if (mode !== null && read.payment.mode !== mode) return undefined
  fetched.delete(db, optionId)
  return read
}

/** Whether the option row and the merchant's settlement for its asset are still as `read` saw them. */
export function stillAsFetched(read: FetchedRead): RawBuilder<boolean> {
  const { payment, option } = read
  return sql<boolean>`EXISTS (
      SELECT 1 FROM payment_options WHERE id = ${option.row.id} AND xmin = ${option.version}::xid
    ) AND (
      SELECT asset FROM crypto_settlements
      WHERE merchant_id = ${payment.merchant_id} AND asset_key = ${foldAsset(option.row.asset)}
    ) IS NOT DISTINCT FROM ${option.settlementAsset}::text`
}
