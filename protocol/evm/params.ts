import { type Address, getAddress, type Hex, hexToBytes, isAddress, isHex, toHex } from 'viem'
import { decodeUtf8Strict } from '../utf8.js'
import { invalidAction, rejected } from './errors.js'

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

/**
 * An `eth_sendTransaction` as the wallet forwards it: only what the guard decoded. Gas, fees, nonce
 * and transaction type are never taken from the gateway; the wallet (or viem) fills them in.
 */
export interface RpcTransaction {
  from: Address
  to?: Address
  data?: Hex
  value?: Hex
  chainId?: Hex
}

// Every key an `eth_sendTransaction` from the gateway may carry. Anything else (accessList,
// authorizationList, blobs, ...) changes what the transaction does and is refused, never forwarded.
const decodedKeys = ['from', 'to', 'data', 'input', 'value', 'chainId'] as const
// Read and dropped: the wallet chooses them (an attacker's fee or nonce is never signed).
const walletChosenKeys = ['gas', 'gasPrice', 'maxFeePerGas', 'maxPriorityFeePerGas', 'nonce', 'type'] as const
const hexKeys = [...decodedKeys.slice(2), ...walletChosenKeys]
// Plain value transfers and EIP-1559 transactions: the two shapes the wallet rebuilds itself.
const allowedTypes = ['0x0', '0x2']

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
  // Legacy v1 typed data (an array of {type, name, value}) fails here on purpose: it has no domain,
  // so a signature of it is valid on every chain and for every contract.
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

/**
 * `personal_sign` is `[message, address]`; the message is hex bytes or, from some dapps, plain UTF-8.
 * `text` is the message as the user would read it, or undefined when it is not readable text.
 */
export function parsePersonalSignParams(params: readonly unknown[]): {
  address: Address
  message: Hex
  text: string | undefined
} {
  const [message, address] = params
  if (typeof message !== 'string' || !isAddressLike(address)) {
    throw invalidAction('personal_sign expects [message, address].', { method: 'personal_sign' })
  }
  const hex = isHex(message) && message.length % 2 === 0 ? message : toHex(message)
  return { address: getAddress(address), message: hex, text: readableText(hexToBytes(hex)) }
}

/**
 * Text a person can read: strict UTF-8, no control characters but tab and line breaks, and not
 * exactly 32 bytes (the size of a hash: a Safe or any `toEthSignedMessageHash` verifier would take
 * the signature of a 32-byte digest as consent to whatever it hashes).
 */
function readableText(bytes: Uint8Array): string | undefined {
  if (bytes.length === 0 || bytes.length === 32) return undefined
  const text = decodeUtf8Strict(bytes)
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
  if (text === undefined || /[\u0000-\u0008\u000b\u000c\u000e-\u001f\u007f-\u009f]/.test(text))
    return undefined
  return text
}

/**
 * Reads an `eth_sendTransaction` parameter object with an allow-list: the result holds only what
 * the guard decodes. `input` is read as `data` (nodes prefer `input` when both are set, so the two
 * must agree); gas, fees, nonce and type are dropped; any other key refuses the transaction.
 */
export function parseTransactionParams(params: readonly unknown[]): RpcTransaction {
  const tx = params[0]
  if (!isRecord(tx) || !isAddressLike(tx.from)) {
    throw invalidAction('eth_sendTransaction expects [{ from, ... }].', { method: 'eth_sendTransaction' })
  }
  for (const key of Object.keys(tx)) {
    if (
      !(decodedKeys as readonly string[]).includes(key) &&
      !(walletChosenKeys as readonly string[]).includes(key)
    ) {
      throw rejected('The transaction carries a field the wallet does not sign.', { field: key })
    }
  }
  if (tx.to !== undefined && tx.to !== null && !isAddressLike(tx.to)) {
    throw invalidAction('Transaction `to` is not an address.', { method: 'eth_sendTransaction', field: 'to' })
  }
  for (const key of hexKeys) {
    if (tx[key] !== undefined && tx[key] !== null && !isHex(tx[key])) {
      throw invalidAction(`Transaction \`${key}\` must be a hex string.`, {
        method: 'eth_sendTransaction',
        field: key,
      })
    }
  }
  if (tx.type != null && !allowedTypes.includes((tx.type as string).toLowerCase())) {
    throw rejected('The transaction type is not one the wallet signs.', { field: 'type', type: tx.type })
  }
  const data = (tx.data ?? undefined) as Hex | undefined
  const input = (tx.input ?? undefined) as Hex | undefined
  if (data !== undefined && input !== undefined && data.toLowerCase() !== input.toLowerCase()) {
    throw rejected('The transaction carries different `data` and `input`.', { field: 'input' })
  }
  const calldata = data ?? input
  if (calldata !== undefined && calldata.length % 2 !== 0) {
    throw invalidAction('Transaction calldata has an odd number of hex digits.', { field: 'data' })
  }
  const value = tx.value as Hex | null | undefined
  const chainId = tx.chainId as Hex | null | undefined
  return {
    from: getAddress(tx.from),
    ...(tx.to ? { to: getAddress(tx.to as string) } : {}),
    ...(calldata !== undefined && calldata !== '0x' ? { data: calldata } : {}),
    ...(value != null ? { value } : {}),
    ...(chainId != null ? { chainId } : {}),
  }
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

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
