import { type Address, getAddress } from 'viem'
import { parseAccountId, parseChainId } from '../../src/caip/caip.js'
import { PayError } from '../../src/errors/PayError.js'

/** `eip155:8453` -> 8453. Anything else is a PayError `invalid_caip`. */
export function eip155ChainId(caip2: string): number {
  const { namespace, reference } = parseChainId(caip2)
  const id = Number(reference)
  if (namespace !== 'eip155' || !/^[1-9][0-9]*$/.test(reference) || !Number.isSafeInteger(id)) {
    throw new PayError({ code: 'invalid_caip', message: 'Not an EVM chain id.', context: { chainId: caip2 } })
  }
  return id
}

/** `eip155:1:0xab...` -> { chainId: 1, address } with a checksummed address. */
export function parseEip155Account(caip10: string): { chainId: number; address: Address } {
  const { chainId, address } = parseAccountId(caip10)
  return { chainId: eip155ChainId(chainId), address: getAddress(address) }
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
