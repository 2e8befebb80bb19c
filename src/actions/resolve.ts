import type { Action, WalletRpcAction } from '../contract/gateway.js'
import { PayError } from '../errors/PayError.js'

/** Resolves one `build` action's opaque data into wallet actions (the gateway fetch endpoint). */
export type BuildResolver = (data: string, index: number) => Promise<readonly WalletRpcAction[]>

/**
 * Replaces each `build` action, in place, with the wallet actions it resolves to; a build may
 * expand into several. The result is the exact list that gets signed, and `results` carries one
 * entry per element of it, in this order.
 */
export async function resolveActions(
  actions: readonly Action[],
  resolveBuild: BuildResolver,
): Promise<WalletRpcAction[]> {
  const resolved: WalletRpcAction[] = []
  for (const [index, action] of actions.entries()) {
    if (action.type === 'walletRpc') {
      resolved.push(action)
    } else if (action.type === 'build') {
      const built = await resolveBuild(action.build.data, index)
      for (const item of built) {
        if (item?.type !== 'walletRpc') throw invalidAction('A build resolved to a non-wallet action.', index)
        resolved.push(item)
      }
    } else {
      throw invalidAction('Unknown action type.', index)
    }
  }
  if (resolved.length === 0) throw invalidAction('The option has no actions to execute.', undefined)
  return resolved
}

function invalidAction(message: string, index: number | undefined): PayError {
  return new PayError({ code: 'invalid_action', message, context: { index } })
}
