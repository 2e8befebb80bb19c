import type { WalletConnectNamespace, WalletConnectSession } from './types.js'

/** What a session approved for one CAIP-2 namespace, merged over all its keys. */
export interface NamespaceScope {
  accounts: string[]
  methods: string[]
  chains: string[]
  /** Methods per chain: a session keyed by chain (`eip155:1`) may approve different methods per chain. */
  methodsByChain: Map<string, Set<string>>
}

/** Text before the first colon: `eip155` for both `eip155` and `eip155:1` keys or ids. */
export function namespaceOf(keyOrId: string): string {
  const colon = keyOrId.indexOf(':')
  return colon === -1 ? keyOrId : keyOrId.slice(0, colon)
}

/** Namespaces the session approved, in the session's key order, without duplicates. */
export function sessionNamespaces(session: WalletConnectSession): string[] {
  return [...new Set(Object.keys(session.namespaces).map(namespaceOf))]
}

export function namespaceScope(session: WalletConnectSession, namespace: string): NamespaceScope {
  const accounts = new Set<string>()
  const methods = new Set<string>()
  const methodsByChain = new Map<string, Set<string>>()
  for (const [key, entry] of Object.entries(session.namespaces)) {
    if (namespaceOf(key) !== namespace) continue
    for (const account of entry.accounts) accounts.add(account)
    for (const method of entry.methods) methods.add(method)
    for (const chain of chainsOf(key, entry)) {
      const forChain = methodsByChain.get(chain) ?? new Set<string>()
      for (const method of entry.methods) forChain.add(method)
      methodsByChain.set(chain, forChain)
    }
  }
  return {
    accounts: [...accounts],
    methods: [...methods],
    chains: [...methodsByChain.keys()],
    methodsByChain,
  }
}

/**
 * CAIP-25 lets `chains` be omitted: then the key itself is the chain (`eip155:1`), or the chains
 * are those of the approved accounts (`eip155:1:0xab...` -> `eip155:1`).
 */
function chainsOf(key: string, entry: WalletConnectNamespace): string[] {
  if (entry.chains && entry.chains.length > 0) return [...entry.chains]
  if (key.includes(':')) return [key]
  return [...new Set(entry.accounts.map((account) => account.slice(0, account.lastIndexOf(':'))))]
}
