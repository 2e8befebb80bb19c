import { type Address, getAddress, isAddress } from 'viem'
import type { InspectedTransfer } from '../../src/actions/types.js'
import { eip155Account, erc20Asset } from './caip.js'
import { invalidAction, rejected } from './errors.js'
import { type TypedDataPayload, toBigInt, typedDataChainId } from './params.js'

export interface DecodedTypedData {
  /** The address whose funds the signature moves (EIP-3009 `from`, EIP-2612 `owner`). */
  owner: Address
  transfers: readonly InspectedTransfer[]
}

// Field lists as the token contracts hash them. A struct of the same name with other fields would
// hash to a different type, so its signature is worthless to the token: decoding refuses it rather
// than guess which field holds the amount.
const authorizationFields =
  'address from,address to,uint256 value,uint256 validAfter,uint256 validBefore,bytes32 nonce'
const knownStructs: Record<string, string> = {
  TransferWithAuthorization: authorizationFields,
  ReceiveWithAuthorization: authorizationFields,
  Permit: 'address owner,address spender,uint256 value,uint256 nonce,uint256 deadline',
}

/**
 * Decodes the token movement an EIP-712 signature authorises: EIP-3009 transfer/receive
 * authorizations and EIP-2612 permits. Any other typed data is refused, because a guard that
 * cannot read a signature cannot bound what it moves (Permit2, orders, ...).
 *
 * @param chainId the action's chain; a domain naming another chain is refused.
 */
export function decodeTypedData(chainId: number, typedData: TypedDataPayload): DecodedTypedData {
  assertDomainChain(chainId, typedData)
  const { primaryType, message } = typedData
  const expected = knownStructs[primaryType]
  if (!expected) throw rejected('This typed data cannot be inspected, so it is not signed.', { primaryType })
  if (fieldsOf(typedData, primaryType) !== expected) {
    throw rejected('Typed data does not follow the standard struct of its primary type.', { primaryType })
  }
  const token = typedData.domain.verifyingContract
  if (!token || !isAddress(token, { strict: false })) {
    throw invalidAction('Token typed data needs domain.verifyingContract.', { primaryType })
  }
  const amount = toBigInt(message.value)
  if (amount === undefined) throw invalidAction('Typed data `value` is not an integer.', { primaryType })
  const isPermit = primaryType === 'Permit'
  const owner = addressField(message, isPermit ? 'owner' : 'from', primaryType)
  // A permit moves nothing yet, but lets `spender` take `value`: the guard must bound it like a transfer.
  const to = addressField(message, isPermit ? 'spender' : 'to', primaryType)
  return { owner, transfers: [{ asset: erc20Asset(chainId, token), amount, to: eip155Account(chainId, to) }] }
}

/** Refuses typed data signed for another chain than the action's: it would be a valid signature there. */
export function assertDomainChain(chainId: number, typedData: TypedDataPayload): void {
  const domainChainId = typedDataChainId(typedData)
  if (domainChainId !== undefined && domainChainId !== chainId) {
    throw rejected('The typed data is for another chain than the action.', { chainId, domainChainId })
  }
}

function fieldsOf(typedData: TypedDataPayload, primaryType: string): string {
  return (typedData.types[primaryType] ?? []).map((field) => `${field.type} ${field.name}`).join(',')
}

function addressField(message: Record<string, unknown>, key: string, primaryType: string): Address {
  const value = message[key]
  if (typeof value !== 'string' || !isAddress(value, { strict: false })) {
    throw invalidAction(`Typed data \`${key}\` is not an address.`, { primaryType })
  }
  return getAddress(value)
}
