import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, unpackMint } from '@solana/spl-token'
import {
  type BlockhashWithExpiryBlockHeight,
  Connection,
  type Keypair,
  PublicKey,
  type SignatureStatus,
} from '@solana/web3.js'
import { parseAssetId } from '../../../caip/caip.js'
import { keepAliveFetch } from '../keepAliveFetch.js'
import type { AssetConfig } from '../types.js'

/** What the driver and the jobs of one configured Solana cluster share. */
export type SettledCommitment = 'confirmed' | 'finalized'

export interface SolanaChain {
  /** `solana:<first 32 characters of the genesis hash>`. */
  readonly caip2: string
  readonly connection: Connection
  /** Fee payer of every transaction the service builds, and owner of the collection token accounts. */
  readonly service: Keypair
  readonly assets: readonly AssetConfig[]
  /** How long a job waits for a sent transaction before handing the job back for later. */
  readonly confirmTimeoutMs: number
  readonly pollMs: number
  /** What a payment's or settlement's transaction must reach before it counts. */
  readonly commitment: SettledCommitment
  /** The mint's token program (SPL Token or Token-2022), read once; checks the configured decimals. */
  mintInfo(asset: AssetConfig): Promise<MintInfo>
  /**
   * The latest blockhash, asked for at most once per `blockhashReuseMs` and shared by every transaction
   * built meanwhile (it stays valid for about a minute); forgotten once found expired (`blockhashValid`).
   */
  latestBlockhash(): Promise<BlockhashWithExpiryBlockHeight>
  /** The block height, asked for at most once per `blockhashReuseMs` (confirms under load share it). */
  blockHeight(): Promise<number>
  /** Whether transactions under `blockhash` can still land (the node's word; never cached). */
  blockhashValid(blockhash: string): Promise<boolean>
  /** The newest slot seen in any node's answer (0 before the first): what operators compare nodes with. */
  highestSlot(): number
  observeSlot(slot: number): void
  /**
   * Asks ONE node, in one request (a JSON-RPC batch, which a load balancer sends to one backend), for its
   * finalized block height and then the statuses of `signatures` at or past that slot. A transaction
   * whose last valid block height is below that height and that has no status there can never land
   * and never did: the only proof that one is dropped. A node that answers the statuses from an older
   * slot proves nothing (the next node is asked; none: it throws).
   */
  proveUnlanded(
    signatures: readonly string[],
  ): Promise<{ finalizedHeight: number; statuses: (SignatureStatus | null)[] }>
  /**
   * `blockhashValid`, one read per blockhash shared by every caller for `blockhashValidityMs`: for a
   * confirm, whose 10-block margin a slot-old answer cannot cross (confirms under load carry the same few
   * blockhashes). Not for deciding a transaction is dead or worth sending again: that reads afresh.
   */
  sharedBlockhashValid(blockhash: string): Promise<boolean>
}

export interface MintInfo {
  mint: PublicKey
  programId: PublicKey
  decimals: number
}

export interface SolanaChainOptions {
  caip2: string
  /** The chain's nodes, tried in order: one that fails at the transport is skipped for the next. */
  rpcUrls: readonly string[]
  service: Keypair
  assets: readonly AssetConfig[]
  /** Default `confirmed`: final enough for a payment, and seconds sooner than `finalized`. */
  commitment?: SettledCommitment
  confirmTimeoutMs?: number
  pollMs?: number
  /** How long one fetched blockhash serves new transactions, ms (default 400: a slot). */
  blockhashReuseMs?: number
  /**
   * How long one validity answer for a blockhash is shared, ms (default 400: a slot, well inside the
   * 10-block margin confirm keeps); 0 asks the node every time (`fastPaths: false`).
   */
  blockhashValidityMs?: number
  /** Bring your own Connection (custom fetch, headers); `rpcUrl` is then ignored. */
  connection?: Connection
  /**
   * A FastPath (fastPath.ts): the nodes asked over kept-alive node:http connections
   * (chains/keepAliveFetch.ts) instead of through Node's fetch, which web3.js's Connection uses on
   * Node 18+ (its keep-alive `agent` is an option fetch ignores).
   */
  keepAlive?: boolean
}

