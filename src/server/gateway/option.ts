import { sameCaip } from '../../caip/caip.js'
import type { WalletRpcAction } from '../../contract/gateway.js'
import { isBroadcastingMethod } from '../../contract/walletMethods.js'
import type { AssetConfig, ChainDriver } from '../chains/types.js'
import { fail, paramsError } from '../errors.js'
import type { Db } from '../store/db.js'
import type { DriverRegistry } from './drivers.js'
import type { GatewayPaymentRow } from './payment.js'
import type { PaymentOptionRow } from './schema.js'
import { findOption } from './store.js'

export interface UsableOption {
  row: PaymentOptionRow
  driver: ChainDriver
  asset: AssetConfig
}

/**
 * What the option is wanted for. `fetchBeforeData` is a fetch whose collected data arrives with the
 * confirm (the WalletConnect Pay SDK's `collectedData`): the form need not be completed yet, and the
 * confirm still refuses without it.
 */
export type OptionPurpose = 'fetch' | 'fetchBeforeData' | 'confirm'

/**
 * The option fetch and confirm act on: one of this payment's, quote still valid, hosted form completed
 * when it asks for one (spec rule 2), and still served by a driver.
 */
export async function usableOption(
  db: Db,
  registry: DriverRegistry,
  payment: GatewayPaymentRow,
  optionId: string,
  now: Date,
  purpose: OptionPurpose = 'fetch',
  /** The option already read with the payment (findGatewayPaymentAndOption): no second lookup. */
  loaded?: { row: PaymentOptionRow | undefined },
): Promise<UsableOption> {
  const row = loaded ? loaded.row : await findOption(db, payment.id, optionId)
  if (!row) throw paramsError('body.optionId', `Unknown option ${optionId} for this payment.`)
  // A wallet that broadcast its own transfer has already moved the funds: refusing its confirm for a late
  // quote would strand them. The driver still checks the transfer on-chain, and the payment's own expiry holds.
  const walletBroadcast = purpose === 'confirm' && broadcastsFromWallet(row)
  if (!walletBroadcast && row.expires_at.getTime() <= now.getTime()) {
    fail('quote_expired', 'The quote of this option has expired; ask for options again (refresh).', {
      optionId,
      expiredAt: row.expires_at.toISOString(),
    })
  }
  if (row.collect_data_required && row.collect_data_completed_at === null && purpose !== 'fetchBeforeData') {
    fail('invalid_state', 'Complete the data-collection form of this option first.', { optionId })
  }
  const driver = registry.driver(payment.mode, row.chain_id)
  const asset = driver?.assets.find((a) => sameCaip(a.id, row.asset))
  if (!driver || !asset) fail('invalid_state', 'This option is no longer offered.', { optionId })
  return { row, driver, asset }
}

function broadcastsFromWallet(row: PaymentOptionRow): boolean {
  return row.actions.some((a) => a.type === 'walletRpc' && isBroadcastingMethod(a.walletRpc.method))
}

export function hasBuildActions(row: PaymentOptionRow): boolean {
  return row.actions.some((a) => a.type === 'build')
}

/** What the wallet signs: the built actions, or the offered ones when the option had nothing to build. */
export function signedActions(row: PaymentOptionRow): WalletRpcAction[] | undefined {
  if (row.built) return row.built
  if (hasBuildActions(row)) return undefined
  return row.actions.filter((a): a is WalletRpcAction => a.type === 'walletRpc')
}
