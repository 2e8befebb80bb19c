import { PayError } from '../errors/PayError.js'
import { isBase58PublicKey } from './base58.js'

/** CAIP-2 chain id: `<namespace>:<reference>`. */
export interface ChainId {
  namespace: string
  reference: string
}
/** CAIP-10 account id: `<chainId>:<address>`. */
export interface AccountId {
  chainId: string
  namespace: string
  reference: string
  address: string
}
/** CAIP-19 asset id: `<chainId>/<assetNamespace>:<assetReference>[/<tokenId>]`. */
export interface AssetId {
  chainId: string
  namespace: string
  reference: string
  assetNamespace: string
  assetReference: string
  tokenId: string | undefined
}

export const chainIdPattern = /^([-a-z0-9]{3,8}):([-_a-zA-Z0-9]{1,32})$/
export const accountIdPattern = /^([-a-z0-9]{3,8}):([-_a-zA-Z0-9]{1,32}):([-.%a-zA-Z0-9]{1,128})$/
export const assetIdPattern =
  /^([-a-z0-9]{3,8}):([-_a-zA-Z0-9]{1,32})\/([-a-z0-9]{3,8}):([-.%a-zA-Z0-9]{1,128})(?:\/([-.%a-zA-Z0-9]{1,78}))?$/
export const evmAddressPattern = /^0x[0-9a-fA-F]{40}$/

export function parseChainId(value: string): ChainId {
  const match = chainIdPattern.exec(value)
  if (!match) throw invalid('CAIP-2 chain id', value)
  return { namespace: match[1]!, reference: match[2]! }
}

export function parseAccountId(value: string): AccountId {
  const match = accountIdPattern.exec(value)
  if (!match) throw invalid('CAIP-10 account id', value)
  const [, namespace, reference, address] = match as unknown as [string, string, string, string]
  if (!isValidAddress(namespace, address)) throw invalid(`${namespace} address`, value)
  return { chainId: `${namespace}:${reference}`, namespace, reference, address }
}

export function parseAssetId(value: string): AssetId {
  const match = assetIdPattern.exec(value)
  if (!match) throw invalid('CAIP-19 asset id', value)
  const [, namespace, reference, assetNamespace, assetReference, tokenId] = match as unknown as [
    string,
    string,
    string,
    string,
    string,
    string | undefined,
  ]
  return {
    chainId: `${namespace}:${reference}`,
    namespace,
    reference,
    assetNamespace,
    assetReference,
    tokenId,
  }
}

export function formatAccountId(chainId: string, address: string): string {
  return `${chainId}:${address}`
}

export function isChainId(value: unknown): value is string {
  return typeof value === 'string' && chainIdPattern.test(value)
}

export function isAccountId(value: unknown): value is string {
  if (typeof value !== 'string') return false
  const match = accountIdPattern.exec(value)
  return match !== null && isValidAddress(match[1]!, match[3]!)
}

export function isAssetId(value: unknown): value is string {
  return typeof value === 'string' && assetIdPattern.test(value)
}

/** The namespace of a CAIP-2/10/19 string: the text before its first colon. */
export function namespaceOf(caip: string): string {
  const colon = caip.indexOf(':')
  return colon === -1 ? '' : caip.slice(0, colon)
}

/**
 * Address checks for the namespaces caipay signs for; other namespaces only need the CAIP-10 form.
 * EVM: 20-byte hex in any case (a checksum is accepted but not required). Solana: base58 32-byte key.
 */
export function isValidAddress(namespace: string, address: string): boolean {
  if (namespace === 'eip155') return evmAddressPattern.test(address)
  if (namespace === 'solana') return isBase58PublicKey(address)
  return true
}

/**
 * The one identity of a CAIP-10 account or CAIP-19 asset, for every comparison and every key: an
 * eip155 id case-folded (EVM hex is case-insensitive on chain, and CAIP-2/19 keep the rest of it
 * lowercase), any other id exactly as written (Solana base58 is case-sensitive). Options validation,
 * the signing guard, snapshots and the server all compare through it, so one token in two spellings
 * is one asset everywhere.
 */
export function canonicalCaip(id: string): string {
  return namespaceOf(id) === 'eip155' ? id.toLowerCase() : id
}

/** Two CAIP-10 (or CAIP-19) ids name the same account (asset): their canonical forms are equal. */
export function sameCaip(a: string, b: string): boolean {
  return canonicalCaip(a) === canonicalCaip(b)
}

function invalid(kind: string, value: string): PayError {
  return new PayError({ code: 'invalid_caip', message: `Invalid ${kind}.`, context: { value } })
}
