/**
 * A Solana JSON-RPC facade over litesvm, for machines without `solana-test-validator`.
 *
 * litesvm is the real SVM (real signature checks, SPL Token and ATA programs, rent, replay
 * protection), but in-process and with kit types. This facade puts the validator's JSON-RPC
 * surface in front of it so that an unchanged web3.js `Connection`, the @solana/spl-token helpers
 * and the reference server talk to it like to a local validator.
 *
 * HTTP (POST, single requests and batches; `GET /health` answers `ok`):
 *   getHealth, getVersion, getGenesisHash, getSlot, getBlockHeight, getEpochInfo,
 *   getTransactionCount, getLatestBlockhash, isBlockhashValid, getFeeForMessage, getBalance,
 *   getMinimumBalanceForRentExemption, getAccountInfo, getMultipleAccounts, getProgramAccounts
 *   (encodings base64 and base58; jsonParsed answers with base64, as a validator does for data it
 *   cannot parse), getTokenAccountBalance, getTokenSupply, getTokenAccountsByOwner,
 *   requestAirdrop, simulateTransaction (sigVerify, replaceRecentBlockhash, accounts),
 *   sendTransaction (skipPreflight), getSignatureStatuses, getTransaction (json and base64, with token
 *   balance changes), getSignaturesForAddress (commitment, minContextSlot, before, until, limit).
 * WebSocket (on the HTTP port + 1, the validator convention web3.js assumes, and on the HTTP port):
 *   signatureSubscribe, signatureUnsubscribe. `ping` notifications are ignored.
 * Anything else is JSON-RPC error -32601.
 *
 * Validator behaviour it copies: a preflight failure is error -32002 with `data.err` and
 * `data.logs` and the transaction does not land; a bad signature is -32003; a transaction whose
 * instruction fails after preflight was skipped lands with `err` and pays its fee; a replay is
 * `AlreadyProcessed`; an unknown or expired blockhash is `BlockhashNotFound`. Landed transactions
 * report `confirmationStatus: 'finalized'` at once, or, with `slotMs`, as on a cluster: `processed` in
 * their slot, `confirmed` once it is over, `finalized` 32 slots later.
 *
 * Where it differs: litesvm has one valid blockhash at a time and does not produce blocks. The
 * facade advances one slot per landed transaction (or one every `slotMs`) and keeps the clock sysvar's unix timestamp at
 * wall-clock time. The blockhash stays valid until `expireBlockhash()` (then only the new one is);
 * `lastValidBlockHeight` is always the current height + 150. No address lookup tables, no
 * priority-fee accounting in getFeeForMessage, no commitment levels (everything is finalized).
 */
import { createHash } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Duplex } from 'node:stream'
import {
  address,
  type EncodedAccount,
  getTransactionDecoder,
  isSolanaError,
  type Transaction as KitTransaction,
  lamports,
  SOLANA_ERROR__TRANSACTION__SIGNATURES_MISSING,
} from '@solana/kit'
import { type TransactionVersion, VersionedMessage, VersionedTransaction } from '@solana/web3.js'
import bs58 from 'bs58'
import { FailedTransactionMetadata, LiteSVM, type TransactionMetadata } from 'litesvm'
import { type WebSocket, WebSocketServer } from 'ws'
import { describeTransactionError, landsOnChain, RpcError, transactionErrorJson } from './rpcErrors.js'

export interface LiteSvmRpcOptions {
  /** Interface to listen on. Default `127.0.0.1`. */
  host?: string
  /** Base58 genesis hash to report; its first 32 characters are the CAIP-2 reference. */
  genesisHash?: string
  /** Bring your own configured instance (extra programs, accounts); default `new LiteSVM()`. */
  svm?: LiteSVM
  /**
   * A slot every `slotMs` of wall-clock time, every transaction landing in the current one and confirmed
   * once it is over, as on a cluster (400 ms there). Default: none, one slot per landed transaction.
   */
  slotMs?: number
}

export interface LiteSvmRpc {
  readonly rpcUrl: string
  readonly wsUrl: string
  readonly genesisHash: string
  /** The underlying VM, for state a test wants to set directly (`setAccount`, `getAccount`). */
  readonly svm: LiteSVM
  /** Makes every blockhash handed out so far invalid, as if 150 blocks had passed. */
  expireBlockhash(): void
  /** Advances the slot (and block height) without a transaction. */
  advanceSlots(count?: number): void
  /**
   * Moves the clock sysvar's unix timestamp to `unixSeconds` (and keeps it that far ahead of wall-clock
   * time from then on): a test's clock, e.g. a subscription's year in a few seconds.
   */
  setClock(unixSeconds: number): void
  stop(): Promise<void>
}

