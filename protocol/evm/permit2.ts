import {
  type Address,
  encodeAbiParameters,
  getAddress,
  type Hex,
  hashTypedData,
  isAddress,
  keccak256,
  stringToHex,
} from 'viem'
import { rejected } from './errors.js'
import { isRecord, type TypedDataPayload, toBigInt, typedDataChainId } from './params.js'
import { assertAllowedSpender, type EvmDecodePolicy } from './policy.js'

/** Permit2's address on every chain it is deployed to (Uniswap's CREATE2 deployment). */
export const permit2Address = getAddress('0x000000000022D473030F116dDEE9F6B43aC78BA3')

/**
 * `PermitWitnessTransferFrom` with the witness x402's `exact` scheme signs: the payee (`to`) is part of
 * what the payer signs, so the signature moves the tokens to that address only.
 */
export const permit2WitnessTypes = {
  PermitWitnessTransferFrom: [
    { name: 'permitted', type: 'TokenPermissions' },
    { name: 'spender', type: 'address' },
    { name: 'nonce', type: 'uint256' },
    { name: 'deadline', type: 'uint256' },
    { name: 'witness', type: 'Witness' },
  ],
  TokenPermissions: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint256' },
  ],
  Witness: [
    { name: 'to', type: 'address' },
    { name: 'validAfter', type: 'uint256' },
  ],
} as const

/** The tail Permit2 appends to its own type string (`permitWitnessTransferFrom`'s `witnessTypeString`). */
export const permit2WitnessTypeString =
  'Witness witness)TokenPermissions(address token,uint256 amount)Witness(address to,uint256 validAfter)'

const witnessTypeHash = keccak256(stringToHex('Witness(address to,uint256 validAfter)'))

