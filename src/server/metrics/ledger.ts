import { sql } from 'kysely'
import { canonicalCaip } from '../../caip/caip.js'
import type { Db } from '../store/db.js'
import type { ChainProbe } from './chains.js'

/**
 * What the live ledger says an operator must be able to pay, read at scrape time (docs/operations.md,
 * "Metrics"): the refunds waiting to be sent, the float partners gave for refunds after settlement and
 * the operator's unallocated top-ups, and the open reconciliation differences. Amounts in whole tokens,
 * labelled by chain and CAIP-19 asset as configured (so they join `caipay_collection_balance`). Summed
 * over partners and merchants: the metrics name no partner, merchant or customer.
 */
export interface LedgerReadings {
  refundsPending: AssetAmount[]
  /** Partners' float, and how many partners have any. */
  float: (AssetAmount & { partners: number })[]
  unallocated: AssetAmount[]
  /** Per holding address: chain minus ledger outside what is in flight (negative: the chain holds less). */
  differences: (AssetAmount & { address: string })[]
}

export interface AssetAmount {
  chain: string
  asset: string
  symbol: string
  amount: number
}

export async function readLedger(db: Db, probes: readonly ChainProbe[]): Promise<LedgerReadings> {
  const assets = new Map(
    probes.flatMap((probe) =>
      probe.assets.map((asset) => [canonicalCaip(asset.id), { ...asset, chain: probe.caip2 }] as const),
    ),
  )
  /** Minor units of a configured asset in whole tokens; undefined for an asset no longer configured. */
  const whole = (asset: string, minor: string): AssetAmount | undefined => {
    const known = assets.get(canonicalCaip(asset))
    if (known === undefined) return undefined
    return {
      chain: known.chain,
      asset: known.id,
      symbol: known.symbol,
      amount: Number(minor) / 10 ** known.decimals,
    }
  }
  const [refunds, accounts, differences] = await Promise.all([
    // The partial index refunds_pending (migration 023): only pending refunds are read.
    sql<{ asset: string; value: string }>`
      SELECT asset, sum(asset_value)::text AS value FROM refunds
      WHERE status = 'pending' AND mode = 'live' AND asset IS NOT NULL GROUP BY asset`.execute(db),
    sql<{ asset: string; kind: 'float' | 'unallocated'; value: string; owners: string }>`
      SELECT asset, kind, sum(balance)::text AS value, count(*) FILTER (WHERE balance > 0) AS owners
      FROM ledger_accounts WHERE mode = 'live' AND kind IN ('float', 'unallocated')
      GROUP BY asset, kind`.execute(db),
    sql<{ asset: string; holder: string; difference: string }>`
      SELECT DISTINCT ON (asset, holder) asset, holder, difference::text AS difference
      FROM ledger_differences WHERE mode = 'live' AND acknowledged_at IS NULL
      ORDER BY asset, holder, id DESC`.execute(db),
  ])
  const defined = <T>(value: T | undefined): value is T => value !== undefined
  return {
    refundsPending: refunds.rows.map((row) => whole(row.asset, row.value)).filter(defined),
    float: accounts.rows
      .filter((row) => row.kind === 'float')
      .map((row) => {
        const amount = whole(row.asset, row.value)
        return amount && { ...amount, partners: Number(row.owners) }
      })
      .filter(defined),
    unallocated: accounts.rows
      .filter((row) => row.kind === 'unallocated')
      .map((row) => whole(row.asset, row.value))
      .filter(defined),
    differences: differences.rows
      .map((row) => {
        const amount = whole(row.asset, row.difference)
        return amount && { ...amount, address: row.holder.slice(row.holder.lastIndexOf(':') + 1) }
      })
      .filter(defined),
  }
}
