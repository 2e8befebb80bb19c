import { type Commitment, Connection } from '@solana/web3.js'
import type { LiteSVM } from 'litesvm'
import { solanaCaip2, startLiteSvmRpc } from './facade.js'
import { hasSolanaTestValidator, startTestValidator } from './testValidator.js'

export type { LiteSvmRpc, LiteSvmRpcOptions } from './facade.js'
export { solanaCaip2, startLiteSvmRpc } from './facade.js'
export type { CreateTestMintOptions, MintTestTokensOptions } from './tokens.js'
export { airdrop, confirmSignature, createTestMint, mintTestTokens, tokenBalance } from './tokens.js'

export type SolanaBackend = 'litesvm' | 'solana-test-validator'

export interface StartSolanaValidatorOptions {
  /**
   * `auto` (default) starts `solana-test-validator` when it is on PATH and the litesvm facade
   * otherwise. The environment variable `CAIPAY_SOLANA_BACKEND` overrides `auto`.
   */
  backend?: 'auto' | SolanaBackend
  /** Commitment of the returned Connection. Default `confirmed`. */
  commitment?: Commitment
  /** litesvm only: the genesis hash to report (default: a fixed local one). */
  genesisHash?: string
  /** litesvm only: a slot every `slotMs` rather than one per landed transaction (see the facade). */
  slotMs?: number
  /** solana-test-validator only: how long to wait for a healthy RPC. Default 60 s. */
  startTimeoutMs?: number
}

export interface SolanaValidator {
  readonly backend: SolanaBackend
  readonly rpcUrl: string
  readonly wsUrl: string
  readonly genesisHash: string
  /** `solana:<first 32 characters of the genesis hash>`. */
  readonly caip2: `solana:${string}`
  /** A plain web3.js Connection to this cluster (WebSocket endpoint set explicitly). */
  readonly connection: Connection
  /** The litesvm instance behind the facade; undefined for a real validator. */
  readonly svm: LiteSVM | undefined
  /**
   * Makes blockhashes handed out so far invalid. On litesvm at once, then a slot's time passes (on a
   * chain an expiry comes with a block, and the server shares one validity read per blockhash for a
   * slot: `sharedBlockhashValid`); on a real validator it waits until the current blockhash expires
   * (about a minute).
   */
  expireBlockhash(): Promise<void>
  /** litesvm only: sets the clock sysvar's unix time (a test clock); undefined for a real validator. */
  readonly setClock: ((unixSeconds: number) => void) | undefined
  stop(): Promise<void>
}

/** Longer than the server shares a blockhash's validity read (chain.ts, `blockhashValidityMs`). */
const expiryVisibleAfterMs = 450

/** Starts a local Solana cluster for tests and demos: the real validator when installed, else litesvm. */
export async function startSolanaValidator(
  options: StartSolanaValidatorOptions = {},
): Promise<SolanaValidator> {
  const backend = resolveBackend(options.backend)
  const commitment = options.commitment ?? 'confirmed'

  if (backend === 'litesvm') {
    const rpc = await startLiteSvmRpc({
      ...(options.genesisHash ? { genesisHash: options.genesisHash } : {}),
      ...(options.slotMs ? { slotMs: options.slotMs } : {}),
    })
    const connection = new Connection(rpc.rpcUrl, { commitment, wsEndpoint: rpc.wsUrl })
    keepCachedBlockhash(connection)
    return {
      backend,
      rpcUrl: rpc.rpcUrl,
      wsUrl: rpc.wsUrl,
      genesisHash: rpc.genesisHash,
      caip2: solanaCaip2(rpc.genesisHash),
      connection,
      svm: rpc.svm,
      setClock: rpc.setClock,
      expireBlockhash: async () => {
        rpc.expireBlockhash()
        forgetCachedBlockhash(connection)
        await new Promise((resolve) => setTimeout(resolve, expiryVisibleAfterMs))
      },
      stop: async () => {
        await disposeSubscriptions(connection)
        await rpc.stop()
      },
    }
  }

  const validator = await startTestValidator(
    options.startTimeoutMs === undefined ? {} : { timeoutMs: options.startTimeoutMs },
  )
  try {
    const connection = new Connection(validator.rpcUrl, { commitment, wsEndpoint: validator.wsUrl })
    const genesisHash = await connection.getGenesisHash()
    return {
      backend,
      rpcUrl: validator.rpcUrl,
      wsUrl: validator.wsUrl,
      genesisHash,
      caip2: solanaCaip2(genesisHash),
      connection,
      svm: undefined,
      setClock: undefined,
      expireBlockhash: () => waitForBlockhashExpiry(connection),
      stop: async () => {
        await disposeSubscriptions(connection)
        await validator.stop()
      },
    }
  } catch (error) {
    await validator.stop()
    throw error
  }
}