/** Permit2's EIP-712 domain has no version. */
const domainFields = [
  { name: 'name', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
] as const

/** One Permit2 signature transfer with the payee as witness. */
export interface Permit2Transfer {
  chainId: number
  token: Address
  amount: bigint
  /** Who may submit it: Permit2 binds the signature to `msg.sender`. */
  spender: Address
  /** Permit2's unordered nonce (a bit in the owner's bitmap). */
  nonce: bigint
  /** Unix seconds. */
  deadline: bigint
  /** The witness: where the tokens go. */
  to: Address
  validAfter: bigint
}

/** Typed data for `eth_signTypedData_v4`, uints as decimal strings (JSON). */
export function permit2TypedData(p: Permit2Transfer): TypedDataPayload {
  return {
    types: { EIP712Domain: domainFields, ...permit2WitnessTypes },
    primaryType: 'PermitWitnessTransferFrom',
    domain: { name: 'Permit2', chainId: p.chainId, verifyingContract: permit2Address },
    message: {
      permitted: { token: p.token, amount: p.amount.toString() },
      spender: p.spender,
      nonce: p.nonce.toString(),
      deadline: p.deadline.toString(),
      witness: { to: p.to, validAfter: p.validAfter.toString() },
    },
  }
}

/** The EIP-712 hash the payer signs (what an ERC-1271 account is asked about). */
export function permit2Hash(p: Permit2Transfer): Hex {
  return hashTypedData({
    domain: { name: 'Permit2', chainId: p.chainId, verifyingContract: permit2Address },
    types: permit2WitnessTypes,
    primaryType: 'PermitWitnessTransferFrom',
    message: {
      permitted: { token: p.token, amount: p.amount },
      spender: p.spender,
      nonce: p.nonce,
      deadline: p.deadline,
      witness: { to: p.to, validAfter: p.validAfter },
    },
  })
}

/** The witness as Permit2 hashes it (`permitWitnessTransferFrom`'s `witness` argument). */
export function permit2WitnessHash(to: Address, validAfter: bigint): Hex {
  return keccak256(
    encodeAbiParameters(
      [{ type: 'bytes32' }, { type: 'address' }, { type: 'uint256' }],
      [witnessTypeHash, to, validAfter],
    ),
  )
}

/**
 * Permit2's allowance grant (`permit(owner, PermitSingle, signature)`): a subscription's mandate
 * (docs/subscriptions.md). It lets `spender` pull up to `amount` of `token` until `expiration`, so it is
 * signed only inside a subscription option whose terms bound it.
 */
export const permit2AllowanceTypes = {
  PermitSingle: [
    { name: 'details', type: 'PermitDetails' },
    { name: 'spender', type: 'address' },
    { name: 'sigDeadline', type: 'uint256' },
  ],
  PermitDetails: [
    { name: 'token', type: 'address' },
    { name: 'amount', type: 'uint160' },
    { name: 'expiration', type: 'uint48' },
    { name: 'nonce', type: 'uint48' },
  ],
} as const

/** One Permit2 allowance grant. */
export interface Permit2Allowance {
  chainId: number
  token: Address
  /** The most `spender` may pull in total (uint160). */
  amount: bigint
  /** Unix seconds when the allowance ends (uint48). */
  expiration: bigint
  /** Permit2's ordered nonce for (owner, token, spender) (uint48). */
  nonce: bigint
  spender: Address
  /** Unix seconds after which the signature can no longer be submitted. */
  sigDeadline: bigint
}

/** Typed data for `eth_signTypedData_v4`, uints as decimal strings (JSON). */
export function permit2AllowanceTypedData(p: Permit2Allowance): TypedDataPayload {
  return {
    types: { EIP712Domain: domainFields, ...permit2AllowanceTypes },
    primaryType: 'PermitSingle',
    domain: { name: 'Permit2', chainId: p.chainId, verifyingContract: permit2Address },
    message: {
      details: {
        token: p.token,
        amount: p.amount.toString(),
        expiration: p.expiration.toString(),
        nonce: p.nonce.toString(),
      },
      spender: p.spender,
      sigDeadline: p.sigDeadline.toString(),
    },
  }
}

/** The EIP-712 hash the owner signs for an allowance grant. */
export function permit2AllowanceHash(p: Permit2Allowance): Hex {
  return hashTypedData({
    domain: { name: 'Permit2', chainId: p.chainId, verifyingContract: permit2Address },
    types: permit2AllowanceTypes,
    primaryType: 'PermitSingle',
    message: {
      details: { token: p.token, amount: p.amount, expiration: Number(p.expiration), nonce: Number(p.nonce) },
      spender: p.spender,
      sigDeadline: p.sigDeadline,
    },
  })
}

// What else Permit2 signs, each refused by name: these could move more, to anyone, or for longer.
const refusedPrimaryTypes: Record<string, string> = {
  PermitBatchWitnessTransferFrom: 'A Permit2 batch transfer is not signed.',
  PermitBatchTransferFrom: 'A Permit2 batch transfer is not signed.',
  PermitTransferFrom: 'A Permit2 transfer without the payee as witness is not signed.',
  PermitSingle: 'A Permit2 allowance is not signed (it lets the spender take funds until it expires).',
  PermitBatch: 'A Permit2 allowance is not signed (it lets the spender take funds until it expires).',
}

/**
 * Reads a Permit2 signature transfer the wallet is asked to sign, or refuses it. Only the single
 * transfer with the payee as witness is read; its spender must be the payee itself, so only the payee
 * can submit it and only to itself (another spender could hand the tokens to anyone the witness does not
 * bind). The domain must be Permit2's on the action's chain. Returns the transfer and the typed data
 * rebuilt from it (nothing the decoder did not read is signed).
 */
export function decodePermit2TypedData(
  chainId: number,
  typedData: TypedDataPayload,
): { transfer: Permit2Transfer; typedData: TypedDataPayload } {
  const { primaryType } = typedData
  const refusal = refusedPrimaryTypes[primaryType]
  if (refusal) throw rejected(refusal, { primaryType })
  if (primaryType !== 'PermitWitnessTransferFrom') {
    throw rejected('This Permit2 typed data cannot be inspected, so it is not signed.', { primaryType })
  }
  const types = permit2Types(chainId, typedData)
  if (
    Object.keys(types).sort().join(',') !== Object.keys(permit2WitnessTypes).sort().join(',') ||
    Object.entries(permit2WitnessTypes).some(([name, fields]) => shape(types[name]) !== shape(fields))
  ) {
    throw rejected('The Permit2 typed data does not follow the payee-witness transfer struct.', {})
  }
  const { message } = typedData
  exactKeys(message, ['deadline', 'nonce', 'permitted', 'spender', 'witness'], 'message')
  const permitted = message.permitted
  const witness = message.witness
  if (!isRecord(permitted) || !isRecord(witness)) throw rejected('The Permit2 message is malformed.', {})
  exactKeys(permitted, ['amount', 'token'], 'permitted')
  exactKeys(witness, ['to', 'validAfter'], 'witness')
  const transfer: Permit2Transfer = {
    chainId,
    token: address(permitted.token, 'permitted.token'),
    amount: uint(permitted.amount, 'permitted.amount'),
    spender: address(message.spender, 'spender'),
    nonce: uint(message.nonce, 'nonce'),
    deadline: uint(message.deadline, 'deadline'),
    to: address(witness.to, 'witness.to'),
    validAfter: uint(witness.validAfter, 'witness.validAfter'),
  }
  if (transfer.spender !== transfer.to) {
    throw rejected('The Permit2 spender is not the payee: it could send the tokens elsewhere.', {
      spender: transfer.spender,
      to: transfer.to,
    })
  }
  return { transfer, typedData: permit2TypedData(transfer) }
}

/**
 * Reads a Permit2 allowance grant (`PermitSingle`: a subscription's mandate), or refuses it: the domain
 * Permit2's on the action's chain, the struct exactly Permit2's, each field within its Solidity type
 * (amount uint160, expiration and nonce uint48), the spender one `policy.spenders` allow-lists. Whether
 * the grant is within a subscription's terms is the guard's to check (src/actions/mandate.ts). Returns
 * the grant and the typed data rebuilt from it.
 */
export function decodePermit2Allowance(
  chainId: number,
  typedData: TypedDataPayload,
  policy: EvmDecodePolicy = {},
): { allowance: Permit2Allowance; typedData: TypedDataPayload } {
  if (typedData.primaryType !== 'PermitSingle') {
    throw rejected('This Permit2 typed data is not an allowance grant.', {
      primaryType: typedData.primaryType,
    })
  }
  const types = permit2Types(chainId, typedData)
  if (
    Object.keys(types).sort().join(',') !== Object.keys(permit2AllowanceTypes).sort().join(',') ||
    Object.entries(permit2AllowanceTypes).some(([name, fields]) => shape(types[name]) !== shape(fields))
  ) {
    throw rejected('The Permit2 typed data does not follow the PermitSingle struct.', {})
  }
  const { message } = typedData
  exactKeys(message, ['details', 'sigDeadline', 'spender'], 'message')
  const details = message.details
  if (!isRecord(details)) throw rejected('The Permit2 message is malformed.', {})
  exactKeys(details, ['amount', 'expiration', 'nonce', 'token'], 'details')
  const allowance: Permit2Allowance = {
    chainId,
    token: address(details.token, 'details.token'),
    amount: uint(details.amount, 'details.amount', 160),
    expiration: uint(details.expiration, 'details.expiration', 48),
    nonce: uint(details.nonce, 'details.nonce', 48),
    spender: address(message.spender, 'spender'),
    sigDeadline: uint(message.sigDeadline, 'sigDeadline'),
  }
  assertAllowedSpender(policy, `eip155:${chainId}:${allowance.spender}`, {
    chainId,
    primaryType: 'PermitSingle',
  })
  return { allowance, typedData: permit2AllowanceTypedData(allowance) }
}

/**
 * Checks the domain is Permit2's on the action's chain (no other fields, the canonical contract, a
 * matching `EIP712Domain` type) and returns the typed data's other types.
 */
function permit2Types(
  chainId: number,
  typedData: TypedDataPayload,
): Omit<TypedDataPayload['types'], 'EIP712Domain'> {
  const domain = typedData.domain as Record<string, unknown>
  const domainKeys = Object.keys(domain).sort().join(',')
  if (domainKeys !== 'chainId,name,verifyingContract' || domain.name !== 'Permit2') {
    throw rejected("The typed data domain is not Permit2's.", { domain: domainKeys })
  }
  if (
    typeof domain.verifyingContract !== 'string' ||
    !sameAddress(domain.verifyingContract, permit2Address)
  ) {
    throw rejected('The typed data names another Permit2 contract than the canonical one.', {
      verifyingContract: String(domain.verifyingContract),
    })
  }
  const domainChainId = typedDataChainId(typedData)
  if (domainChainId !== chainId) {
    throw rejected('The typed data is not bound to the action chain.', { chainId, domainChainId })
  }
  const { EIP712Domain, ...types } = typedData.types
  if (EIP712Domain !== undefined && shape(EIP712Domain) !== shape(domainFields)) {
    throw rejected('The typed data EIP712Domain type does not match its domain.', {})
  }
  return types
}

/**
 * Whether this typed data is for Permit2 (by its domain): such typed data is read by
 * `decodePermit2TypedData` or refused, never by the token decoders.
 */
export function isPermit2TypedData(typedData: TypedDataPayload): boolean {
  const domain = typedData.domain as Record<string, unknown>
  return (
    domain.name === 'Permit2' ||
    (typeof domain.verifyingContract === 'string' && sameAddress(domain.verifyingContract, permit2Address)) ||
    typedData.primaryType in refusedPrimaryTypes
  )
}

function exactKeys(value: Record<string, unknown>, keys: readonly string[], where: string) {
  const got = Object.keys(value).sort().join(',')
  if (got !== [...keys].sort().join(',')) {
    throw rejected('The Permit2 message carries other fields than its struct.', { where, fields: got })
  }
}

function address(value: unknown, field: string): Address {
  if (typeof value !== 'string' || !isAddress(value, { strict: false })) {
    throw rejected(`Permit2 \`${field}\` is not an address.`, { field })
  }
  return getAddress(value)
}

function uint(value: unknown, field: string, bits = 256): bigint {
  const number = toBigInt(value)
  if (number === undefined || number < 0n || number >= 2n ** BigInt(bits)) {
    throw rejected(`Permit2 \`${field}\` is not an integer.`, { field })
  }
  return number
}

function shape(fields: readonly { name: string; type: string }[] | undefined): string {
  if (!Array.isArray(fields)) return ''
  return fields.map((f) => (isRecord(f) ? `${f.type} ${f.name}` : '?')).join(',')
}

function sameAddress(a: string, b: string): boolean {
  return a.toLowerCase() === b.toLowerCase()
}

/**
 * What a charging service calls on Permit2's allowance transfer (a subscription's mandate): `permit`
 * records the owner's signed PermitSingle, `transferFrom` pulls within it (at most `amount` in all,
 * until `expiration`), `allowance` reads what is left and the next nonce; `approve(token, spender, 0, 0)`
 * and `lockdown` are the owner's revokes.
 */
export const permit2AllowanceAbi = [
  {
    type: 'function',
    name: 'permit',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 'owner', type: 'address' },
      {
        name: 'permitSingle',
        type: 'tuple',
        components: [
          {
            name: 'details',
            type: 'tuple',
            components: [
              { name: 'token', type: 'address' },
              { name: 'amount', type: 'uint160' },
              { name: 'expiration', type: 'uint48' },
              { name: 'nonce', type: 'uint48' },
            ],
          },
          { name: 'spender', type: 'address' },
          { name: 'sigDeadline', type: 'uint256' },
        ],
      },
      { name: 'signature', type: 'bytes' },
    ],
    outputs: [],
  },
  {
    type: 'function',
    name: 'transferFrom',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 'from', type: 'address' },
      { name: 'to', type: 'address' },
      { name: 'amount', type: 'uint160' },
      { name: 'token', type: 'address' },
    ],
    outputs: [],
  },
  {
    type: 'function',
    name: 'allowance',
    stateMutability: 'view',
    inputs: [
      { name: 'owner', type: 'address' },
      { name: 'token', type: 'address' },
      { name: 'spender', type: 'address' },
    ],
    outputs: [
      { name: 'amount', type: 'uint160' },
      { name: 'expiration', type: 'uint48' },
      { name: 'nonce', type: 'uint48' },
    ],
  },
  {
    type: 'function',
    name: 'approve',
    stateMutability: 'nonpayable',
    inputs: [
      { name: 'token', type: 'address' },
      { name: 'spender', type: 'address' },
      { name: 'amount', type: 'uint160' },
      { name: 'expiration', type: 'uint48' },
    ],
    outputs: [],
  },
  {
    type: 'function',
    name: 'lockdown',
    stateMutability: 'nonpayable',
    inputs: [
      {
        name: 'approvals',
        type: 'tuple[]',
        components: [
          { name: 'token', type: 'address' },
          { name: 'spender', type: 'address' },
        ],
      },
    ],
    outputs: [],
  },
] as const