export function createSolanaChain(options: SolanaChainOptions): SolanaChain {
  const [firstUrl, ...otherUrls] = options.rpcUrls
  if (!options.connection && firstUrl === undefined) throw new Error(`${options.caip2} needs an RPC URL.`)
  const doFetch = options.keepAlive ? keepAliveFetch() : fetch
  const connection =
    options.connection ??
    new Connection(firstUrl!, {
      commitment: options.commitment ?? 'confirmed',
      ...(otherUrls.length > 0
        ? { fetch: failoverFetch(options.rpcUrls, doFetch) }
        : options.keepAlive
          ? { fetch: doFetch }
          : {}),
    })
  const urls = options.rpcUrls.length > 0 ? options.rpcUrls : [connection.rpcEndpoint]
  let highestSlot = 0
  const observeSlot = (slot: number) => {
    if (slot > highestSlot) highestSlot = slot
  }
  const mints = new Map<string, Promise<MintInfo>>()
  const blockhashReuseMs = options.blockhashReuseMs ?? 400
  const latest = sharedFor(blockhashReuseMs, () => connection.getLatestBlockhash())
  const height = sharedFor(blockhashReuseMs, () => connection.getBlockHeight())
  const blockhashValidityMs = options.blockhashValidityMs ?? 400
  const validity = new Map<string, ReturnType<typeof sharedFor<boolean>>>()
  async function askValid(blockhash: string): Promise<boolean> {
    const { context, value: valid } = await connection.isBlockhashValid(blockhash)
    observeSlot(context.slot)
    // Expired: the next transaction asks for a new one rather than being built to fail.
    if (!valid) latest.forget((kept) => kept.blockhash === blockhash)
    return valid
  }

  // A key or RPC URL of another cluster would quote balances and land payments on the wrong chain.
  let genesis: Promise<void> | undefined
  async function checkGenesis(): Promise<void> {
    const hash = await connection.getGenesisHash()
    if (`solana:${hash.slice(0, 32)}` !== options.caip2) {
      throw new Error(`The RPC of ${options.caip2} serves another cluster (genesis hash ${hash}).`)
    }
  }

  async function loadMint(asset: AssetConfig): Promise<MintInfo> {
    genesis ??= checkGenesis().catch((error: unknown) => {
      genesis = undefined
      throw error
    })
    await genesis
    const mint = mintOf(asset)
    const account = await connection.getAccountInfo(mint)
    if (!account)
      throw new Error(`Mint ${mint.toBase58()} of ${asset.id} does not exist on ${options.caip2}.`)
    const programId = [TOKEN_PROGRAM_ID, TOKEN_2022_PROGRAM_ID].find((p) => p.equals(account.owner))
    if (!programId)
      throw new Error(`${mint.toBase58()} is not a token mint (owner ${account.owner.toBase58()}).`)
    const { decimals } = unpackMint(mint, account, programId)
    // transferChecked would refuse every payment anyway; say why once, at the first quote.
    if (decimals !== asset.decimals) {
      throw new Error(
        `${asset.id} has ${decimals} decimals on chain; the configuration says ${asset.decimals}.`,
      )
    }
    return { mint, programId, decimals }
  }

  return {
    caip2: options.caip2,
    connection,
    service: options.service,
    assets: options.assets,
    confirmTimeoutMs: options.confirmTimeoutMs ?? 30_000,
    pollMs: options.pollMs ?? 200,
    commitment: options.commitment ?? 'confirmed',
    mintInfo(asset) {
      let info = mints.get(asset.id)
      if (!info) {
        info = loadMint(asset)
        // A transient RPC failure must not stick: forget it so the next call asks again.
        info.catch(() => mints.delete(asset.id))
        mints.set(asset.id, info)
      }
      return info
    },
    latestBlockhash: latest.get,
    blockHeight: height.get,
    blockhashValid: askValid,
    highestSlot: () => highestSlot,
    observeSlot,
    async proveUnlanded(signatures) {
      const chunks: string[][] = []
      for (let i = 0; i < signatures.length; i += 256) chunks.push(signatures.slice(i, i + 256))
      const calls = [
        { method: 'getEpochInfo', params: [{ commitment: 'finalized' }] },
        ...chunks.map((chunk) => ({
          method: 'getSignatureStatuses',
          params: [chunk, { searchTransactionHistory: true }],
        })),
      ]
      const reasons: string[] = []
      for (const url of urls) {
        try {
          const [epoch, ...statuses] = await rpcBatch(doFetch, url, calls)
          const { absoluteSlot, blockHeight } = epoch as { absoluteSlot: number; blockHeight: number }
          observeSlot(absoluteSlot)
          const answers = statuses as { context: { slot: number }; value: (SignatureStatus | null)[] }[]
          if (answers.some((answer) => answer.context.slot < absoluteSlot)) {
            reasons.push('statuses read behind its finalized slot')
            continue
          }
          return { finalizedHeight: blockHeight, statuses: answers.flatMap((answer) => answer.value) }
        } catch (error) {
          reasons.push(error instanceof Error ? error.message : String(error))
        }
      }
      throw new Error(`No node could prove the transactions unlanded: ${reasons.join('; ')}`)
    },
    sharedBlockhashValid(blockhash) {
      if (blockhashValidityMs <= 0) return askValid(blockhash)
      let shared = validity.get(blockhash)
      if (!shared) {
        // Blockhashes come and go every slot: keep only those asked about lately.
        if (validity.size >= 64) validity.clear()
        shared = sharedFor(blockhashValidityMs, () => askValid(blockhash))
        validity.set(blockhash, shared)
      }
      return shared.get()
    },
  }
}

