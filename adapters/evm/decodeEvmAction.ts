import type { ActionInspection } from '../../src/actions/types.js'
import { eip155Account, eip155ChainId } from './caip.js'
import { decodeTransaction } from './decodeTransaction.js'
import { decodeTypedData } from './decodeTypedData.js'
import { rejected } from './errors.js'
import { assertEvmMethod } from './methods.js'
import { parsePersonalSignParams, parseTransactionParams, parseTypedDataParams, toBigInt } from './params.js'

export interface EvmActionRequest {
  /** CAIP-2 chain id of the action, `eip155:<id>`. */
  chainId: string
  method: string
  /** The action's params, parsed from their JSON string. */
  params: readonly unknown[]
}

/**
 * Decodes an EVM wallet action into the account that signs and the token movements it authorises,
 * without signing or touching the network. The wallet's signing guard and the server's verifier
 * share it. Refuses (PayError) what it cannot bound: unknown typed data or calldata, typed data or
 * transactions for another chain, an authorization whose payer is not the signing address.
 */
export function decodeEvmAction(request: EvmActionRequest): ActionInspection {
  const chainId = eip155ChainId(request.chainId)
  const { method, params } = request
  assertEvmMethod(method)
  if (method === 'personal_sign') {
    return { account: eip155Account(chainId, parsePersonalSignParams(params).address), transfers: [] }
  }
  if (method === 'eth_sendTransaction') {
    const tx = parseTransactionParams(params)
    assertTransactionChain(chainId, tx.chainId)
    return { account: eip155Account(chainId, tx.from), transfers: decodeTransaction(chainId, tx) }
  }
  const { address, typedData } = parseTypedDataParams(method, params)
  const decoded = decodeTypedData(chainId, typedData)
  if (decoded.owner !== address) {
    throw rejected('The typed data moves funds of another address than the one signing it.', {
      signer: address,
      owner: decoded.owner,
    })
  }
  return { account: eip155Account(chainId, address), transfers: decoded.transfers }
}

/** A transaction that names its chain must name the action's. */
export function assertTransactionChain(chainId: number, txChainId: string | undefined): void {
  if (txChainId !== undefined && toBigInt(txChainId) !== BigInt(chainId)) {
    throw rejected('The transaction is for another chain than the action.', { chainId, txChainId })
  }
}