/** A fixed default so configs and snapshots can name the chain; override per instance if needed. */
const defaultGenesisHash = bs58.encode(createHash('sha256').update('caipay litesvm local cluster').digest())

const lamportsPerSignature = 5000
const blockhashValidBlocks = 150
// u64::MAX as a validator sends it; JSON parsers read it as 2^64 anyway.
const maxU64AsNumber = 2 ** 64
const tokenProgramIds = [
  'TokenkegQfeZyiNwAJbNbGKPFXCWuBvf9Ss623VQ5DA',
  'TokenzQdBNbLqP5VEhdkAS6EPFLC1PHnBqCXEpPxuEb',
] as const
const tokenAccountSize = 165
const accountTypeAccount = 2

interface LandedTransaction {
  slot: number
  blockTime: number
  err: unknown
  /** Missing for airdrops, whose transaction litesvm builds internally. */
  bytes?: Uint8Array
  version?: TransactionVersion
  logs: string[]
  fee: number
  preBalances: number[]
  postBalances: number[]
  preTokenBalances: TokenBalance[]
  postTokenBalances: TokenBalance[]
  /** The transaction's account keys, base58 (what getSignaturesForAddress looks up). */
  accounts: string[]
  unitsConsumed: number
}

/** A token account's balance in a transaction's meta (`preTokenBalances`, `postTokenBalances`). */
interface TokenBalance {
  accountIndex: number
  mint: string
  owner: string
  programId: string
  uiTokenAmount: ReturnType<typeof uiAmountOf>
}

interface JsonRpcRequest {
  jsonrpc?: string
  id?: string | number | null
  method?: unknown
  params?: unknown
}

type Params = readonly unknown[]
type Config = Record<string, unknown>

