import { type Address, getAddress, type Hex, isAddress, isHex, toHex } from 'viem'
import { invalidAction } from './errors.js'

/** EIP-712 typed data as wallets receive it (JSON: numbers may be strings or hex). */
export interface TypedDataPayload {
  domain: TypedDataDomainPayload
  types: Record<string, readonly { name: string; type: string }[]>
  primaryType: string
  message: Record<string, unknown>
}

export interface TypedDataDomainPayload {
  name?: string
  version?: string
  chainId?: number | string
  verifyingContract?: string
  salt?: string
}

/** An `eth_sendTransaction` parameter object (EIP-1474: quantities are hex strings). */
export interface RpcTransaction {
  from: Address
  to?: Address
  data?: Hex
  value?: Hex
  gas?: Hex
  gasPrice?: Hex
  maxFeePerGas?: Hex
  maxPriorityFeePerGas?: Hex
  nonce?: Hex
  chainId?: Hex
}

/**
 * `[address, typedData]`. v4 carries the typed data as a JSON string; v3 and the unversioned
 * method also arrive as objects, and some dapps put the address second, so both orders are read.
 */
export function parseTypedDataParams(
  method: string,
  params: readonly unknown[],
): { address: Address; typedData: TypedDataPayload } {
  const [first, second] = params
  const swapped = !isAddressLike(first) && isAddressLike(second)
  const address = swapped ? second : first
  const raw = swapped ? first : second
  if (!isAddressLike(address)) throw invalidAction('Typed data params lack the signing address.', { method })
  if (method === 'eth_signTypedData_v4' && typeof raw !== 'string') {
    throw invalidAction('eth_signTypedData_v4 expects the typed data as a JSON string.', { method })
  }
  return { address: getAddress(address), typedData: parseTypedData(raw, method) }
}

function parseTypedData(raw: unknown, method: string): TypedDataPayload {
  let value = raw
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw)
    } catch (error) {
      throw invalidAction('Typed data is not valid JSON.', { method }, error)
    }
  }
  const data = value as Partial<TypedDataPayload> | null
  const ok =
    !!data &&
    typeof data === 'object' &&
    typeof data.primaryType === 'string' &&
    isRecord(data.types) &&
    Array.isArray(data.types[data.primaryType]) &&
    isRecord(data.message) &&
    (data.domain === undefined || isRecord(data.domain))
  // Legacy v1 typed data (an array of {type, name, value}) fails here on purpose: nothing we pay with uses it.
  if (!ok) throw invalidAction('Typed data must have domain, types, primaryType and message.', { method })
  return { ...(data as TypedDataPayload), domain: data.domain ?? {} }
}

/** The domain's chain id as a number; `undefined` when the domain names no chain. */
export function typedDataChainId(typedData: TypedDataPayload): number | undefined {
  const raw = typedData.domain.chainId
  if (raw === undefined) return undefined
  const id = toBigInt(raw)
  if (id === undefined || id > BigInt(Number.MAX_SAFE_INTEGER)) {
    throw invalidAction('Typed data domain has an invalid chainId.', { domainChainId: String(raw) })
  }
  return Number(id)
}

/** `personal_sign` is `[message, address]`; the message is hex bytes or, from some dapps, plain UTF-8. */
export function parsePersonalSignParams(params: readonly unknown[]): { address: Address; message: Hex } {
  const [message, address] = params
  if (typeof message !== 'string' || !isAddressLike(address)) {
    throw invalidAction('personal_sign expects [message, address].', { method: 'personal_sign' })
  }
  return { address: getAddress(address), message: isHex(message) ? message : toHex(message) }
}

export function parseTransactionParams(params: readonly unknown[]): RpcTransaction {
  const tx = params[0]
  if (!isRecord(tx) || !isAddressLike(tx.from)) {
    throw invalidAction('eth_sendTransaction expects [{ from, ... }].', { method: 'eth_sendTransaction' })
  }
  if (tx.to !== undefined && tx.to !== null && !isAddressLike(tx.to)) {
    throw invalidAction('Transaction `to` is not an address.', { method: 'eth_sendTransaction' })
  }
  for (const key of [
    'data',
    'value',
    'gas',
    'gasPrice',
    'maxFeePerGas',
    'maxPriorityFeePerGas',
    'nonce',
    'chainId',
  ]) {
    if (tx[key] !== undefined && !isHex(tx[key])) {
      throw invalidAction(`Transaction \`${key}\` must be a hex string.`, { method: 'eth_sendTransaction' })
    }
  }
  const { to, ...rest } = tx as unknown as RpcTransaction
  return { ...rest, from: getAddress(tx.from), ...(to ? { to: getAddress(to) } : {}) }
}

/** Parses a JSON-RPC quantity as wallets send it: bigint, safe integer, decimal or 0x string. */
export function toBigInt(value: unknown): bigint | undefined {
  if (typeof value === 'bigint') return value
  if (typeof value === 'number') return Number.isSafeInteger(value) ? BigInt(value) : undefined
  if (typeof value !== 'string' || !/^(0x[0-9a-fA-F]+|[0-9]+)$/.test(value)) return undefined
  return BigInt(value)
}

function isAddressLike(value: unknown): value is string {
  return typeof value === 'string' && isAddress(value, { strict: false })
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
