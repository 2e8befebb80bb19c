import { decodeFunctionResult, encodeFunctionData, getAddress, type Hex, isAddress, parseAbi } from 'viem'
import type { AssetInfo } from '../../src/actions/types.js'
import { parseAssetId } from '../../src/caip/caip.js'
import type { EvmNode } from './signatureStatus.js'

const metadataAbi = parseAbi([
  'function symbol() view returns (string)',
  'function decimals() view returns (uint8)',
])

/**
 * An asset's symbol and decimals from the wallet's own node: an ERC-20's `symbol()` and `decimals()`;
 * a chain's native coin has 18 decimals (its symbol is the chain's, which the node does not say).
 * Undefined for other assets, other chains, or a token that answers neither.
 */
export async function readAssetInfo(
  asset: string,
  node: (chainId: number) => EvmNode,
  chains: readonly number[],
): Promise<AssetInfo | undefined> {
  const { namespace, reference, assetNamespace, assetReference } = parseAssetId(asset)
  const id = Number(reference)
  if (namespace !== 'eip155' || !chains.includes(id)) return undefined
  if (assetNamespace === 'slip44' && assetReference === '60') return { decimals: 18 }
  if (assetNamespace !== 'erc20' || !isAddress(assetReference, { strict: false })) return undefined
  const rpc = node(id)
  const read = async (functionName: 'symbol' | 'decimals') => {
    try {
      const data = (await rpc.request({
        method: 'eth_call',
        params: [
          { to: getAddress(assetReference), data: encodeFunctionData({ abi: metadataAbi, functionName }) },
          'latest',
        ],
      })) as Hex
      return decodeFunctionResult({ abi: metadataAbi, functionName, data }) as string | number
    } catch {
      return undefined
    }
  }
  const [symbol, decimals] = await Promise.all([read('symbol'), read('decimals')])
  if (symbol === undefined && decimals === undefined) return undefined
  return {
    ...(typeof symbol === 'string' && { symbol }),
    ...(typeof decimals === 'number' && { decimals }),
  }
}