/** Starts the facade on random free ports (HTTP on P, WebSocket on P + 1). */
export async function startLiteSvmRpc(options: LiteSvmRpcOptions = {}): Promise<LiteSvmRpc> {
  const host = options.host ?? '127.0.0.1'
  const svm = options.svm ?? new LiteSVM()
  const genesisHash = options.genesisHash ?? defaultGenesisHash
  const kitDecoder = getTransactionDecoder()
  const landed = new Map<string, LandedTransaction>()
  const subscriptions = new Map<number, { signature: string; socket: WebSocket }>()
  let nextSubscriptionId = 1
  let transactionCount = 0

  // litesvm boots at an arbitrary slot with unix time 0; start at slot 1 and wall-clock time so
  // programs that read the Clock sysvar see sane values.
  let slot = 1
  // How far the clock sysvar runs ahead of wall-clock time (setClock).
  let clockAheadSeconds = 0
  svm.warpToSlot(BigInt(slot))
  syncClock()
  const clockedSlots = options.slotMs ? setInterval(() => advanceSlots(1), options.slotMs) : undefined
  clockedSlots?.unref()

  function syncClock(): void {
    const clock = svm.getClock()
    clock.unixTimestamp = BigInt(Math.floor(Date.now() / 1000) + clockAheadSeconds)
    svm.setClock(clock)
  }

  function advanceSlots(count = 1): void {
    slot += count
    svm.warpToSlot(BigInt(slot))
    syncClock()
    // Clocked, a transaction is confirmed once its slot is over: tell those waiting for it now.
    if (clockedSlots) for (const { signature } of [...subscriptions.values()]) notifySignature(signature)
  }

  /**
   * Clocked, as on a cluster: `processed` while its slot is still the current one, `confirmed` once the
   * slot is over (its block is complete; a cluster also waits for votes), `finalized` 32 slots later.
   * Unclocked, every landed transaction is finalized at once (a slot per transaction).
   */
  function commitmentOf(entry: LandedTransaction): 'processed' | 'confirmed' | 'finalized' {
    if (!clockedSlots) return 'finalized'
    if (entry.slot >= slot) return 'processed'
    return slot - entry.slot >= 32 ? 'finalized' : 'confirmed'
  }

  const context = () => ({ slot, apiVersion: '2.2.0' })
  const withContext = (value: unknown) => ({ context: context(), value })

  function record(signature: string, entry: Omit<LandedTransaction, 'slot' | 'blockTime'>): void {
    // Unclocked, a transaction lands in a slot of its own, after every slot already reported: a reader
    // that scanned up to the reported slot (getSlot) must never see a transaction land in it later.
    if (!clockedSlots) advanceSlots(1)
    landed.set(signature, { ...entry, slot, blockTime: Math.floor(Date.now() / 1000) })
    transactionCount++
    notifySignature(signature)
  }

  function notifySignature(signature: string): void {
    const entry = landed.get(signature)
    if (!entry || commitmentOf(entry) === 'processed') return
    for (const [id, sub] of subscriptions) {
      if (sub.signature !== signature) continue
      // One-shot like the validator: the subscription ends with its notification.
      subscriptions.delete(id)
      sendWs(sub.socket, {
        jsonrpc: '2.0',
        method: 'signatureNotification',
        params: { result: { context: { slot: entry.slot }, value: { err: entry.err } }, subscription: id },
      })
    }
  }

  // --- account helpers -------------------------------------------------------------------------

  function toAddress(value: unknown): ReturnType<typeof address> {
    if (typeof value !== 'string') throw new RpcError(-32602, 'Invalid param: expected a base58 address')
    try {
      return address(value)
    } catch {
      throw new RpcError(-32602, `Invalid param: Invalid public key ${value}`)
    }
  }

  function readAccount(pubkey: string): EncodedAccount | null {
    const account = svm.getAccount(toAddress(pubkey))
    // A validator reports accounts without lamports as missing.
    return account.exists && account.lamports > 0n ? account : null
  }

  function encodeAccount(account: EncodedAccount, config: Config | undefined) {
    let data = account.data as Uint8Array
    const slice = config?.dataSlice as { offset: number; length: number } | undefined
    if (slice) data = data.subarray(slice.offset, slice.offset + slice.length)
    const encoding = (config?.encoding as string | undefined) ?? 'base58'
    let encoded: [string, string]
    if (encoding === 'base58' || encoding === 'binary') encoded = [bs58.encode(data), 'base58']
    else if (encoding === 'base64' || encoding === 'jsonParsed')
      encoded = [Buffer.from(data).toString('base64'), 'base64']
    else throw new RpcError(-32602, `Invalid param: unsupported encoding ${encoding}`)
    return {
      data: encoding === 'binary' ? encoded[0] : encoded,
      executable: account.executable,
      lamports: Number(account.lamports),
      owner: account.programAddress,
      rentEpoch: maxU64AsNumber,
      space: account.data.length,
    }
  }

  function tokenAccountParts(pubkey: string): { mint: string; owner: string; amount: bigint } {
    const account = readAccount(pubkey)
    const data = account?.data as Uint8Array | undefined
    if (!account || !data || !isTokenProgram(account.programAddress) || !isTokenAccountData(data)) {
      throw new RpcError(-32602, 'Invalid param: not a Token account')
    }
    return {
      mint: bs58.encode(data.subarray(0, 32)),
      owner: bs58.encode(data.subarray(32, 64)),
      amount: Buffer.from(data).readBigUInt64LE(64),
    }
  }

  function mintDecimals(mint: string): number {
    const data = readAccount(mint)?.data as Uint8Array | undefined
    if (!data || data.length < 82) throw new RpcError(-32602, 'Invalid param: not a Token mint')
    return data[44]!
  }

  const uiAmount = uiAmountOf

  // --- transaction helpers ---------------------------------------------------------------------

  function decodeWire(encoded: unknown, config: Config | undefined): Uint8Array {
    if (typeof encoded !== 'string')
      throw new RpcError(-32602, 'Invalid param: expected an encoded transaction')
    const encoding = (config?.encoding as string | undefined) ?? 'base58'
    try {
      if (encoding === 'base64') return new Uint8Array(Buffer.from(encoded, 'base64'))
      if (encoding === 'base58') return bs58.decode(encoded)
    } catch {}
    throw new RpcError(-32602, `Invalid param: failed to decode ${encoding} transaction`)
  }

  function parseTransaction(bytes: Uint8Array): { web3: VersionedTransaction; kit: KitTransaction } {
    try {
      return { web3: VersionedTransaction.deserialize(bytes), kit: kitDecoder.decode(bytes) }
    } catch (error) {
      throw new RpcError(-32602, `invalid transaction: failed to deserialize: ${(error as Error).message}`)
    }
  }

  /** The token accounts among `keys` and what they hold now, as a transaction's meta reports them. */
  function tokenBalancesOf(keys: readonly string[]): TokenBalance[] {
    return keys.flatMap((key, accountIndex) => {
      const account = readAccount(key)
      const data = account?.data as Uint8Array | undefined
      if (!account || !data || !isTokenProgram(account.programAddress) || !isTokenAccountData(data)) return []
      const mint = bs58.encode(data.subarray(0, 32))
      return [
        {
          accountIndex,
          mint,
          owner: bs58.encode(data.subarray(32, 64)),
          programId: account.programAddress,
          uiTokenAmount: uiAmount(Buffer.from(data).readBigUInt64LE(64), mintDecimals(mint)),
        },
      ]
    })
  }

  function balancesOf(tx: VersionedTransaction): number[] {
    return tx.message.staticAccountKeys.map((key) => Number(svm.getBalance(address(key.toBase58())) ?? 0n))
  }

  /** Runs litesvm, turning kit's "signatures missing" throw into the validator's SignatureFailure. */
  function run(
    action: 'send' | 'simulate',
    tx: KitTransaction,
  ):
    | { ok: true; meta: TransactionMetadata; post?: EncodedAccount[] }
    | { ok: false; err: unknown; logs: string[]; units: number } {
    syncClock()
    try {
      const result = action === 'send' ? svm.sendTransaction(tx) : svm.simulateTransaction(tx)
      if (result instanceof FailedTransactionMetadata) {
        const meta = result.meta()
        return {
          ok: false,
          err: transactionErrorJson(result.err()),
          logs: meta.logs(),
          units: Number(meta.computeUnitsConsumed()),
        }
      }
      if ('postAccounts' in result) return { ok: true, meta: result.meta(), post: result.postAccounts() }
      return { ok: true, meta: result }
    } catch (error) {
      if (isSolanaError(error, SOLANA_ERROR__TRANSACTION__SIGNATURES_MISSING)) {
        return { ok: false, err: 'SignatureFailure', logs: [], units: 0 }
      }
      throw error
    }
  }

  function simulate(tx: KitTransaction, sigVerify: boolean) {
    if (sigVerify) return run('simulate', tx)
    svm.withSigverify(false)
    try {
      return run('simulate', tx)
    } finally {
      svm.withSigverify(true)
    }
  }

  function sendTransaction(params: Params): string {
    const config = params[1] as Config | undefined
    const bytes = decodeWire(params[0], config)
    const { web3, kit } = parseTransaction(bytes)
    const signature = bs58.encode(web3.signatures[0] ?? new Uint8Array(64))
    if (!config?.skipPreflight) {
      const preflight = simulate(kit, true)
      if (!preflight.ok && preflight.err === 'SignatureFailure') {
        throw new RpcError(-32003, 'Transaction signature verification failure')
      }
      if (!preflight.ok) throw preflightError(preflight.err, preflight.logs, preflight.units)
    }
    const preBalances = balancesOf(web3)
    const accounts = web3.message.staticAccountKeys.map((key) => key.toBase58())
    const preTokenBalances = tokenBalancesOf(accounts)
    const result = run('send', kit)
    if (!result.ok && result.err === 'SignatureFailure') {
      throw new RpcError(-32003, 'Transaction signature verification failure')
    }
    if (result.ok || landsOnChain(result.err)) {
      record(signature, {
        err: result.ok ? null : result.err,
        bytes,
        version: web3.version,
        logs: result.ok ? result.meta.logs() : result.logs,
        fee: lamportsPerSignature * web3.message.header.numRequiredSignatures,
        preBalances,
        postBalances: balancesOf(web3),
        preTokenBalances,
        postTokenBalances: tokenBalancesOf(accounts),
        accounts,
        unitsConsumed: result.ok ? Number(result.meta.computeUnitsConsumed()) : result.units,
      })
    } else if (!config?.skipPreflight) {
      throw preflightError(result.err, result.logs, result.units)
    }
    // With skipPreflight a rejected transaction is dropped silently; its status stays null.
    return signature
  }

  function preflightError(err: unknown, logs: string[], unitsConsumed: number): RpcError {
    return new RpcError(-32002, `Transaction simulation failed: ${describeTransactionError(err)}`, {
      err,
      logs,
      accounts: null,
      unitsConsumed,
      returnData: null,
      innerInstructions: null,
    })
  }

  function simulateTransaction(params: Params) {
    const config = (params[1] as Config | undefined) ?? {}
    const sigVerify = Boolean(config.sigVerify)
    const replace = Boolean(config.replaceRecentBlockhash)
    if (sigVerify && replace) {
      throw new RpcError(-32602, 'sigVerify may not be used with replaceRecentBlockhash')
    }
    let bytes = decodeWire(params[0], config)
    let replacementBlockhash: { blockhash: string; lastValidBlockHeight: number } | undefined
    if (replace) {
      const tx = parseTransaction(bytes).web3
      tx.message.recentBlockhash = svm.latestBlockhash()
      bytes = tx.serialize()
      replacementBlockhash = latestBlockhash()
    }
    const { kit } = parseTransaction(bytes)
    const result = simulate(kit, sigVerify)
    const requested = (config.accounts as { addresses?: string[]; encoding?: string } | undefined)?.addresses
    const accounts = requested?.map((key) => {
      const post = result.ok ? result.post?.find((a) => a.address === key) : undefined
      const account = post ?? readAccount(key)
      return account ? encodeAccount(account, { encoding: 'base64' }) : null
    })
    return withContext({
      err: result.ok ? null : result.err,
      logs: result.ok ? result.meta.logs() : result.logs,
      accounts: accounts ?? null,
      unitsConsumed: result.ok ? Number(result.meta.computeUnitsConsumed()) : result.units,
      returnData: null,
      innerInstructions: null,
      ...(replacementBlockhash ? { replacementBlockhash } : {}),
    })
  }

  function latestBlockhash() {
    return { blockhash: svm.latestBlockhash(), lastValidBlockHeight: slot + blockhashValidBlocks }
  }

  function signatureStatus(signature: unknown) {
    const entry = typeof signature === 'string' ? landed.get(signature) : undefined
    if (!entry) return null
    const commitment = commitmentOf(entry)
    return {
      slot: entry.slot,
      confirmations: commitment === 'finalized' ? null : slot - entry.slot,
      err: entry.err,
      status: entry.err === null ? { Ok: null } : { Err: entry.err },
      confirmationStatus: commitment,
    }
  }

  function getTransaction(params: Params) {
    const config: Config =
      typeof params[1] === 'string' ? { encoding: params[1] } : ((params[1] as Config | undefined) ?? {})
    const entry = typeof params[0] === 'string' ? landed.get(params[0]) : undefined
    // getTransaction answers from confirmed blocks only.
    if (!entry?.bytes || commitmentOf(entry) === 'processed') return null
    const maxVersion = config.maxSupportedTransactionVersion as number | undefined
    if (entry.version === 0 && maxVersion === undefined) {
      throw new RpcError(
        -32015,
        'Transaction version (0) is not supported by the requesting client. Please try the request again with the following configuration parameter: "maxSupportedTransactionVersion": 0',
      )
    }
    const encoding = (config.encoding as string | undefined) ?? 'json'
    if (encoding === 'jsonParsed')
      throw new RpcError(-32602, 'Invalid param: jsonParsed is not supported here')
    const tx = VersionedTransaction.deserialize(entry.bytes)
    const message = tx.message
    const transaction =
      encoding === 'base64'
        ? [Buffer.from(entry.bytes).toString('base64'), 'base64']
        : encoding === 'base58'
          ? [bs58.encode(entry.bytes), 'base58']
          : {
              signatures: tx.signatures.map((s) => bs58.encode(s)),
              message: {
                accountKeys: message.staticAccountKeys.map((k) => k.toBase58()),
                header: message.header,
                recentBlockhash: message.recentBlockhash,
                instructions: message.compiledInstructions.map((ix) => ({
                  programIdIndex: ix.programIdIndex,
                  accounts: ix.accountKeyIndexes,
                  data: bs58.encode(ix.data),
                  stackHeight: null,
                })),
                ...(entry.version === 0 ? { addressTableLookups: [] } : {}),
              },
            }
    return {
      slot: entry.slot,
      blockTime: entry.blockTime,
      ...(maxVersion === undefined ? {} : { version: entry.version }),
      transaction,
      meta: {
        err: entry.err,
        status: entry.err === null ? { Ok: null } : { Err: entry.err },
        fee: entry.fee,
        preBalances: entry.preBalances,
        postBalances: entry.postBalances,
        innerInstructions: [],
        logMessages: entry.logs,
        preTokenBalances: entry.preTokenBalances,
        postTokenBalances: entry.postTokenBalances,
        rewards: [],
        loadedAddresses: { writable: [], readonly: [] },
        computeUnitsConsumed: entry.unitsConsumed,
      },
    }
  }

  /**
   * The slot a read at `commitment` sees: clocked, the last slot that is over for `confirmed` and the one
   * 32 before for `finalized`; unclocked, the current one (everything is finalized at once).
   */
  function slotAt(commitment: unknown): number {
    if (!clockedSlots || commitment === 'processed') return slot
    return Math.max(0, commitment === 'confirmed' ? slot - 1 : slot - 32)
  }

  /** A validator refuses a read whose `minContextSlot` its commitment has not reached (-32016). */
  function requireContextSlot(config: Config | undefined): void {
    const wanted = config?.minContextSlot
    if (typeof wanted === 'number' && slotAt(config?.commitment ?? 'finalized') < wanted)
      throw new RpcError(-32016, 'Minimum context slot has not been reached', {
        contextSlot: slotAt(config?.commitment ?? 'finalized'),
      })
  }

  /**
   * Newest first, as a validator: the landed transactions naming `address` among their account keys, at
   * the commitment asked for (default finalized), `before`/`until` a signature, at most `limit` (1000).
   */
  function getSignaturesForAddress(params: Params) {
    const wanted = toAddress(params[0])
    const config = params[1] as Config | undefined
    requireContextSlot(config)
    const limit = Math.min(1000, Number(config?.limit ?? 1000))
    const visible = slotAt(config?.commitment ?? 'finalized')
    const found: object[] = []
    let started = typeof config?.before !== 'string'
    for (const [signature, entry] of [...landed].reverse()) {
      if (!started) {
        started = signature === config?.before
        continue
      }
      if (signature === config?.until || found.length >= limit) break
      if (entry.slot > visible || !entry.accounts.includes(wanted)) continue
      found.push({
        signature,
        slot: entry.slot,
        err: entry.err,
        memo: null,
        blockTime: entry.blockTime,
        confirmationStatus: commitmentOf(entry),
      })
    }
    return found
  }

  function programAccounts(programId: string, config: Config | undefined) {
    const filters = (config?.filters as Array<Record<string, unknown>> | undefined) ?? []
    return svm
      .getProgramAccounts(toAddress(programId))
      .filter((account) => account.lamports > 0n)
      .filter((account) => filters.every((filter) => matchesFilter(account.data as Uint8Array, filter)))
      .map((account) => ({ pubkey: account.address, account: encodeAccount(account, config) }))
  }

  function tokenAccountsByOwner(params: Params) {
    const owner = toAddress(params[0])
    const filter = (params[1] as { mint?: string; programId?: string } | undefined) ?? {}
    const config = params[2] as Config | undefined
    const programs = filter.programId ? [filter.programId] : tokenProgramIds
    const ownerBytes = bs58.decode(owner)
    const mintBytes = filter.mint ? bs58.decode(toAddress(filter.mint)) : undefined
    const value = programs.flatMap((programId) =>
      svm
        .getProgramAccounts(toAddress(programId))
        .filter((account) => {
          const data = account.data as Uint8Array
          if (!isTokenAccountData(data)) return false
          if (!bytesEqual(data.subarray(32, 64), ownerBytes)) return false
          return !mintBytes || bytesEqual(data.subarray(0, 32), mintBytes)
        })
        .map((account) => ({ pubkey: account.address, account: encodeAccount(account, config) })),
    )
    return withContext(value)
  }

  const methods: Record<string, (params: Params) => unknown> = {
    getHealth: () => 'ok',
    getVersion: () => ({ 'solana-core': '2.2.0', 'feature-set': 0 }),
    getGenesisHash: () => genesisHash,
    getSlot: () => slot,
    getBlockHeight: () => slot,
    getTransactionCount: () => transactionCount,
    getEpochInfo: () => ({
      absoluteSlot: slot,
      blockHeight: slot,
      epoch: 0,
      slotIndex: slot,
      slotsInEpoch: 432_000,
      transactionCount,
    }),
    getLatestBlockhash: () => withContext(latestBlockhash()),
    isBlockhashValid: (params) => withContext(params[0] === svm.latestBlockhash()),
    getFeeForMessage: (params) => {
      if (typeof params[0] !== 'string')
        throw new RpcError(-32602, 'Invalid param: expected a base64 message')
      let message: VersionedMessage
      try {
        message = VersionedMessage.deserialize(Buffer.from(params[0], 'base64'))
      } catch {
        throw new RpcError(-32602, 'Invalid param: failed to deserialize message')
      }
      if (message.recentBlockhash !== svm.latestBlockhash()) return withContext(null)
      return withContext(lamportsPerSignature * message.header.numRequiredSignatures)
    },
    getBalance: (params) => withContext(Number(svm.getBalance(toAddress(params[0])) ?? 0n)),
    getMinimumBalanceForRentExemption: (params) =>
      Number(svm.minimumBalanceForRentExemption(BigInt(Number(params[0] ?? 0)))),
    getAccountInfo: (params) => {
      const account = readAccount(String(params[0]))
      return withContext(account ? encodeAccount(account, params[1] as Config | undefined) : null)
    },
    getMultipleAccounts: (params) => {
      const keys = Array.isArray(params[0]) ? params[0] : []
      const config = params[1] as Config | undefined
      return withContext(
        keys.map((key) => {
          const account = readAccount(String(key))
          return account ? encodeAccount(account, config) : null
        }),
      )
    },
    getProgramAccounts: (params) => {
      const config = params[1] as Config | undefined
      const value = programAccounts(String(params[0]), config)
      return config?.withContext ? withContext(value) : value
    },
    getTokenAccountBalance: (params) => {
      const { mint, amount } = tokenAccountParts(String(params[0]))
      return withContext(uiAmount(amount, mintDecimals(mint)))
    },
    getTokenSupply: (params) => {
      const data = readAccount(String(params[0]))?.data as Uint8Array | undefined
      if (!data || data.length < 82) throw new RpcError(-32602, 'Invalid param: not a Token mint')
      return withContext(uiAmount(Buffer.from(data).readBigUInt64LE(36), data[44]!))
    },
    getTokenAccountsByOwner: tokenAccountsByOwner,
    requestAirdrop: (params) => {
      const to = toAddress(params[0])
      const amount = BigInt(Number(params[1] ?? 0))
      const preBalances = [Number(svm.getBalance(to) ?? 0n)]
      syncClock()
      const result = svm.airdrop(to, lamports(amount))
      if (!result || result instanceof FailedTransactionMetadata) {
        throw new RpcError(-32603, `airdrop request failed: ${result ? result.toString() : 'no result'}`)
      }
      const signature = bs58.encode(result.signature())
      record(signature, {
        err: null,
        logs: result.logs(),
        fee: lamportsPerSignature,
        preBalances,
        postBalances: [Number(svm.getBalance(to) ?? 0n)],
        preTokenBalances: [],
        postTokenBalances: [],
        accounts: [to],
        unitsConsumed: Number(result.computeUnitsConsumed()),
      })
      return signature
    },
    simulateTransaction,
    sendTransaction,
    getSignatureStatuses: (params) =>
      withContext((Array.isArray(params[0]) ? params[0] : []).map(signatureStatus)),
    getTransaction,
    getSignaturesForAddress,
  }

  function dispatch(request: unknown): object | undefined {
    const req = request as JsonRpcRequest
    const id = req?.id ?? null
    if (typeof req !== 'object' || req === null || typeof req.method !== 'string') {
      return { jsonrpc: '2.0', id, error: { code: -32600, message: 'Invalid request' } }
    }
    const handler = Object.hasOwn(methods, req.method) ? methods[req.method] : undefined
    if (!handler) return { jsonrpc: '2.0', id, error: { code: -32601, message: 'Method not found' } }
    try {
      const params = Array.isArray(req.params) ? req.params : []
      return { jsonrpc: '2.0', id, result: handler(params) }
    } catch (error) {
      return { jsonrpc: '2.0', id, error: toJsonError(error) }
    }
  }

  // --- HTTP ------------------------------------------------------------------------------------

  async function onHttp(req: IncomingMessage, res: ServerResponse): Promise<void> {
    if (req.method === 'GET' && req.url === '/health') return reply(res, 200, 'ok', 'text/plain')
    if (req.method !== 'POST') return reply(res, 405, 'Method Not Allowed', 'text/plain')
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    let body: unknown
    try {
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      return replyJson(res, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } })
    }
    if (Array.isArray(body)) {
      if (body.length === 0) {
        return replyJson(res, {
          jsonrpc: '2.0',
          id: null,
          error: { code: -32600, message: 'Invalid request' },
        })
      }
      return replyJson(res, body.map(dispatch))
    }
    return replyJson(res, dispatch(body))
  }

  // --- WebSocket -------------------------------------------------------------------------------

  const wss = new WebSocketServer({ noServer: true })
  wss.on('connection', (socket) => {
    socket.on('message', (raw) => onWsMessage(socket, raw.toString()))
    socket.on('close', () => {
      for (const [id, sub] of subscriptions) if (sub.socket === socket) subscriptions.delete(id)
    })
  })

  function onWsMessage(socket: WebSocket, text: string): void {
    let message: JsonRpcRequest
    try {
      message = JSON.parse(text) as JsonRpcRequest
    } catch {
      sendWs(socket, { jsonrpc: '2.0', id: null, error: { code: -32700, message: 'Parse error' } })
      return
    }
    // Notifications (web3.js sends a `ping` every few seconds) get no answer.
    if (message.id === undefined || message.id === null) return
    const params = Array.isArray(message.params) ? message.params : []
    if (message.method === 'signatureSubscribe') {
      if (typeof params[0] !== 'string') {
        sendWs(socket, {
          jsonrpc: '2.0',
          id: message.id,
          error: { code: -32602, message: 'Invalid params' },
        })
        return
      }
      const id = nextSubscriptionId++
      subscriptions.set(id, { signature: params[0], socket })
      sendWs(socket, { jsonrpc: '2.0', id: message.id, result: id })
      // Already landed: answer now rather than never.
      notifySignature(params[0])
      return
    }
    if (message.method === 'signatureUnsubscribe') {
      const id = Number(params[0])
      if (!subscriptions.has(id)) {
        sendWs(socket, {
          jsonrpc: '2.0',
          id: message.id,
          error: { code: -32602, message: 'Invalid subscription id.' },
        })
        return
      }
      subscriptions.delete(id)
      sendWs(socket, { jsonrpc: '2.0', id: message.id, result: true })
      return
    }
    const response = dispatch(message)
    if (response) sendWs(socket, response)
  }

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    wss.handleUpgrade(req, socket, head, (ws) => wss.emit('connection', ws, req))
  }

  const { http, ws, port } = await listenPair(host, (req, res) => {
    onHttp(req, res).catch((error: unknown) => {
      if (!res.headersSent) replyJson(res, { jsonrpc: '2.0', id: null, error: toJsonError(error) })
    })
  })
  http.on('upgrade', onUpgrade)
  ws.on('upgrade', onUpgrade)

  let stopped: Promise<void> | undefined
  return {
    rpcUrl: `http://${host}:${port}`,
    wsUrl: `ws://${host}:${port + 1}`,
    genesisHash,
    svm,
    // As on a cluster, a blockhash is dead once the chain is past its last valid block height (the one
    // getLatestBlockhash answered with it), not merely because a newer one exists.
    expireBlockhash: () => {
      svm.expireBlockhash()
      advanceSlots(blockhashValidBlocks + 1)
    },
    advanceSlots,
    setClock: (unixSeconds) => {
      clockAheadSeconds = unixSeconds - Math.floor(Date.now() / 1000)
      syncClock()
    },
    stop: () => {
      stopped ??= (async () => {
        clearInterval(clockedSlots)
        subscriptions.clear()
        await closeSockets([...wss.clients])
        wss.close()
        await Promise.all([closeServer(http), closeServer(ws)])
      })()
      return stopped
    },
  }
}

