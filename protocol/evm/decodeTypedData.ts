import { type Address, getAddress, isAddress, isHex } from 'viem'
import { authorizationFields, eip712DomainFields } from '../../src/actions/eip712Structs.js'
import type { InspectedTransfer } from '../../src/actions/types.js'
import { eip155Account, erc20Asset } from './caip.js'
import { invalidAction, rejected } from './errors.js'
import {
  isRecord,
  type TypedDataDomainPayload,
  type TypedDataPayload,
  toBigInt,
  typedDataChainId,
} from './params.js'
import { assertAllowedSpender, type EvmDecodePolicy } from './policy.js'

type Field = { readonly name: string; readonly type: string }

/** The EIP-2612 `Permit` struct. */
export const permitFields = [
  { name: 'owner', type: 'address' },
  { name: 'spender', type: 'address' },
  { name: 'value', type: 'uint256' },
  { name: 'nonce', type: 'uint256' },
  { name: 'deadline', type: 'uint256' },
] as const

export const authorizationKinds = ['TransferWithAuthorization', 'ReceiveWithAuthorization'] as const

// A struct of the same name with other fields would hash to a different type, so its signature is
// worthless to the token: decoding refuses it rather than guess which field holds the amount.
const knownStructs: Record<
  string,
  { fields: readonly Field[]; owner: string; to: string; until: string; from?: string; approval?: true }
> = {
  TransferWithAuthorization: {
    fields: authorizationFields,
    owner: 'from',
    to: 'to',
    until: 'validBefore',
    from: 'validAfter',
  },
  ReceiveWithAuthorization: {
    fields: authorizationFields,
    owner: 'from',
    to: 'to',
    until: 'validBefore',
    from: 'validAfter',
  },
  // A permit moves nothing yet, but lets `spender` take `value`: the guard bounds it like a transfer.
  // Only to an allow-listed spender, as an ERC-20 approve.
  Permit: { fields: permitFields, owner: 'owner', to: 'spender', until: 'deadline', approval: true },
}

const domainFields: readonly Field[] = eip712DomainFields

export interface DecodedTypedData {
  /** The address whose funds the signature moves (EIP-3009 `from`, EIP-2612 `owner`). */
  owner: Address
  transfers: readonly InspectedTransfer[]
  /** Unix seconds after which the signature moves nothing (`validBefore`, `deadline`); undefined if unbounded. */
  validUntil: number | undefined
  /** Unix seconds before which it moves nothing (EIP-3009 `validAfter`); undefined when 0 or absent. */
  validFrom?: number
  /**
   * The typed data to sign, rebuilt from the decoded fields only: `EIP712Domain` derived from the
   * domain itself, no other types, the message with exactly the struct's fields.
   */
  typedData: TypedDataPayload
}

/**
 * Decodes the token movement an EIP-712 signature authorises: EIP-3009 transfer/receive
 * authorizations, and EIP-2612 permits to a spender `policy.spenders` allow-lists. Any other typed
 * data is refused, because a guard that cannot read a signature cannot bound what it moves
 * (orders, ...; Permit2 is read by decodePermit2TypedData).
 *
 * @param chainId the action's chain; the domain must name exactly this chain.
 */
export function decodeTypedData(
  chainId: number,
  typedData: TypedDataPayload,
  policy: EvmDecodePolicy = {},
): DecodedTypedData {
  const { primaryType, message } = typedData
  const struct = knownStructs[primaryType]
  if (!struct) throw rejected('This typed data cannot be inspected, so it is not signed.', { primaryType })
  if (fieldsOf(typedData.types[primaryType]) !== fieldsOf(struct.fields)) {
    throw rejected('Typed data does not follow the standard struct of its primary type.', { primaryType })
  }
  const domain = canonicalDomain(chainId, typedData)
  for (const name of Object.keys(typedData.types)) {
    if (name !== primaryType && name !== 'EIP712Domain') {
      throw rejected('Typed data carries a type the wallet does not sign.', { primaryType, type: name })
    }
  }
  for (const key of Object.keys(message)) {
    if (!struct.fields.some((field) => field.name === key)) {
      throw rejected('Typed data message carries a field of no type.', { primaryType, field: key })
    }
  }
  const canonical: Record<string, unknown> = {}
  for (const field of struct.fields) canonical[field.name] = fieldValue(message, field, primaryType)
  const token = domain.verifyingContract
  if (!token) throw invalidAction('Token typed data needs domain.verifyingContract.', { primaryType })
  const owner = canonical[struct.owner] as Address
  const to = canonical[struct.to] as Address
  const until = BigInt(canonical[struct.until] as string)
  const from = struct.from ? BigInt(canonical[struct.from] as string) : 0n
  if (struct.approval) assertAllowedSpender(policy, eip155Account(chainId, to), { chainId, primaryType })
  return {
    owner,
    transfers: [
      {
        asset: erc20Asset(chainId, token as Address),
        amount: BigInt(canonical.value as string),
        to: eip155Account(chainId, to),
        // A permit moves nothing yet: `spender` may take the value, as after an ERC-20 approve.
        ...(struct.approval && { approval: true as const }),
      },
    ],
    validUntil: until <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(until) : undefined,
    // Past any real time, the window never opens: shown as the largest safe integer rather than dropped.
    ...(from > 0n && {
      validFrom: from <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(from) : Number.MAX_SAFE_INTEGER,
    }),
    typedData: {
      types: {
        EIP712Domain: domainFields.filter((field) => field.name in domain),
        [primaryType]: struct.fields,
      },
      primaryType,
      domain,
      message: canonical,
    },
  }
}

