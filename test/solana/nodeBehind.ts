import type { Fault, JsonRpcResponse } from '../rpcFaults.js'

/**
 * A read answered as a node whose commitment stopped at `slot` answers it (an RPC node behind the
 * others, e.g. one backend of a load balancer): a fault proxy rewrite (test/rpcFaults.ts) of the
 * cluster's own answer, for `proxy.inject(method, nodeBehind(slot), { times })`.
 *
 * - any read whose config (its second parameter) asks a `minContextSlot` past `slot`: -32016, as a
 *   validator refuses it (getSignaturesForAddress, getAccountInfo).
 * - getSignaturesForAddress: else the signatures of slots up to `slot` only: a shorter list, with no error.
 * - getTransaction: null for a transaction of a later slot.
 * - getSlot: `slot` at most.
 *
 * `onAnswer` runs for each answer it gives.
 */
export function nodeBehind(slot: number, onAnswer?: (answer: JsonRpcResponse) => void): Fault {
  return {
    kind: 'rewrite',
    fn(answer, params) {
      const behind = asBehind(answer, params, slot)
      onAnswer?.(behind)
      return behind
    },
  }
}

function asBehind(answer: JsonRpcResponse, params: unknown, slot: number): JsonRpcResponse {
  if (answer.error) return answer
  const result = answer.result
  const config = Array.isArray(params) ? (params[1] as { minContextSlot?: number } | undefined) : undefined
  if (config?.minContextSlot !== undefined && config.minContextSlot > slot)
    return {
      jsonrpc: '2.0',
      id: answer.id,
      error: {
        code: -32016,
        message: 'Minimum context slot has not been reached',
        data: { contextSlot: slot },
      },
    }
  if (typeof result === 'number') return { ...answer, result: Math.min(result, slot) }
  if (Array.isArray(result))
    return { ...answer, result: result.filter((entry: { slot: number }) => entry.slot <= slot) }
  if (result && typeof result === 'object' && ((result as { slot?: number }).slot ?? 0) > slot)
    return { ...answer, result: null }
  return answer
}
