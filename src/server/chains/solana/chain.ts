import { TOKEN_2022_PROGRAM_ID, TOKEN_PROGRAM_ID, unpackMint } from '@solana/spl-token'
import { type BlockhashWithExpiryBlockHeight, Connection, type Keypair, PublicKey } from '@solana/web3.js'
import { parseAssetId } from '../../../caip/caip.js'
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
  /**
   * The slot from which `blockhash` is proved expired, read from a node at or past the newest slot seen
   * (`minContextSlot`): a node behind cannot answer, and one that does not know a blockhash newer than
   * itself is never asked. Undefined while it is valid. Only this decides that a transaction is dead.
   */
  expiredAt(blockhash: string): Promise<number | undefined>
  /** The newest slot seen in any node's answer (0 before the first). */
  highestSlot(): number
  observeSlot(slot: number): void
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
}

export function createSolanaChain(options: SolanaChainOptions): SolanaChain {
  const [firstUrl, ...otherUrls] = options.rpcUrls
  if (!options.connection && firstUrl === undefined) throw new Error(`${options.caip2} needs an RPC URL.`)
  const connection =
    options.connection ??
    new Connection(firstUrl!, {
      commitment: options.commitment ?? 'confirmed',
      ...(otherUrls.length > 0 ? { fetch: failoverFetch(options.rpcUrls) } : {}),
    })
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
    async expiredAt(blockhash) {
      // A node behind the pin refuses (-32016, minimum context slot not reached) and nothing is decided.
      const { context, value: valid } = await connection.isBlockhashValid(blockhash, {
        ...(highestSlot > 0 ? { minContextSlot: highestSlot } : {}),
      })
      observeSlot(context.slot)
      return valid ? undefined : context.slot
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
function failoverFetch(urls: readonly string[]): typeof fetch {
  return async (_input, init) => {
    let last: unknown
    for (const url of urls) {
      try {
        const response = await fetch(url, init)
        if (response.status !== 429 && response.status < 500) return response
        last = new Error(`HTTP ${response.status}`)
      } catch (error) {
        last = error
      }
    }
    throw last
  }
}
