import { isAccountId, namespaceOf } from '../caip/caip.js'
import { PayError } from '../errors/PayError.js'
import type { Signer } from './types.js'

/**
 * Namespaces the service can hand us (spec rule 3). An action in one of these without a registered
 * signer is `missing_signer`; any other namespace is `unsupported_namespace`. Registering a signer for a
 * further namespace is enough to support it: routing never names a namespace.
 */
export const knownNamespaces: readonly string[] = ['eip155', 'solana']

export interface SignerRegistry {
  readonly namespaces: readonly string[]
  get(namespace: string): Signer | undefined
  /** CAIP-10 accounts to advertise: only those of registered signers, in their own namespace (rule 1). */
  accounts(): string[]
}

export function createSignerRegistry(signers: readonly Signer[]): SignerRegistry {
  const byNamespace = new Map<string, Signer>()
  for (const signer of signers) {
    assertSigner(signer)
    if (byNamespace.has(signer.namespace)) {
      throw invalidSigner('Two signers were registered for one namespace.', signer.namespace)
    }
    byNamespace.set(signer.namespace, signer)
  }

  return {
    namespaces: [...byNamespace.keys()],
    get: (namespace) => byNamespace.get(namespace),
    accounts() {
      const seen = new Set<string>()
      for (const signer of byNamespace.values()) {
        for (const account of signer.accounts()) {
          // A signer that lists foreign or malformed accounts would make us advertise keys we cannot use.
          if (namespaceOf(account) === signer.namespace && isAccountId(account)) seen.add(account)
        }
      }
      return [...seen]
    },
  }
}

function assertSigner(signer: Signer): void {
  const namespace = (signer as Partial<Signer> | undefined)?.namespace
  if (typeof namespace !== 'string' || !/^[-a-z0-9]{3,8}$/.test(namespace)) {
    throw invalidSigner('A signer needs a CAIP-2 namespace.', String(namespace))
  }
  if (
    typeof signer.request !== 'function' ||
    typeof signer.accounts !== 'function' ||
    !Array.isArray(signer.methods)
  ) {
    throw invalidSigner('A signer needs accounts(), methods and request().', namespace)
  }
}

function invalidSigner(message: string, namespace: string): PayError {
  return new PayError({ code: 'invalid_signer', message, context: { namespace } })
}
