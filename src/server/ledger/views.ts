import { formatAmount } from '../../amount/amount.js'
import { parseAssetId } from '../../caip/caip.js'
import {
  type Balance,
  type BalanceAccount,
  type BalancesResponse,
  balanceAccounts,
  type LedgerDifference,
} from '../../contract/balances.js'
import type { ServerConfig } from '../config.js'
import { toAmount, unitDisplay } from '../payments/assets.js'
import type { Db } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import { listBalances, merchantKinds } from './balances.js'
import { type Difference, openDifferencesAt } from './reconcile.js'

/**
 * What `GET /v1/balances` answers: the partner's own accounts in the book of its key's mode (its float and
 * fees, its merchants' collected, settling and refunds; never the operator's unallocated top-ups nor
 * another partner's), and the open reconciliation differences at the addresses holding them. Test mode
 * books nothing (docs/live-mode.md, "The ledger"), so a test key reads an empty book.
 *
 * A difference is stated by its own amount only: the chain and ledger totals behind it sum every
 * partner's accounts at the shared collection address.
 */
export async function partnerBalances(
  db: Db,
  config: ServerConfig,
  params: { mode: Mode; partnerId: string; merchantId?: string | undefined },
): Promise<BalancesResponse> {
  const rows = await listBalances(db, {
    mode: params.mode,
    partnerId: params.partnerId,
    ...(params.merchantId !== undefined ? { merchantId: params.merchantId } : {}),
  })
  const differences = await openDifferencesAt(db, {
    mode: params.mode,
    holders: rows.map((row) => row.holder),
  })
  const stopped = new Set(differences.map((d) => d.holder))
  const data = rows.flatMap((row): Balance[] => {
    // (listBalances gives a partner none of the operator's accounts; the guard only narrows the type.)
    if (!isBalanceAccount(row.kind)) return []
    const ownedByMerchant = (merchantKinds as readonly string[]).includes(row.kind)
    return [
      {
        chainId: parseAssetId(row.asset).chainId,
        asset: row.asset,
        holder: row.holder,
        account: row.kind,
        merchantId: ownedByMerchant ? row.owner : null,
        amount: toAmount(`caip19/${row.asset}`, row.balance, config),
        sendsStopped: stopped.has(row.holder),
      },
    ]
  })
  return { data, differences: differences.map((d) => differenceJson(d, config)) }
}

function isBalanceAccount(kind: string): kind is BalanceAccount {
  return (balanceAccounts as readonly string[]).includes(kind)
}

function differenceJson(difference: Difference, config: ServerConfig): LedgerDifference {
  return {
    id: difference.id,
    chainId: parseAssetId(difference.asset).chainId,
    asset: difference.asset,
    holder: difference.holder,
    block: difference.block,
    difference: difference.difference,
    detectedAt: difference.detectedAt.toISOString(),
    message: differenceMessage(difference, config),
  }
}

/** The partner's words for a difference: what disagrees, that sends are stopped, and what resumes them. */
export function differenceMessage(difference: Difference, config: ServerConfig): string {
  const value = BigInt(difference.difference)
  const magnitude = value < 0n ? -value : value
  const display = unitDisplay(`caip19/${difference.asset}`, config)
  const amount = display
    ? formatAmount(magnitude, display.decimals, display.assetSymbol)
    : `${magnitude} minor units of ${difference.asset}`
  return (
    `Settlements and refunds from ${difference.holder} are stopped: at block ${difference.block} the chain ` +
    `holds ${amount} ${value < 0n ? 'less' : 'more'} than the ledger explains (reconciliation difference ` +
    `${difference.id}). They resume once the service's operator has looked into it and acknowledged it; ` +
    'refunds meanwhile stay pending and settlements wait.'
  )
}
