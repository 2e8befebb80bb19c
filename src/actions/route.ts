import { namespaceOf } from '../caip/caip.js'
import type { SubscriptionTerms, WalletRpcAction } from '../contract/gateway.js'
import { PayError } from '../errors/PayError.js'
import { knownNamespaces, type SignerRegistry } from './registry.js'
import type { Signer, SignerRequest } from './types.js'

/** One wallet RPC action bound to the signer that will execute it. */
export interface RoutedAction {
  index: number
  signer: Signer
  request: SignerRequest
}

/** `walletRpc.params` is a JSON array carried as a string (spec rule 5). */
export function parseActionParams(params: string, index?: number): unknown[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(params)
  } catch (cause) {
    throw new PayError({
      code: 'invalid_action',
      message: 'Action params are not valid JSON.',
      context: { index },
      cause,
    })
  }
  if (!Array.isArray(parsed)) {
    throw new PayError({
      code: 'invalid_action',
      message: 'Action params must be a JSON array.',
      context: { index },
    })
  }
  return parsed
}

/**
 * Binds an action to the signer of its namespace (the text before the first colon of its chain id,
 * rule 3). Throws rather than skipping: an action is never dropped.
 */
export function routeAction(
  registry: SignerRegistry,
  action: WalletRpcAction,
  index: number,
  subscription?: SubscriptionTerms,
): RoutedAction {
  const { chainId, method, params } = action.walletRpc
  const namespace = namespaceOf(chainId)
  if (!namespace) {
    throw new PayError({
      code: 'invalid_action',
      message: 'Action chain id has no namespace.',
      context: { index, chainId },
    })
  }
  const signer = registry.get(namespace)
  if (!signer) {
    const known = knownNamespaces.includes(namespace)
    throw new PayError({
      code: known ? 'missing_signer' : 'unsupported_namespace',
      message: known
        ? `No signer is registered for ${namespace}.`
        : `Namespace ${namespace} is not supported.`,
      context: { index, chainId, method, namespace },
    })
  }
  if (!signer.methods.includes(method)) {
    throw new PayError({
      code: 'unsupported_method',
      message: `The ${namespace} signer does not implement ${method}.`,
      context: { index, chainId, method, namespace },
    })
  }
  return {
    index,
    signer,
    request: { chainId, method, params: parseActionParams(params, index), subscription } as SignerRequest,
  }
}

/**
 * Routes every action up front, so one unroutable action stops the option before anything is signed.
 * A subscription option's terms go with each request: only then may a signer decode a mandate.
 */
export function routeActions(
  registry: SignerRegistry,
  actions: readonly WalletRpcAction[],
  subscription?: SubscriptionTerms,
): RoutedAction[] {
  return actions.map((action, index) => routeAction(registry, action, index, subscription))
}