function uiAmountOf(amount: bigint, decimals: number) {
  const scale = 10n ** BigInt(decimals)
  const whole = amount / scale
  const fraction = (amount % scale).toString().padStart(decimals, '0').replace(/0+$/, '')
  const uiAmountString = fraction ? `${whole}.${fraction}` : `${whole}`
  return { amount: amount.toString(), decimals, uiAmount: Number(uiAmountString), uiAmountString }
}

function matchesFilter(data: Uint8Array, filter: Record<string, unknown>): boolean {
  if (typeof filter.dataSize === 'number') return data.length === filter.dataSize
  const memcmp = filter.memcmp as { offset: number; bytes: string; encoding?: string } | undefined
  if (memcmp) {
    const wanted =
      memcmp.encoding === 'base64'
        ? new Uint8Array(Buffer.from(memcmp.bytes, 'base64'))
        : bs58.decode(memcmp.bytes)
    return bytesEqual(data.subarray(memcmp.offset, memcmp.offset + wanted.length), wanted)
  }
  return true
}

function isTokenProgram(owner: string): boolean {
  return (tokenProgramIds as readonly string[]).includes(owner)
}

function isTokenAccountData(data: Uint8Array): boolean {
  // Token-2022 accounts with extensions are longer and carry an account-type byte after the base layout.
  return (
    data.length === tokenAccountSize ||
    (data.length > tokenAccountSize && data[tokenAccountSize] === accountTypeAccount)
  )
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  return a.length === b.length && a.every((byte, i) => byte === b[i])
}

