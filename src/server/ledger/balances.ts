import type { Db } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import type { LedgerKind } from './schema.js'
import './schema.js'

export interface LedgerBalance {
  mode: Mode
  asset: string
  holder: string
  kind: LedgerKind
  /** The merchant (collected, settling, refunds), the partner (float, fees), or '' (the operator's). */
  owner: string
  /** Token minor units. */
  balance: string
}

/** The accounts a merchant owns (the partner owns `float` and `fees`, the operator `unallocated`). */
export const merchantKinds = [
  'collected',
  'settling',
  'refunds',
  'authorized',
] as const satisfies readonly LedgerKind[]

/**
 * The stored balances, by holding address, asset and account; narrowed to one partner's (its float and
 * fees, and its merchants' accounts) when `partnerId` is given, to one merchant's accounts when
 * `merchantId` is.
 */
export async function listBalances(
  db: Db,
  options: { partnerId?: string; merchantId?: string; mode?: Mode } = {},
): Promise<LedgerBalance[]> {
  let query = db
    .selectFrom('ledger_accounts')
    .select(['mode', 'asset', 'holder', 'kind', 'owner', 'balance'])
    .orderBy('mode')
    .orderBy('holder')
    .orderBy('asset')
    .orderBy('kind')
    .orderBy('owner')
  if (options.mode) query = query.where('mode', '=', options.mode)
  if (options.merchantId !== undefined)
    query = query.where('kind', 'in', merchantKinds).where('owner', '=', options.merchantId)
  const partnerId = options.partnerId
  if (partnerId !== undefined)
    query = query.where((eb) =>
      eb.or([
        eb.and([eb('kind', 'in', ['float', 'fees']), eb('owner', '=', partnerId)]),
        eb('owner', 'in', eb.selectFrom('merchants').select('id').where('partner_id', '=', partnerId)),
      ]),
    )
  return (await query.execute()).map((row) => ({ ...row, balance: String(row.balance) }))
}
