import { type Address, getAddress, type Hex } from 'viem'
import type { InspectedTransfer } from '../../src/actions/types.js'
import { eip155Account, erc20Asset, nativeAsset } from './caip.js'
import { rejected } from './errors.js'
import type { RpcTransaction } from './params.js'
import { assertAllowedSpender, type EvmDecodePolicy } from './policy.js'

/** ERC-20 selectors the wallet sends: a direct payment, and an approval where an option needs one. */
export const erc20Selectors = { transfer: '0xa9059cbb', approve: '0x095ea7b3' } as const

// Selector and two 32-byte words: the only calldata length decoded. Solidity ignores bytes after the
// arguments and (ABI coder v1) masks an address word's high bits, other tokens may not: calldata the
// wallet would read one way and a token could read another is refused, not normalised.
const callLength = 2 + 2 * (4 + 32 + 32)

/**
 * Decodes what an `eth_sendTransaction` moves: a native `value` sent to an address with no calldata,
 * or, with calldata and no value, an ERC-20 `transfer` (moves the signer's tokens) or `approve` (lets
 * an allow-listed spender take them; the asset is the called contract). Everything else is refused:
 * `transferFrom` (no payment needs it; it moves someone else's tokens, or an NFT under the same
 * selector), other selectors, calldata that is not the exact ABI encoding, a transaction that moves
 * nothing, and contract creation.
 */
export function decodeTransaction(
  chainId: number,
  tx: RpcTransaction,
  policy: EvmDecodePolicy = {},
): readonly InspectedTransfer[] {
  const value = BigInt(tx.value ?? '0x0')
  if (!tx.to) throw rejected('Contract creation cannot be inspected, so it is not sent.', { chainId })
  if (tx.data) {
    if (value > 0n) {
      throw rejected('A token call that also sends native value is not sent.', { chainId, to: tx.to })
    }
    return [decodeErc20Call(chainId, tx.to, tx.data, policy)]
  }
  if (value === 0n) throw rejected('A transaction that pays nothing is not sent.', { chainId, to: tx.to })
  return [{ asset: nativeAsset(chainId), amount: value, to: eip155Account(chainId, tx.to) }]
}

/** Decodes ERC-20 calldata into the movement it authorises; anything else is refused. */
export function decodeErc20Call(
  chainId: number,
  token: Address,
  data: Hex,
  policy: EvmDecodePolicy = {},
): InspectedTransfer {
  const selector = data.slice(0, 10).toLowerCase()
  const context = { chainId, to: token, selector }
  if (selector !== erc20Selectors.transfer && selector !== erc20Selectors.approve) {
    throw rejected('Only ERC-20 transfer, and approve to an allow-listed spender, are sent.', context)
  }
  if (data.length !== callLength) {
    throw rejected('The calldata is not the exact ABI encoding of its call.', {
      ...context,
      bytes: (data.length - 2) / 2,
    })
  }
  const addressWord = data.slice(10, 74)
  if (!/^0{24}/.test(addressWord)) {
    throw rejected('The calldata’s address argument has high bits set.', context)
  }
  const to = getAddress(`0x${addressWord.slice(24)}`)
  const amount = BigInt(`0x${data.slice(74)}`)
  const asset = erc20Asset(chainId, token)
  const account = eip155Account(chainId, to)
  // An approval moves nothing yet but lets the spender take the amount: bounded like a transfer.
  if (selector === erc20Selectors.approve) {
    assertAllowedSpender(policy, account, context)
    return { asset, amount, to: account, approval: true }
  }
  return { asset, amount, to: account }
}
