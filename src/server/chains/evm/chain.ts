import {
  type Account,
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hex,
  isHex,
  type PublicClient,
  parseGwei,
  type Transport,
  type WalletClient,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { getEip712Domain } from 'viem/actions'
import { parseAssetId, parseChainId, sameCaip } from '../../../caip/caip.js'
import type { ChainConfig } from '../../config.js'
import type { JobLogger } from '../../jobs/runner.js'
import { rpcUrlsOf } from '../configured.js'
import type { AssetConfig } from '../types.js'
import { createEvmNodes, type EvmNodes } from './nodes.js'
import { startRecoveryThread } from './recovery.js'

export interface EvmAsset extends AssetConfig {
  token: Address
  /** Kept at settlement, basis points. */
  settlementFeeBps: number
  /** How a gasless payment collects the token (config `transferMethod`, default `eip3009`). */
  transferMethod: 'eip3009' | 'permit2'
}

export interface EvmDomain {
  name: string
  version: string
}

/** One configured EVM chain: its clients and the executor (relayer, collection and settlement sender). */
export interface EvmChain {
  caip2: string
  chainId: number
  executor: Account & { address: Address }
  publicClient: PublicClient<Transport, Chain>
  walletClient: WalletClient<Transport, Chain, Account>
  /** Its nodes, failover between them, and the reads that decide money pinned at the newest block seen. */
  nodes: EvmNodes
  assets: readonly EvmAsset[]
  /** How often the head is polled for a new block (receipts are read once per block), ms. */
  pollingIntervalMs: number
  /** Transactions of the executor key in flight at once; more wait for room. */
  maxInFlight: number
  /** Blocks a receipt needs (its own included) before it counts; a receipt that goes away is looked for again. */
  confirmations: number
  /** Replacing a stuck executor transaction (same nonce, higher fees): see transactions.ts. */
  feeBump: { afterMs: number; maxFeePerGas: bigint }
  /** Factories an undeployed (ERC-6492) account may be deployed through (config `eip6492Factories`). */
  eip6492Factories: readonly Address[]
  asset(assetId: string): EvmAsset | undefined
  /** The token's EIP-712 name and version (config, else EIP-5267 `eip712Domain()`, cached); undefined when unknown. */
  domain(asset: EvmAsset): Promise<EvmDomain | undefined>
}

export interface EvmChainOptions {
  caip2: string
  chain: ChainConfig
  /** The chain's assets as the gateway sees them (see gateway/drivers.ts configuredAssets). */
  assets: readonly AssetConfig[]
  pollingIntervalMs?: number
  log: JobLogger
  /** config.fastPaths (fastPath.ts): the nodes asked over kept-alive connections (keepAliveFetch.ts). */
  fastPaths?: boolean
}

export function createEvmChain(options: EvmChainOptions): EvmChain {
  const { caip2, chain: config, log } = options
  const chainId = Number(parseChainId(caip2).reference)
  if (!isHex(config.signerKey) || config.signerKey.length !== 66) {
    throw new Error(
      `Invalid configuration:\n  chains.${caip2}.signerKey: expected a 0x-prefixed 32-byte private key`,
    )
  }
  const executor = privateKeyToAccount(config.signerKey as Hex)
  startRecoveryThread(log)
  const viemChain = defineChain({
    id: chainId,
    name: config.name ?? caip2,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [...rpcUrlsOf(config)] } },
  })
  // Calls made in one event-loop turn (a block's receipts, a burst of relays' simulations and sends) share
  // one HTTP request: under load the per-request cost on both ends, not the node's work, was the bulk of
  // the RPC time (docs/performance.md).
  const nodes = createEvmNodes({
    urls: rpcUrlsOf(config),
    batchSize: config.rpcBatchSize ?? 100,
    keepAlive: options.fastPaths ?? false,
  })
  const transport = nodes.transport
  const publicClient = createPublicClient({ chain: viemChain, transport })
  const walletClient = createWalletClient({ chain: viemChain, transport, account: executor })
  const assets = options.assets.map((asset): EvmAsset => {
    const fileAsset = Object.entries(config.assets).find(([id]) => sameCaip(id, asset.id))?.[1]
    return {
      ...asset,
      token: getAddress(parseAssetId(asset.id).assetReference),
      settlementFeeBps: fileAsset?.settlementFeeBps ?? 0,
      transferMethod: fileAsset?.transferMethod ?? 'eip3009',
    }
  })
  const domains = new Map<Address, Promise<EvmDomain | undefined>>()

  async function readDomain(asset: EvmAsset): Promise<EvmDomain | undefined> {
    try {
      const { domain } = await getEip712Domain(publicClient, { address: asset.token })
      if (domain.name === undefined || domain.version === undefined) return undefined
      return { name: domain.name, version: domain.version }
    } catch (error) {
      log.warn(
        { chain: caip2, asset: asset.id, error: String(error) },
        'Cannot read the EIP-712 domain (EIP-5267); set "eip712" for this asset to offer gasless payments',
      )
      return undefined
    }
  }

  return {
    caip2,
    chainId,
    executor,
    publicClient,
    walletClient,
    nodes,
    assets,
    pollingIntervalMs: options.pollingIntervalMs ?? config.blockPollMs ?? 250,
    maxInFlight: config.maxInFlight ?? 256,
    confirmations: config.confirmations ?? 1,
    feeBump: {
      afterMs: config.feeBumpAfterMs ?? 20_000,
      maxFeePerGas: parseGwei(String(config.maxFeePerGasGwei ?? 500)),
    },
    eip6492Factories: (config.eip6492Factories ?? []).map((factory) => getAddress(factory)),
    asset: (assetId) => assets.find((a) => sameCaip(a.id, assetId)),
    domain(asset) {
      if (asset.eip712) return Promise.resolve(asset.eip712)
      let cached = domains.get(asset.token)
      if (!cached) {
        cached = readDomain(asset)
        domains.set(asset.token, cached)
        // An RPC hiccup must not disable gasless payments for the life of the process.
        void cached.then((d) => d === undefined && domains.delete(asset.token))
      }
      return cached
    },
  }
}
