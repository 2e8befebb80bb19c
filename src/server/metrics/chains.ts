import { getAssociatedTokenAddressSync } from '@solana/spl-token'
import { erc20Abi } from 'viem'
import { rpcUrlsOf } from '../chains/configured.js'
import type { EvmChain } from '../chains/evm/index.js'
import type { SolanaChain } from '../chains/solana/index.js'
import type { ServerConfig } from '../config.js'

/** One node's newest block (EVM) or slot (Solana), or why it did not say. Nodes are named by index: URLs carry keys. */
export interface NodeHead {
  node: string
  head: number | undefined
  /** A short reason that never quotes the node (its URL or its error text may carry credentials). */
  error?: 'timeout' | 'no answer' | `HTTP ${number}` | 'bad answer'
}

export interface ExecutorBalances {
  address: string
  /** Whole coins (ETH, SOL). */
  native: number
  /** Whole tokens held at the collection address, by CAIP-19 asset. */
  collection: { asset: string; symbol: string; value: number }[]
}

/** What operators watch of one configured chain, read from its nodes when asked (scrape, probe, status). */
export interface ChainProbe {
  caip2: string
  /** `block` (EVM) or `slot` (Solana): what a head counts. */
  unit: 'block' | 'slot'
  /** How far behind the newest answer a node may be and still count as current. */
  maxLag: number
  executor: string
  /** The chain's configured assets (CAIP-19 as configured): the ledger's readings are labelled by these. */
  assets: readonly { id: string; symbol: string; decimals: number }[]
  /** Each node's head, read afresh (callers while a read runs share it). */
  heads(): Promise<NodeHead[]>
  /** The newest block or slot this process's chain reads have seen (0 before the first). */
  highestSeen(): number
  /** The executor's coins and collected tokens (shared by callers for `balanceCacheMs`). */
  balances(): Promise<ExecutorBalances>
}

export interface ChainProbeOptions {
  /** How long one balances read serves (default 10 s: gas and floats move slower than scrapes). */
  balanceCacheMs?: number
  /** One node read's time limit (default 2 s: a probe must answer before its own timeout). */
  timeoutMs?: number
}

/** A probe per configured live chain. */
export function createChainProbes(
  config: ServerConfig,
  chains: { evm: readonly EvmChain[]; solana: readonly SolanaChain[] },
  options: ChainProbeOptions = {},
): ChainProbe[] {
  const timeoutMs = options.timeoutMs ?? 2_000
  const balanceCacheMs = options.balanceCacheMs ?? 10_000
  const urlsOf = (caip2: string) => {
    const chain = config.chains[caip2]
    return chain ? rpcUrlsOf(chain) : []
  }
  const evm = chains.evm.map((chain): ChainProbe => {
    const urls = urlsOf(chain.caip2)
    return {
      caip2: chain.caip2,
      unit: 'block',
      maxLag: 10,
      executor: chain.executor.address,
      assets: chain.assets.map(({ id, symbol, decimals }) => ({ id, symbol, decimals })),
      heads: sharedWhileRunning(() => readHeads(urls, 'eth_blockNumber', timeoutMs)),
      highestSeen: () => Number(chain.nodes.highest()),
      balances: sharedFor(balanceCacheMs, async () => {
        const address = chain.executor.address
        const [native, ...tokens] = await Promise.all([
          chain.publicClient.getBalance({ address }),
          ...chain.assets.map((asset) =>
            chain.publicClient.readContract({
              address: asset.token,
              abi: erc20Abi,
              functionName: 'balanceOf',
              args: [address],
            }),
          ),
        ])
        return {
          address,
          native: whole(native, 18),
          collection: chain.assets.map((asset, i) => ({
            asset: asset.id,
            symbol: asset.symbol,
            value: whole(tokens[i]!, asset.decimals),
          })),
        }
      }),
    }
  })
  const solana = chains.solana.map((chain): ChainProbe => {
    const urls = urlsOf(chain.caip2)
    const owner = chain.service.publicKey
    return {
      caip2: chain.caip2,
      unit: 'slot',
      maxLag: 150,
      executor: owner.toBase58(),
      assets: chain.assets.map(({ id, symbol, decimals }) => ({ id, symbol, decimals })),
      heads: sharedWhileRunning(() => readHeads(urls, 'getSlot', timeoutMs)),
      highestSeen: () => chain.highestSlot(),
      balances: sharedFor(balanceCacheMs, async () => {
        const [lamports, ...tokens] = await Promise.all([
          chain.connection.getBalance(owner),
          ...chain.assets.map(async (asset) => {
            const mint = await chain.mintInfo(asset)
            const account = getAssociatedTokenAddressSync(mint.mint, owner, true, mint.programId)
            // No token account yet: nothing collected yet.
            const info = await chain.connection.getAccountInfo(account)
            if (!info) return 0n
            return BigInt((await chain.connection.getTokenAccountBalance(account)).value.amount)
          }),
        ])
        return {
          address: owner.toBase58(),
          native: whole(BigInt(lamports), 9),
          collection: chain.assets.map((asset, i) => ({
            asset: asset.id,
            symbol: asset.symbol,
            value: whole(tokens[i]!, asset.decimals),
          })),
        }
      }),
    }
  })
  return [...evm, ...solana]
}

/** Minor units as a float of whole units: precise enough for a gauge and its thresholds. */
function whole(minor: bigint, decimals: number): number {
  return Number(minor) / 10 ** decimals
}

async function readHeads(urls: readonly string[], method: string, timeoutMs: number): Promise<NodeHead[]> {
  return Promise.all(
    urls.map(async (url, index): Promise<NodeHead> => {
      const node = String(index)
      try {
        const response = await fetch(url, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params: [] }),
          signal: AbortSignal.timeout(timeoutMs),
        })
        if (!response.ok) return { node, head: undefined, error: `HTTP ${response.status}` }
        const { result } = (await response.json()) as { result?: unknown }
        const head = typeof result === 'string' ? Number(BigInt(result)) : result
        if (typeof head !== 'number' || !Number.isSafeInteger(head))
          return { node, head: undefined, error: 'bad answer' }
        return { node, head }
      } catch (error) {
        const timedOut = (error as Error).name === 'TimeoutError'
        return { node, head: undefined, error: timedOut ? 'timeout' : 'no answer' }
      }
    }),
  )
}

/** One read shared by every caller for `ms`; a failed read is not kept. */
export function sharedFor<T>(ms: number, read: () => Promise<T>): () => Promise<T> {
  let kept: { at: number; value: Promise<T> } | undefined
  return () => {
    if (!kept || Date.now() - kept.at >= ms) {
      const fresh = { at: Date.now(), value: read() }
      fresh.value.catch(() => {
        if (kept === fresh) kept = undefined
      })
      kept = fresh
    }
    return kept.value
  }
}

/** One read at a time: callers while it runs share it; the next caller after it settles reads again. */
export function sharedWhileRunning<T>(read: () => Promise<T>): () => Promise<T> {
  let running: Promise<T> | undefined
  return () => {
    running ??= read().finally(() => {
      running = undefined
    })
    return running
  }
}
