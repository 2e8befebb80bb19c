/**
 * EIP-712 structs as plain data, read by the EVM protocol module (which decodes and rebuilds typed
 * data) and by the wallet core's x402 payer (which builds it): the core may not import `protocol/`,
 * so the one definition lives here, where both may read it.
 */

/** The EIP-3009 struct of both authorization kinds, as the token contracts hash it. */
export const authorizationFields = [
  { name: 'from', type: 'address' },
  { name: 'to', type: 'address' },
  { name: 'value', type: 'uint256' },
  { name: 'validAfter', type: 'uint256' },
  { name: 'validBefore', type: 'uint256' },
  { name: 'nonce', type: 'bytes32' },
] as const

/** EIP-712's domain fields in the order the standard hashes them; a domain uses those it names. */
export const eip712DomainFields = [
  { name: 'name', type: 'string' },
  { name: 'version', type: 'string' },
  { name: 'chainId', type: 'uint256' },
  { name: 'verifyingContract', type: 'address' },
  { name: 'salt', type: 'bytes32' },
] as const
