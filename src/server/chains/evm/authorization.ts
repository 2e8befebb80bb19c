import {
  type Address,
  concat,
  domainSeparator,
  encodeAbiParameters,
  getAddress,
  type Hex,
  hashTypedData,
  isAddress,
  isHex,
  keccak256,
  toHex,
} from 'viem'
import { authorizationFields } from '../../../../protocol/evm/index.js'
import type { EvmDomain } from './chain.js'

export type AuthorizationKind = 'ReceiveWithAuthorization' | 'TransferWithAuthorization'

/** An EIP-3009 authorization as the service builds, stores and relays it. */
export interface Authorization {
  kind: AuthorizationKind
  chainId: number
  token: Address
  domain: EvmDomain
  from: Address
  to: Address
  value: bigint
  validAfter: bigint
  validBefore: bigint
  nonce: Hex
}

/** The same, JSON-safe (job payloads, option state). */
export type AuthorizationJson = Omit<Authorization, 'value' | 'validAfter' | 'validBefore'> & {
  value: string
  validAfter: string
  validBefore: string
}

/**
 * `receiveWithAuthorization` when the relayer is the payee: the token then requires `msg.sender == to`,
 * so nobody who sees the signature in the mempool can front-run the relay. `transferWithAuthorization`
 * otherwise (anyone may submit it).
 */
export function authorizationKind(relayer: Address, payee: Address): AuthorizationKind {
  return relayer.toLowerCase() === payee.toLowerCase()
    ? 'ReceiveWithAuthorization'
    : 'TransferWithAuthorization'
}

function authorizationDomain(a: Authorization) {
  return { name: a.domain.name, version: a.domain.version, chainId: a.chainId, verifyingContract: a.token }
}

/** Typed data for `eth_signTypedData_v4` as wallets get it over JSON: uints as decimal strings. */
export function authorizationTypedData(a: Authorization) {
  return {
    types: {
      EIP712Domain: [
        { name: 'name', type: 'string' },
        { name: 'version', type: 'string' },
        { name: 'chainId', type: 'uint256' },
        { name: 'verifyingContract', type: 'address' },
      ],
      [a.kind]: authorizationFields,
    },
    primaryType: a.kind,
    domain: authorizationDomain(a),
    message: {
      from: a.from,
      to: a.to,
      value: a.value.toString(),
      validAfter: a.validAfter.toString(),
      validBefore: a.validBefore.toString(),
      nonce: a.nonce,
    },
  }
}

/**
 * Reads back the authorization from the `eth_signTypedData_v4` params the service offered (the exact
 * message stored with the option). Throws when they are not a service-built authorization.
 */
export function authorizationFromParams(params: string): Authorization {
  const [address, json] = JSON.parse(params) as [unknown, unknown]
  if (typeof json !== 'string' || typeof address !== 'string') throw new Error('Not typed-data params.')
  const data = JSON.parse(json) as ReturnType<typeof authorizationTypedData>
  const kind = data.primaryType
  if (kind !== 'ReceiveWithAuthorization' && kind !== 'TransferWithAuthorization') {
    throw new Error(`Not an EIP-3009 authorization: ${String(kind)}.`)
  }
  const { domain, message } = data
  if (!isAddress(domain.verifyingContract) || !isAddress(message.from) || !isAddress(message.to)) {
    throw new Error('Authorization addresses are malformed.')
  }
  if (!isHex(message.nonce) || message.nonce.length !== 66)
    throw new Error('Authorization nonce is malformed.')
  return {
    kind,
    chainId: Number(domain.chainId),
    token: getAddress(domain.verifyingContract),
    domain: { name: domain.name, version: domain.version },
    from: getAddress(message.from),
    to: getAddress(message.to),
    value: BigInt(message.value),
    validAfter: BigInt(message.validAfter),
    validBefore: BigInt(message.validBefore),
    nonce: message.nonce,
  }
}

/** The EIP-712 hash the payer signs: what an ERC-1271 account is asked about, and what ECDSA recovers from. */
export function authorizationHash(a: Authorization): Hex {
  return hashTypedData({
    domain: authorizationDomain(a),
    types: { [a.kind]: authorizationFields },
    primaryType: a.kind,
    message: {
      from: a.from,
      to: a.to,
      value: a.value,
      validAfter: a.validAfter,
      validBefore: a.validBefore,
      nonce: a.nonce,
    },
  })
}

/**
 * authorizationHash without viem's generic walk of the typed data (its validation, the domain's and the
 * type's encodings, every time): the same EIP-712 hash from a domain separator kept per token and the
 * struct's fixed encoding, about a tenth of the CPU (a FastPath, fastPath.ts; keySignatureOnNode.test.ts
 * compares the two). The tokens are the configured assets', so the separators kept stay few.
 */
export function authorizationHashOfKnownShape(a: Authorization): Hex {
  const key = `${a.chainId}:${a.token}:${a.domain.name}:${a.domain.version}`
  let separator = domainSeparators.get(key)
  if (!separator) {
    if (domainSeparators.size >= maxDomainSeparators) domainSeparators.clear()
    separator = domainSeparator({ domain: authorizationDomain(a) })
    domainSeparators.set(key, separator)
  }
  const struct = keccak256(
    encodeAbiParameters(authorizationStruct, [
      typeHashes[a.kind],
      a.from,
      a.to,
      a.value,
      a.validAfter,
      a.validBefore,
      a.nonce,
    ]),
  )
  return keccak256(concat(['0x1901', separator, struct]))
}

const domainSeparators = new Map<string, Hex>()
const maxDomainSeparators = 1_000
const typeHashOf = (kind: AuthorizationKind) =>
  keccak256(toHex(`${kind}(${authorizationFields.map((f) => `${f.type} ${f.name}`).join(',')})`))
const typeHashes: Record<AuthorizationKind, Hex> = {
  ReceiveWithAuthorization: typeHashOf('ReceiveWithAuthorization'),
  TransferWithAuthorization: typeHashOf('TransferWithAuthorization'),
}
const authorizationStruct = [
  { type: 'bytes32' },
  ...authorizationFields.map((f) => ({ type: f.type })),
] as const

export function authorizationToJson(a: Authorization): AuthorizationJson {
  return {
    ...a,
    value: a.value.toString(),
    validAfter: a.validAfter.toString(),
    validBefore: a.validBefore.toString(),
  }
}

export function authorizationFromJson(a: AuthorizationJson): Authorization {
  return {
    ...a,
    value: BigInt(a.value),
    validAfter: BigInt(a.validAfter),
    validBefore: BigInt(a.validBefore),
  }
}
