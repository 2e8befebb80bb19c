import { type Address, getAddress, isAddress } from 'viem'
import { PayError } from '../../src/errors/PayError.js'

// Only the eip155 slice of CAIP-2/10/19 the adapter needs; kept local so the adapter does not depend
// on the core's parsers beyond PayError.

/** `eip155:8453` -> 8453. Anything else is a PayError `invalid_caip`. */
export function eip155ChainId(caip2: string): number {
  const match = /^eip155:([1-9][0-9]{0,31})$/.exec(caip2)
  const id = match ? Number(match[1]) : Number.NaN
  if (!Number.isSafeInteger(id)) {
    throw new PayError({ code: 'invalid_caip', message: 'Not an EVM chain id.', context: { chainId: caip2 } })
  }
  return id
}

/** `eip155:1:0xab...` -> { chainId: 1, address } with a checksummed address. */
export function parseEip155Account(caip10: string): { chainId: number; address: Address } {
  const at = caip10.lastIndexOf(':')
  const address = caip10.slice(at + 1)
  if (at < 0 || !isAddress(address, { strict: false })) {
    throw new PayError({ code: 'invalid_caip', message: 'Not an EVM account.', context: { account: caip10 } })
  }
  return { chainId: eip155ChainId(caip10.slice(0, at)), address: getAddress(address) }
}

export function eip155Account(chainId: number, address: Address): string {
  return `eip155:${chainId}:${getAddress(address)}`
}

export function erc20Asset(chainId: number, token: Address): string {
  return `eip155:${chainId}/erc20:${getAddress(token)}`
}

/** SLIP-44 coin type 60 is ether; every eip155 chain's native coin is named this way in CAIP-19. */
export function nativeAsset(chainId: number): string {
  return `eip155:${chainId}/slip44:60`
}
