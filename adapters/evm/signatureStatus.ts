import { type Address, decodeFunctionResult, encodeFunctionData, type Hex, parseAbi } from 'viem'
import { decodeEvmRequest, type EvmDecodePolicy } from '../../protocol/evm/index.js'
import type { SignatureStatus, SignerRequest } from '../../src/actions/types.js'

/** A JSON-RPC endpoint of the wallet's own node: a viem client, or an EIP-1193 provider. */
export interface EvmNode {
  request(args: { method: string; params?: readonly unknown[] }): Promise<unknown>
}

const tokenAbi = parseAbi([
  'function authorizationState(address authorizer, bytes32 nonce) view returns (bool)',
  'function nonces(address owner) view returns (uint256)',
  'function allowance(address owner, address spender) view returns (uint256)',
])

type TokenRead = 'authorizationState' | 'nonces' | 'allowance'

/**
 * Reads from the wallet's own node what became of a token signature (docs/exposure.md), every read
 * pinned to one block:
 * - EIP-3009: `authorizationState(from, nonce)` true is `spent`; unused once the block's timestamp
 *   reached `validBefore` is `dead`; otherwise `live`.
 * - EIP-2612: the owner's permit nonce past the permit's is `spent` (it, or a permit with its nonce,
 *   was used); `dead` only once the deadline passed with the nonce unused and no allowance left to
 *   the spender; otherwise `live`.
 * Anything else (transactions, messages) answers `live`: the flow never builds those again. `policy`
 * is the signer's decoding policy (e.g. the permit spenders it allows), so what it signed decodes.
 */
export function evmSignatureStatus(
  node: EvmNode | ((chainId: number) => EvmNode),
  policy: EvmDecodePolicy = {},
): (request: SignerRequest) => Promise<SignatureStatus> {
  return async (request) => {
    const { chainId, signable } = decodeEvmRequest(request, policy)
    if (signable.kind !== 'typedData') return 'live'
    const rpc = typeof node === 'function' ? node(chainId) : node
    const { primaryType, domain, message } = signable.typedData
    // A mandate's fate is `mandateStatus`'s to read (Permit2's allowance), not a one-time signature's.
    if (primaryType === 'PermitSingle') return 'live'
    const block = (await rpc.request({
      method: 'eth_getBlockByNumber',
      params: ['latest', false],
    })) as { number: Hex; timestamp: Hex }
    const now = BigInt(block.timestamp)
    const read = async (functionName: TokenRead, args: readonly unknown[]) => {
      const data = encodeFunctionData({ abi: tokenAbi, functionName, args } as never)
      const returned = await rpc.request({
        method: 'eth_call',
        params: [{ to: domain.verifyingContract, data }, block.number],
      })
      return decodeFunctionResult({ abi: tokenAbi, functionName, data: returned as Hex }) as bigint | boolean
    }
    const field = (name: string) => message[name] as string
    if (primaryType === 'Permit') {
      if (((await read('nonces', [field('owner')])) as bigint) > BigInt(field('nonce'))) return 'spent'
      // ERC20Permit accepts a permit while block.timestamp <= deadline.
      if (now <= BigInt(field('deadline'))) return 'live'
      const allowance = await read('allowance', [field('owner') as Address, field('spender') as Address])
      return allowance === 0n ? 'dead' : 'live'
    }
    if (await read('authorizationState', [field('from'), field('nonce')])) return 'spent'
    // EIP-3009 accepts an authorization while block.timestamp < validBefore.
    return now >= BigInt(field('validBefore')) ? 'dead' : 'live'
  }
}
