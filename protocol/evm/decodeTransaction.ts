import { type Address, decodeFunctionData, erc20Abi, getAddress } from 'viem'
import type { InspectedTransfer } from '../../src/actions/types.js'
import { eip155Account, erc20Asset, nativeAsset } from './caip.js'
import { rejected } from './errors.js'
import type { RpcTransaction } from './params.js'

/**
 * Decodes what an `eth_sendTransaction` moves: its native `value`, and for calls into a token the
 * ERC-20 `transfer`, `transferFrom` or `approve` amount (the asset is the called contract).
 * Other calldata and contract creation are refused: the guard could not bound what they move.
 */
export function decodeTransaction(chainId: number, tx: RpcTransaction): readonly InspectedTransfer[] {
  const transfers: InspectedTransfer[] = []
  const value = BigInt(tx.value ?? '0x0')
  if (!tx.to) throw rejected('Contract creation cannot be inspected, so it is not sent.', { chainId })
  if (value > 0n)
    transfers.push({ asset: nativeAsset(chainId), amount: value, to: eip155Account(chainId, tx.to) })
  if (tx.data) transfers.push(decodeErc20Call(chainId, tx.to, tx.data))
  return transfers
}

/** Decodes ERC-20 calldata into the movement it authorises; anything else is refused. */
export function decodeErc20Call(chainId: number, token: Address, data: `0x${string}`): InspectedTransfer {
  let call: ReturnType<typeof decodeFunctionData<typeof erc20Abi>>
  try {
    call = decodeFunctionData({ abi: erc20Abi, data })
  } catch {
    throw rejected('This calldata cannot be inspected, so it is not sent.', { chainId, to: token })
  }
  const asset = erc20Asset(chainId, token)
  switch (call.functionName) {
    case 'transfer':
      return { asset, amount: call.args[1], to: eip155Account(chainId, call.args[0]) }
    case 'transferFrom':
      return { asset, amount: call.args[2], to: eip155Account(chainId, call.args[1]) }
    // An approval moves nothing yet but lets the spender take the amount: bounded like a transfer.
    case 'approve':
      return { asset, amount: call.args[1], to: eip155Account(chainId, getAddress(call.args[0])) }
    default:
      throw rejected('Only ERC-20 transfer, transferFrom and approve calls are inspected.', {
        chainId,
        to: token,
        function: call.functionName,
      })
  }
}
