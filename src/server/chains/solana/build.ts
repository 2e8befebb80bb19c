import { randomBytes } from 'node:crypto'
import type { Transaction } from '@solana/web3.js'
import type { Action, WalletRpcAction } from '../../../contract/gateway.js'
import { paramsError } from '../../errors.js'

/**
 * A `build` action for a Solana option. The transaction itself is built only at fetch: its blockhash
 * must be fresh when the wallet signs, not when the buyer was still choosing.
 */
export function buildAction(): Action {
  return { type: 'build', build: { data: `bld_${randomBytes(16).toString('hex')}` } }
}

/**
 * What fetch built for one `build` action, kept so confirm can compare it byte for byte. A type, not an
 * interface, so that it is JSON option state as it stands.
 */
export type BuiltMessage = {
  /** Position of the built action among the option's resolved actions (= its result index). */
  index: number
  /** Base64 message bytes. */
  message: string
}

/**
 * Fetch for a Solana option, shared by test and live mode: `walletRpc` actions pass through and every
 * `build` action becomes a `solana_signTransaction` of the transaction `transfer` builds, unsigned by
 * the buyer. `transfer` also says what else confirm needs to know of that transaction (`details`).
 */
export async function resolveBuildActions<Details extends object>(input: {
  actions: readonly Action[]
  data: string
  chainId: string
  transfer: () => Promise<{ transaction: Transaction; details: Details }>
}): Promise<{ actions: WalletRpcAction[]; built: (BuiltMessage & Details)[] }> {
  const actions: WalletRpcAction[] = []
  const built: (BuiltMessage & Details)[] = []
  for (const action of input.actions) {
    if (action.type === 'walletRpc') {
      actions.push(action)
      continue
    }
    if (action.build.data !== input.data)
      throw paramsError('body.data', 'data is not the build data of this option.')
    const { transaction, details } = await input.transfer()
    built.push({
      index: actions.length,
      message: transaction.serializeMessage().toString('base64'),
      ...details,
    })
    const unsigned = transaction.serialize({ requireAllSignatures: false, verifySignatures: false })
    actions.push({
      type: 'walletRpc',
      walletRpc: {
        chainId: input.chainId,
        method: 'solana_signTransaction',
        params: JSON.stringify([{ transaction: unsigned.toString('base64') }]),
      },
    })
  }
  return { actions, built }
}
