import { sql } from 'kysely'
import {
  type Address,
  type Hash,
  type Hex,
  keccak256,
  parseTransaction,
  TransactionNotFoundError,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from 'viem'
import { RetryLater } from '../../jobs/runner.js'
import type { Db } from '../../store/db.js'
import type { EvmChain } from './chain.js'
import type { EvmTransactionRow, EvmTxPurpose, EvmTxStatus } from './schema.js'

export interface SendOnceParameters {
  db: Db
  chain: EvmChain
  paymentId: string
  purpose: EvmTxPurpose
  to: Address
  data: Hex
  /** Runs under the executor lock right before a NEW transaction is signed (e.g. a simulation). */
  beforeSign?: () => Promise<void>
}

/**
 * Sends the executor's transaction for (payment, purpose) at most once.
 *
 * Under a per-executor lock (a PostgreSQL advisory lock, so instances on one database serialise too):
 * a transaction recorded as succeeded is the one; one recorded as sent is looked up on the chain first
 * (mined or pending: that is the one; unknown to the node: broadcast the same signed bytes again, unless
 * its nonce has since been used by another transaction, in which case it can never land and a new one is
 * due). Only then is a new transaction signed with the pending nonce, recorded, and broadcast, in that
 * order: a crash between any two steps leaves a row that the next attempt finds.
 */
export async function sendOnce(p: SendOnceParameters): Promise<{ hash: Hash; row: EvmTransactionRow }> {
  const { db, chain } = p
  return withExecutorLock(db, chain, async () => {
    const prior = await db
      .selectFrom('evm_transactions')
      .selectAll()
      .where('payment_id', '=', p.paymentId)
      .where('purpose', '=', p.purpose)
      .where('status', 'in', ['sent', 'succeeded'])
      .orderBy('id', 'desc')
      .execute()
    // Newest first: a replacement comes before the transaction it replaced (same nonce), and whichever
    // of them is mined is the step.
    for (const row of prior) {
      // Landed and recorded, but the caller died before its own next write (the payment row): that
      // transaction is the step. Signing anew would pay twice (or, for a relay, fail a paid payment
      // because its authorization is already used).
      if (row.status === 'succeeded') return { hash: row.hash as Hash, row }
      const state = await chainState(chain, row.hash as Hash)
      if (state === 'mined') return { hash: row.hash as Hash, row }
      if (state === 'pending') {
        const stuck = Date.now() - row.created_at.getTime() >= chain.feeBump.afterMs
        return (stuck && (await replaceWithHigherFees(db, chain, row))) || { hash: row.hash as Hash, row }
      }
      const used = await chain.publicClient.getTransactionCount({
        address: chain.executor.address,
        blockTag: 'latest',
      })
      if (BigInt(row.nonce) >= BigInt(used)) {
        try {
          await broadcast(chain, row.raw as Hex)
        } catch (error) {
          // Dropped for its fees (base fee rose past its cap): only a replacement can land now.
          if (!feesTooLow(error)) throw error
          const replacement = await replaceWithHigherFees(db, chain, row)
          if (!replacement) throw error
          return replacement
        }
        return { hash: row.hash as Hash, row }
      }
      await setTxStatus(db, row.hash, 'dropped')
    }

    await p.beforeSign?.()
    const nonce = await nextNonce(db, chain)
    const request = await chain.walletClient.prepareTransactionRequest({
      account: chain.executor,
      chain: chain.walletClient.chain,
      to: p.to,
      data: p.data,
      nonce,
    })
    const raw = await chain.walletClient.signTransaction({ ...request, gas: withGasHeadroom(request.gas) })
    const hash = keccak256(raw)
    const now = new Date()
    const row = await db
      .insertInto('evm_transactions')
      .values({
        payment_id: p.paymentId,
        purpose: p.purpose,
        chain_id: chain.caip2,
        sender: chain.executor.address.toLowerCase(),
        nonce: BigInt(nonce),
        hash,
        raw,
        status: 'sent',
        created_at: now,
        updated_at: now,
      })
      .returningAll()
      .executeTakeFirstOrThrow()
    await broadcast(chain, raw)
    return { hash, row }
  })
}

/**
 * The executor's next nonce, under its lock: past what the node counts (pending included) and past every
 * nonce recorded for a transaction still in flight, so two payments never share a nonce. A recorded
 * transaction the node does not know (the process died before broadcasting it, or the broadcast was
 * lost) would leave a gap that stalls every later one: it is broadcast again here, whatever became of
 * its own job.
 */
async function nextNonce(db: Db, chain: EvmChain): Promise<number> {
  const [counted, inFlight] = await Promise.all([
    chain.publicClient.getTransactionCount({ address: chain.executor.address, blockTag: 'pending' }),
    db
      .selectFrom('evm_transactions')
      .select(['nonce', 'raw'])
      .where('chain_id', '=', chain.caip2)
      .where('sender', '=', chain.executor.address.toLowerCase())
      .where('status', '=', 'sent')
      .orderBy('nonce')
      .orderBy('id', 'desc')
      .execute(),
  ])
  let next = counted
  const seen = new Set<string>()
  for (const row of inFlight) {
    // Newest row per nonce (a replacement before what it replaced); below `counted` the node has one.
    if (seen.has(row.nonce) || Number(row.nonce) < counted) continue
    seen.add(row.nonce)
    await broadcast(chain, row.raw as Hex).catch(() => {})
    next = Math.max(next, Number(row.nonce) + 1)
  }
  return next
}

/** A node refusing a transaction (or a replacement) for its fees, in the words of geth, Anvil, Erigon... */
function feesTooLow(error: unknown): boolean {
  return /underpriced|fee too low|less than (the )?block base fee|fee cap|feecap|insufficient fee/i.test(
    String(error),
  )
}

/**
 * The gas limit for an estimate. The estimate is of the chain as it is now; the transaction runs on the
 * chain as it is when mined, and that can cost more: a token balance going from zero to non-zero costs
 * 17,100 gas more than the non-zero balance the estimate saw (a settlement that emptied the collection
 * address was mined first, and a relay estimated before it ran out of gas). Unused gas is not charged.
 */
const withGasHeadroom = (estimate: bigint) => estimate + estimate / 10n + 25_000n

/** Nodes accept a replacement only with both fees at least 10 % higher; 12.5 % is geth's own step. */
const bump = (fee: bigint) => (fee * 1125n) / 1000n + 1n

/**
 * Signs, records and broadcasts a replacement of `row` (same nonce, same call, higher fees: the bumped
 * old fees or today's estimate, whichever is higher, up to `chain.feeBump.maxFeePerGas`). Every hash
 * stays recorded, so whichever one is mined is found. Undefined when the cap leaves no room to bump.
 */
async function replaceWithHigherFees(
  db: Db,
  chain: EvmChain,
  row: EvmTransactionRow,
): Promise<{ hash: Hash; row: EvmTransactionRow } | undefined> {
  const old = parseTransaction(row.raw as Hex)
  if (old.type !== 'eip1559' || old.maxFeePerGas === undefined || old.maxPriorityFeePerGas === undefined)
    return undefined
  const cap = chain.feeBump.maxFeePerGas
  const estimate = await chain.publicClient.estimateFeesPerGas()
  const maxFeePerGas = min(max(bump(old.maxFeePerGas), estimate.maxFeePerGas), cap)
  const maxPriorityFeePerGas = min(
    max(bump(old.maxPriorityFeePerGas), estimate.maxPriorityFeePerGas),
    maxFeePerGas,
  )
  if (maxFeePerGas < bump(old.maxFeePerGas) || maxPriorityFeePerGas < bump(old.maxPriorityFeePerGas))
    return undefined
  const raw = await chain.walletClient.signTransaction({
    account: chain.executor,
    chain: chain.walletClient.chain,
    type: 'eip1559',
    to: old.to ?? null,
    data: old.data,
    value: old.value ?? 0n,
    gas: old.gas,
    nonce: Number(row.nonce),
    maxFeePerGas,
    maxPriorityFeePerGas,
  } as Parameters<typeof chain.walletClient.signTransaction>[0])
  const hash = keccak256(raw)
  const now = new Date()
  const replacement = await db
    .insertInto('evm_transactions')
    .values({ ...withoutId(row), hash, raw, status: 'sent', created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow()
  try {
    await broadcast(chain, raw)
  } catch (error) {
    // Still too low for this node: recorded and unknown to it, so the next attempt bumps again.
    if (!feesTooLow(error)) throw error
  }
  return { hash, row: replacement }
}

function withoutId({ id: _id, ...rest }: EvmTransactionRow) {
  return rest
}

const max = (a: bigint, b: bigint) => (a > b ? a : b)
const min = (a: bigint, b: bigint) => (a < b ? a : b)

/**
 * Sends (or finds) a step's transaction and waits for its receipt up to `timeoutMs`, looking again
 * every `chain.feeBump.afterMs` so that a stuck transaction is replaced within the same run.
 * Undefined receipt: nothing mined yet (the caller hands the job back; the hashes stay recorded).
 */
export async function sendAndWait(
  chain: EvmChain,
  send: () => Promise<Hash>,
  options: { timeoutMs: number; signal: AbortSignal },
): Promise<{ hash: Hash; receipt: TransactionReceipt | undefined }> {
  const deadline = Date.now() + options.timeoutMs
  for (;;) {
    const hash = await send()
    const left = deadline - Date.now()
    const receipt = await waitForReceipt(chain, hash, {
      timeoutMs: Math.max(0, Math.min(left, chain.feeBump.afterMs)),
      signal: options.signal,
    })
    if (receipt || Date.now() >= deadline) return { hash, receipt }
  }
}

/**
 * What to throw for `error` from sending or watching (payment, purpose)'s transaction: once one may be out
 * there (a row still `sent`), any failure (a lost send answer, receipts unreadable: timeouts, 429s,
 * malformed answers) is `RetryLater`, so the job never gives up on a transaction that may land.
 */
export async function retryWhileInFlight(
  db: Db,
  paymentId: string,
  purpose: EvmTxPurpose,
  error: unknown,
): Promise<unknown> {
  if (error instanceof RetryLater) return error
  const row = await db
    .selectFrom('evm_transactions')
    .select('id')
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', purpose)
    .where('status', '=', 'sent')
    .executeTakeFirst()
  return row === undefined ? error : new RetryLater(String(error))
}

export async function setTxStatus(db: Db, hash: string, status: EvmTxStatus): Promise<void> {
  await db
    .updateTable('evm_transactions')
    .set({ status, updated_at: new Date() })
    .where('hash', '=', hash)
    .execute()
  if (status !== 'succeeded' && status !== 'reverted') return
  // Its nonce is taken: the other transactions signed for that nonce (replacements) can never land.
  await sql`
    UPDATE evm_transactions other SET status = 'dropped', updated_at = now()
    FROM evm_transactions mined
    WHERE mined.hash = ${hash} AND other.chain_id = mined.chain_id AND other.sender = mined.sender
      AND other.nonce = mined.nonce AND other.hash <> mined.hash AND other.status = 'sent'`.execute(db)
}

/**
 * Polls for the receipt until `timeoutMs`; undefined when there is none yet, or not yet under
 * `chain.confirmations` blocks (re-read each time, so one removed by a reorg is not counted).
 */
export async function waitForReceipt(
  chain: EvmChain,
  hash: Hash,
  options: { timeoutMs: number; signal: AbortSignal },
): Promise<TransactionReceipt | undefined> {
  const deadline = Date.now() + options.timeoutMs
  // Fast nodes (and L2 sequencers) have the receipt within milliseconds: start short, back off to the interval.
  let waitMs = Math.min(25, chain.pollingIntervalMs)
  for (;;) {
    options.signal.throwIfAborted()
    const receipt = await findReceipt(chain, hash)
    if (receipt && (await confirmed(chain, receipt))) return receipt
    if (Date.now() >= deadline) return undefined
    await sleep(waitMs, options.signal)
    waitMs = Math.min(waitMs * 2, chain.pollingIntervalMs)
  }
}

async function confirmed(chain: EvmChain, receipt: TransactionReceipt): Promise<boolean> {
  if (chain.confirmations <= 1) return true
  const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 })
  return head - receipt.blockNumber + 1n >= BigInt(chain.confirmations)
}

async function findReceipt(chain: EvmChain, hash: Hash): Promise<TransactionReceipt | undefined> {
  try {
    return await chain.publicClient.getTransactionReceipt({ hash })
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return undefined
    throw error
  }
}

async function chainState(chain: EvmChain, hash: Hash): Promise<'mined' | 'pending' | 'unknown'> {
  if (await findReceipt(chain, hash)) return 'mined'
  const tx = await findTransaction(chain, hash)
  if (!tx) return 'unknown'
  // In a block although no receipt is served yet (a lagging or load-balanced RPC): never replace it.
  return tx.blockNumber === null ? 'pending' : 'mined'
}

/** Whether the node has the transaction at all (mined or in its pool). */
export async function isKnownTransaction(chain: EvmChain, hash: Hash): Promise<boolean> {
  return (await findTransaction(chain, hash)) !== undefined
}

async function findTransaction(chain: EvmChain, hash: Hash) {
  try {
    return await chain.publicClient.getTransaction({ hash })
  } catch (error) {
    if (error instanceof TransactionNotFoundError) return undefined
    throw error
  }
}

/** A node that already has these bytes says so in many ways; all of them mean "it is in". */
async function broadcast(chain: EvmChain, raw: Hex): Promise<void> {
  try {
    await chain.publicClient.sendRawTransaction({ serializedTransaction: raw })
  } catch (error) {
    if (/already known|known transaction|already imported/i.test(String(error))) return
    throw error
  }
}

async function withExecutorLock<T>(db: Db, chain: EvmChain, fn: () => Promise<T>): Promise<T> {
  const key = `caipay.evm.executor:${chain.caip2}:${chain.executor.address.toLowerCase()}`
  return db.connection().execute(async (connection) => {
    await sql`SELECT pg_advisory_lock(hashtextextended(${key}, 0))`.execute(connection)
    try {
      return await fn()
    } finally {
      await sql`SELECT pg_advisory_unlock(hashtextextended(${key}, 0))`.execute(connection)
    }
  })
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