/**
 * The domain, checked and normalised: only EIP-712's own fields, `chainId` present and equal to the
 * action's chain (a signature without one is valid on every chain), and a gateway-supplied
 * `EIP712Domain` type that lists exactly the fields the domain shows (else the wallet would hash
 * another domain than the one displayed).
 */
function canonicalDomain(chainId: number, typedData: TypedDataPayload): TypedDataDomainPayload {
  const raw = typedData.domain as Record<string, unknown>
  for (const key of Object.keys(raw)) {
    if (!domainFields.some((field) => field.name === key)) {
      throw rejected('The typed data domain carries a field EIP-712 does not define.', { field: key })
    }
  }
  const domainChainId = typedDataChainId(typedData)
  if (domainChainId !== chainId) {
    throw rejected('The typed data is not bound to the action chain.', { chainId, domainChainId })
  }
  const domain: TypedDataDomainPayload = { chainId }
  if (raw.name !== undefined) domain.name = stringField(raw.name, 'name')
  if (raw.version !== undefined) domain.version = stringField(raw.version, 'version')
  if (raw.verifyingContract !== undefined) {
    if (typeof raw.verifyingContract !== 'string' || !isAddress(raw.verifyingContract, { strict: false })) {
      throw invalidAction('Typed data domain.verifyingContract is not an address.', {})
    }
    domain.verifyingContract = getAddress(raw.verifyingContract)
  }
  if (raw.salt !== undefined) {
    if (!isHex(raw.salt) || raw.salt.length !== 66)
      throw invalidAction('Typed data domain.salt is not 32 bytes.', {})
    domain.salt = raw.salt.toLowerCase()
  }
  const given = typedData.types.EIP712Domain
  const expected = domainFields.filter((field) => field.name in domain)
  if (given !== undefined && fieldsOf(given) !== fieldsOf(expected)) {
    throw rejected('The typed data EIP712Domain type does not match its domain.', {
      given: fieldsOf(given),
      expected: fieldsOf(expected),
    })
  }
  return domain
}

function stringField(value: unknown, name: string): string {
  if (typeof value !== 'string') throw invalidAction(`Typed data domain.${name} is not a string.`, {})
  return value
}

function fieldValue(message: Record<string, unknown>, field: Field, primaryType: string): string {
  const value = message[field.name]
  const context = { primaryType, field: field.name }
  if (field.type === 'address') {
    if (typeof value !== 'string' || !isAddress(value, { strict: false })) {
      throw invalidAction(`Typed data \`${field.name}\` is not an address.`, context)
    }
    return getAddress(value)
  }
  if (field.type === 'bytes32') {
    if (!isHex(value) || value.length !== 66)
      throw invalidAction(`Typed data \`${field.name}\` is not 32 bytes.`, context)
    return value.toLowerCase()
  }
  const number = toBigInt(value)
  if (number === undefined || number < 0n || number >= 2n ** 256n) {
    throw invalidAction(`Typed data \`${field.name}\` is not an integer.`, context)
  }
  return number.toString()
}

function fieldsOf(fields: readonly Field[] | undefined): string {
  if (!Array.isArray(fields)) return ''
  return fields.map((field) => (isRecord(field) ? `${field.type} ${field.name}` : '?')).join(',')
}
