import { decodeFunctionResult, encodeFunctionData, getAddress, type Hex, parseAbi } from 'viem'
import {
  decodeEvmRequest,
  type EvmDecodePolicy,
  parseEip155Account,
  permit2Address,
} from '../../protocol/evm/index.js'
import type { InspectedMandate, MandateStatus, SignerRequest } from '../../src/actions/types.js'
import { parseAssetId } from '../../src/caip/caip.js'
import { PayError } from '../../src/errors/PayError.js'
import type { EvmNode } from './signatureStatus.js'

export const permit2Abi = parseAbi([
  'function allowance(address owner, address token, address spender) view returns (uint160 amount, uint48 expiration, uint48 nonce)',
  'function approve(address token, address spender, uint160 amount, uint48 expiration)',
])

/**
 * Reads from the wallet's own node, at one block, what became of a Permit2 `PermitSingle` the wallet
 * signed (docs/exposure.md): Permit2's `allowance(owner, token, spender)` gives the allowance's amount,
 * expiration and next nonce.
 * - The nonce not yet past the grant's: the grant was never submitted. `live` until its `sigDeadline`
 *   passes, then `expired` (Permit2 refuses it after that).
 * - The nonce past it: the grant was used (or one after it). `ended` when the allowance is zero (revoked,
 *   or drawn in full), `expired` once the block's time is past its expiration, otherwise `live`.
 */
export function evmMandateStatus(
  node: EvmNode | ((chainId: number) => EvmNode),
  policy: EvmDecodePolicy = {},
): (request: SignerRequest, result: string) => Promise<MandateStatus> {
  return async (request) => {
    const { chainId, inspection, signable } = decodeEvmRequest(request, policy)
    const { mandate } = inspection
    if (!mandate || signable.kind !== 'typedData') return 'live'
    const rpc = typeof node === 'function' ? node(chainId) : node
    const block = (await rpc.request({ method: 'eth_getBlockByNumber', params: ['latest', false] })) as {
      number: Hex
      timestamp: Hex
    }
    const now = BigInt(block.timestamp)
    const { token, owner, spender } = mandateAddresses(mandate)
    const returned = await rpc.request({
      method: 'eth_call',
      params: [
        {
          to: permit2Address,
          data: encodeFunctionData({
            abi: permit2Abi,
            functionName: 'allowance',
            args: [owner, token, spender],
          }),
        },
        block.number,
      ],
    })
    const [amount, expiration, nonce] = decodeFunctionResult({
      abi: permit2Abi,
      functionName: 'allowance',
      data: returned as Hex,
    })
    const message = signable.typedData.message as { details: { nonce: string } }
    if (BigInt(nonce) <= BigInt(message.details.nonce)) {
      // Permit2 accepts a grant while block.timestamp <= sigDeadline.
      return now > BigInt(mandate.deadline ?? Number.MAX_SAFE_INTEGER) ? 'expired' : 'live'
    }
    if (amount === 0n) return 'ended'
    // Permit2 refuses a pull once block.timestamp > expiration.
    return now > BigInt(expiration) ? 'expired' : 'live'
  }
}

/** Permit2 `approve(token, spender, 0, 0)`: the allowance zeroed (its expiration set to now). */
export function permit2RevokeCall(mandate: InspectedMandate): {
  from: Hex
  to: Hex
  data: Hex
  chainId: number
} {
  if (mandate.kind !== 'permit2') {
    throw new PayError({
      code: 'invalid_action',
      message: 'Only a Permit2 mandate is revoked on an EVM chain.',
      context: { kind: mandate.kind },
    })
  }
  const { token, owner, spender, chainId } = mandateAddresses(mandate)
  return {
    from: owner,
    to: permit2Address,
    data: encodeFunctionData({ abi: permit2Abi, functionName: 'approve', args: [token, spender, 0n, 0] }),
    chainId,
  }
}

function mandateAddresses(mandate: InspectedMandate) {
  const { assetReference } = parseAssetId(mandate.asset)
  const owner = parseEip155Account(mandate.owner)
  const spender = parseEip155Account(mandate.spender)
  return {
    token: getAddress(assetReference),
    owner: owner.address,
    spender: spender.address,
    chainId: owner.chainId,
  }
}