function toJsonError(error: unknown): { code: number; message: string; data?: unknown } {
  if (error instanceof RpcError) {
    return error.data === undefined
      ? { code: error.code, message: error.message }
      : { code: error.code, message: error.message, data: error.data }
  }
  return { code: -32603, message: `Internal error: ${(error as Error)?.message ?? String(error)}` }
}

function reply(res: ServerResponse, status: number, body: string, type: string): void {
  res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body) })
  res.end(body)
}

function replyJson(res: ServerResponse, body: unknown): void {
  reply(res, 200, JSON.stringify(body), 'application/json')
}

function sendWs(socket: WebSocket, body: unknown): void {
  if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(body))
}

/** Listens on a random port P for HTTP and P + 1 for WebSocket, retrying when P + 1 is taken. */
async function listenPair(
  host: string,
  onRequest: (req: IncomingMessage, res: ServerResponse) => void,
): Promise<{ http: Server; ws: Server; port: number }> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const http = createServer(onRequest)
    await listen(http, host, 0)
    const port = (http.address() as AddressInfo).port
    const ws = createServer((_req, res) => reply(res, 400, 'WebSocket only', 'text/plain'))
    try {
      await listen(ws, host, port + 1)
      return { http, ws, port }
    } catch {
      await closeServer(http)
    }
  }
  throw new Error('No free port pair (P, P + 1) found for the Solana RPC facade')
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => {
    if (!server.listening) return resolve()
    server.close(() => resolve())
    server.closeAllConnections()
  })
}

/** Close code 1000 tells web3.js the close was deliberate, so it does not reconnect. */
async function closeSockets(sockets: WebSocket[]): Promise<void> {
  await Promise.all(
    sockets.map(
      (socket) =>
        new Promise<void>((resolve) => {
          if (socket.readyState === socket.CLOSED) return resolve()
          const timer = setTimeout(() => {
            socket.terminate()
            resolve()
          }, 250)
          socket.once('close', () => {
            clearTimeout(timer)
            resolve()
          })
          socket.close(1000, 'server stopping')
        }),
    ),
  )
}

/** The CAIP-2 reference of a Solana cluster: the first 32 characters of its genesis hash. */
export function solanaCaip2(genesisHash: string): `solana:${string}` {
  return `solana:${genesisHash.slice(0, 32)}`
}
