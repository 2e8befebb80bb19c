/**
 * What an EVM node's refusal of a transaction means, read from its message in one place (as viem's
 * getNodeError does for the refusals it knows): geth, Anvil, Erigon, Nethermind and Besu word the same
 * refusal differently, and viem passes most of them through as text. Undefined: none of these.
 */
export type NodeRefusal = 'fees_too_low' | 'already_known' | 'nonce_too_low'

const refusals: readonly (readonly [NodeRefusal, RegExp])[] = [
  // A transaction (or a replacement) refused for its fees.
  [
    'fees_too_low',
    /underpriced|fee too low|less than (the )?block base fee|fee cap|feecap|insufficient fee/i,
  ],
  // The node already has these bytes: the transaction is in.
  ['already_known', /already known|known transaction|already imported/i],
  // The nonce was used already (by this key elsewhere, or a transaction this process lost track of).
  ['nonce_too_low', /nonce too low/i],
]

export function nodeRefusal(error: unknown): NodeRefusal | undefined {
  const message = String(error)
  return refusals.find(([, pattern]) => pattern.test(message))?.[0]
}
