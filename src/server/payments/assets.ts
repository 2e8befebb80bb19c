import { canonicalCaip } from '../../caip/caip.js'
import type { Amount, AmountDisplay } from '../../contract/common.js'
import type { ServerConfig } from '../config.js'

/** ISO 4217 currencies the service prices in: name and minor decimals. */
const currencies: Record<string, readonly [name: string, decimals: number]> = {
  USD: ['US Dollar', 2],
  EUR: ['Euro', 2],
  GBP: ['Pound Sterling', 2],
  JPY: ['Japanese Yen', 0],
  CHF: ['Swiss Franc', 2],
  CAD: ['Canadian Dollar', 2],
  AUD: ['Australian Dollar', 2],
  NZD: ['New Zealand Dollar', 2],
  CNY: ['Yuan Renminbi', 2],
  HKD: ['Hong Kong Dollar', 2],
  SGD: ['Singapore Dollar', 2],
  SEK: ['Swedish Krona', 2],
  NOK: ['Norwegian Krone', 2],
  DKK: ['Danish Krone', 2],
  PLN: ['Zloty', 2],
  CZK: ['Czech Koruna', 2],
  HUF: ['Forint', 2],
  INR: ['Indian Rupee', 2],
  KRW: ['Won', 0],
  BRL: ['Brazilian Real', 2],
  MXN: ['Mexican Peso', 2],
  ZAR: ['Rand', 2],
  TRY: ['Turkish Lira', 2],
  AED: ['UAE Dirham', 2],
  SAR: ['Saudi Riyal', 2],
  ILS: ['New Israeli Sheqel', 2],
  THB: ['Baht', 2],
  IDR: ['Rupiah', 2],
  PHP: ['Philippine Peso', 2],
  MYR: ['Malaysian Ringgit', 2],
  VND: ['Dong', 0],
  CLP: ['Chilean Peso', 0],
  ISK: ['Iceland Krona', 0],
  KWD: ['Kuwaiti Dinar', 3],
  BHD: ['Bahraini Dinar', 3],
  OMR: ['Rial Omani', 3],
  JOD: ['Jordanian Dinar', 3],
  TND: ['Tunisian Dinar', 3],
}

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
export const defaultTestAssets: readonly KnownAsset[] = [
  usdc('eip155:1', 'erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'),
  usdc('eip155:8453', 'erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'),
  usdc('solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp', 'token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'),
]

function usdc(chainId: string, asset: string): KnownAsset {
  return {
    asset: `${chainId}/${asset}`,
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
    const currency = currencies[code]
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
