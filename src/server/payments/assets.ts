import { canonicalCaip } from '../../caip/caip.js'
import type { Amount, AmountDisplay } from '../../contract/common.js'
import { fiatCurrency } from '../../contract/currencies.js'
import { testAssetIds } from '../../contract/payment.js'
import type { ServerConfig } from '../config.js'
import type { PaymentRow } from '../store/schema.js'

const networkNames: Record<string, string> = {
  'eip155:1': 'Ethereum',
  'eip155:10': 'OP Mainnet',
  'eip155:137': 'Polygon',
  'eip155:8453': 'Base',
  'eip155:42161': 'Arbitrum One',
  'eip155:84532': 'Base Sepolia',
  'eip155:11155111': 'Sepolia',
  'eip155:31337': 'Anvil',
  'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp': 'Solana',
  'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1': 'Solana Devnet',
  'solana:4uhcVJyU9pJkvQyS88uRDiswHXSCjY3z': 'Solana Testnet',
}

export interface KnownAsset {
  /** CAIP-19 id. */
  asset: string
  chainId: string
  symbol: string
  name: string
  decimals: number
  usdRate: string
  networkName: string
}

/** What test mode offers without a config file (docs/architecture.md, section 4). */
export const defaultTestAssets: readonly KnownAsset[] = testAssetIds.map(usdc)

/** Each test asset is a USDC at 1 USD. */
function usdc(asset: string): KnownAsset {
  const chainId = asset.slice(0, asset.indexOf('/'))
  return {
    asset,
    chainId,
    symbol: 'USDC',
    name: 'USD Coin',
    decimals: 6,
    usdRate: '1',
    networkName: networkNames[chainId] ?? chainId,
  }
}

export function networkName(chainId: string, config?: ServerConfig): string {
  return config?.chains[chainId]?.name ?? networkNames[chainId] ?? chainId
}

const registries = new WeakMap<ServerConfig, Map<string, KnownAsset>>()

/** Every asset the server knows: the default test assets plus those of configured chains. */
function knownAssets(config: ServerConfig): Map<string, KnownAsset> {
  let registry = registries.get(config)
  if (!registry) {
    registry = new Map()
    for (const asset of defaultTestAssets) registry.set(canonicalCaip(asset.asset), asset)
    for (const [chainId, chain] of Object.entries(config.chains)) {
      for (const [asset, a] of Object.entries(chain.assets)) {
        registry.set(canonicalCaip(asset), {
          asset,
          chainId,
          symbol: a.symbol,
          name: a.name,
          decimals: a.decimals,
          usdRate: a.usdRate,
          networkName: networkName(chainId, config),
        })
      }
    }
    registries.set(config, registry)
  }
  return registry
}

/** Display facts of an `iso4217/...` or `caip19/...` unit, or undefined when the unit is unknown. */
export function unitDisplay(unit: string, config: ServerConfig): AmountDisplay | undefined {
  if (unit.startsWith('iso4217/')) {
    const code = unit.slice(8)
    const currency = fiatCurrency(code)
    if (!currency) return undefined
    return { assetName: currency[0], assetSymbol: code, decimals: currency[1] }
  }
  if (unit.startsWith('caip19/')) {
    const asset = knownAssets(config).get(canonicalCaip(unit.slice(7)))
    if (!asset) return undefined
    return {
      assetName: asset.name,
      assetSymbol: asset.symbol,
      decimals: asset.decimals,
      iconUrl: config.chains[asset.chainId]?.assets[asset.asset]?.iconUrl ?? null,
      networkIconUrl: null,
      networkName: asset.networkName,
    }
  }
  return undefined
}

export function toAmount(unit: string, value: string, config: ServerConfig): Amount {
  const display = unitDisplay(unit, config) ?? {
    assetName: unit,
    assetSymbol: unit.split(/[/:]/).pop() ?? unit,
    decimals: 0,
  }
  return { unit, value, display }
}

/** The asset the buyer paid and how much of it (minor units); undefined when never quoted in a token. */
export function paidToken(
  payment: Pick<PaymentRow, 'option_amount' | 'amount_unit' | 'amount_value'>,
): { asset: string; value: bigint } | undefined {
  const paid = payment.option_amount ?? { unit: payment.amount_unit, value: payment.amount_value }
  if (!paid.unit.startsWith('caip19/')) return undefined
  return { asset: paid.unit.slice('caip19/'.length), value: BigInt(paid.value) }
}
