import type { Action, WalletRpcAction } from '../contract/gateway.js'
import { PayError } from '../errors/PayError.js'

/** The gateway fetch call (spec row 21) for the option, given a build action's opaque data. */
export type FetchOptionActions = (data: string) => Promise<readonly WalletRpcAction[]>

/**
 * The exact list of wallet actions to sign for an option; `results` carries one entry per element, in
 * this order (rules 3-4).
 * - No `build` action: the option's actions as offered, and fetch is not called.
 * - Otherwise one fetch, with the first build's data. Its answer is "the wallet actions of that option"
 *   (row 21): the whole option with every build resolved (a build may expand into several actions),
 *   not just the expansion. The option's own wallet actions must appear in it, in order: a response
 *   that dropped one would make us skip an action, so it is refused.
 */
export async function resolveActions(
  actions: readonly Action[],
  fetchActions: FetchOptionActions,
): Promise<WalletRpcAction[]> {
  for (const [index, action] of actions.entries()) {
    if (action.type !== 'walletRpc' && action.type !== 'build')
      throw invalidAction('Unknown action type.', index)
  }
  const offered = actions.filter((action): action is WalletRpcAction => action.type === 'walletRpc')
  const build = actions.find((action) => action.type === 'build')
  const resolved = build ? [...(await fetchActions(build.build.data))] : offered
  for (const [index, action] of resolved.entries()) {
    if (action?.type !== 'walletRpc')
      throw invalidAction('The fetch response holds a non-wallet action.', index)
  }
  if (!containsInOrder(resolved, offered)) {
    throw invalidAction("The fetch response does not carry the option's wallet actions in order.", undefined)
  }
  if (resolved.length === 0) throw invalidAction('The option has no actions to execute.', undefined)
  return resolved
}

function containsInOrder(list: readonly WalletRpcAction[], wanted: readonly WalletRpcAction[]): boolean {
  let at = 0
  for (const action of list) if (at < wanted.length && sameAction(action, wanted[at]!)) at++
  return at === wanted.length
}

// Field by field: a JSON round trip through storage may reorder keys.
function sameAction(a: WalletRpcAction, b: WalletRpcAction): boolean {
  return (
    a.walletRpc.chainId === b.walletRpc.chainId &&
    a.walletRpc.method === b.walletRpc.method &&
    a.walletRpc.params === b.walletRpc.params
  )
}

function invalidAction(message: string, index: number | undefined): PayError {
  return new PayError({ code: 'invalid_action', message, context: { index } })
}