/** `read`'s answer shared by every caller for `ms`; a failed read is not kept. */
function sharedFor<T>(ms: number, read: () => Promise<T>) {
  let kept: { at: number; value: Promise<T> } | undefined
  return {
    get(): Promise<T> {
      if (!kept || Date.now() - kept.at >= ms) {
        const fresh = { at: Date.now(), value: read() }
        fresh.value.catch(() => {
          if (kept === fresh) kept = undefined
        })
        kept = fresh
      }
      return kept.value
    },
    /** Reads again next time if the kept answer is `stale`. */
    forget(stale: (value: T) => boolean): void {
      const current = kept
      void current?.value.then(
        (value) => {
          if (kept === current && stale(value)) kept = undefined
        },
        () => {},
      )
    },
  }
}

export function mintOf(asset: AssetConfig): PublicKey {
  return new PublicKey(parseAssetId(asset.id).assetReference)
}

/**
 * A `fetch` for web3.js's Connection that posts to each of `urls` in turn until one answers (a network
 * failure, a 429 or a 5xx moves on): failover for reads and sends alike. What an answer may decide is the
 * callers' rule (minimum context slots), not the transport's.
 */
function failoverFetch(urls: readonly string[], doFetch: typeof fetch): typeof fetch {
  return async (_input, init) => {
    let last: unknown
    for (const url of urls) {
      try {
        const response = await doFetch(url, init)
        if (response.status !== 429 && response.status < 500) return response
        last = new Error(`HTTP ${response.status}`)
      } catch (error) {
        last = error
      }
    }
    throw last
  }
}

/** Results of `calls` sent as one JSON-RPC batch in one HTTP request; a call's error throws. */
async function rpcBatch(
  doFetch: typeof fetch,
  url: string,
  calls: readonly { method: string; params: unknown[] }[],
): Promise<unknown[]> {
  const response = await doFetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(calls.map((call, id) => ({ jsonrpc: '2.0', id, ...call }))),
    signal: AbortSignal.timeout(10_000),
  })
  if (!response.ok) throw new Error(`HTTP ${response.status}`)
  const answers = (await response.json()) as { id: number; result?: unknown; error?: { message: string } }[]
  if (!Array.isArray(answers)) throw new Error('The node did not answer the batch with a batch.')
  return calls.map((call, id) => {
    const answer = answers.find((a) => a?.id === id)
    if (!answer || answer.error || answer.result === undefined)
      throw new Error(`${call.method}: ${answer?.error?.message ?? 'no answer'}`)
    return answer.result
  })
}