function resolveBackend(requested: StartSolanaValidatorOptions['backend']): SolanaBackend {
  const choice = requested && requested !== 'auto' ? requested : process.env.CAIPAY_SOLANA_BACKEND
  if (choice === 'litesvm' || choice === 'solana-test-validator') return choice
  return hasSolanaTestValidator() ? 'solana-test-validator' : 'litesvm'
}

/**
 * A Connection that still has listeners when its server goes away reconnects forever (every
 * second, logging each failure). Tests that forget `removeSignatureListener` and friends should
 * not keep the process alive, so the harness drops its own Connection's listeners on stop.
 */
async function disposeSubscriptions(connection: Connection): Promise<void> {
  const internal = connection as unknown as {
    _subscriptionDisposeFunctionsByClientSubscriptionId?: Record<string, () => Promise<void>>
  }
  const disposers = Object.values(internal._subscriptionDisposeFunctionsByClientSubscriptionId ?? {})
  if (disposers.length === 0) return
  let timer: ReturnType<typeof setTimeout> | undefined
  await Promise.race([
    Promise.allSettled(disposers.map((dispose) => dispose())),
    new Promise((resolve) => {
      timer = setTimeout(resolve, 1000)
    }),
  ])
  clearTimeout(timer)
}

/**
 * web3.js caches the latest blockhash for 30 s in `sendTransaction(tx, signers)` and
 * `simulateTransaction(tx)`. On a validator the cached one stays valid for 150 blocks; litesvm
 * accepts only the newest, so after an expiry the harness's own Connection must forget it.
 * Other Connections to the facade keep their cache: build transactions with an explicit
 * `getLatestBlockhash()` there.
 */
/**
 * The local RPC's blockhash changes only when a test expires it (`expireBlockhash`, which also forgets
 * web3.js's cached one). web3.js refetches its cached blockhash after 30 s and then waits for a *new*
 * one, which never comes here: any test slower than that (a loaded machine) failed with "Unable to obtain
 * a new blockhash". So the cache is kept fresh; an identical transaction sent twice still asks for a new
 * one, as web3.js does.
 */
function keepCachedBlockhash(connection: Connection): void {
  const internal = connection as unknown as {
    _blockhashInfo: { latestBlockhash: unknown; lastFetch: number }
    _blockhashWithExpiryBlockHeight(disableCache: boolean): Promise<unknown>
  }
  const fetchOrCached = internal._blockhashWithExpiryBlockHeight.bind(connection)
  internal._blockhashWithExpiryBlockHeight = (disableCache) => {
    if (!disableCache && internal._blockhashInfo.latestBlockhash)
      internal._blockhashInfo.lastFetch = Date.now()
    return fetchOrCached(disableCache)
  }
}

function forgetCachedBlockhash(connection: Connection): void {
  const internal = connection as unknown as {
    _blockhashInfo?: { latestBlockhash: unknown; lastFetch: number }
  }
  if (internal._blockhashInfo) {
    internal._blockhashInfo.latestBlockhash = null
    internal._blockhashInfo.lastFetch = 0
  }
}

async function waitForBlockhashExpiry(connection: Connection, timeoutMs = 180_000): Promise<void> {
  const { blockhash } = await connection.getLatestBlockhash('processed')
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (!(await connection.isBlockhashValid(blockhash, { commitment: 'processed' })).value) return
    await new Promise((resolve) => setTimeout(resolve, 1000))
  }
  throw new Error(`Blockhash ${blockhash} still valid after ${timeoutMs} ms`)
}
