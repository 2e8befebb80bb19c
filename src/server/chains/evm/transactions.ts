import { sql } from 'kysely'
import {
  type Address,
  type Hash,
  type Hex,
  keccak256,
  TransactionNotFoundError,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from 'viem'
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
    for (const row of prior) {
      // Landed and recorded, but the caller died before its own next write (the payment row): that
      // transaction is the step. Signing anew would pay twice (or, for a relay, fail a paid payment
      // because its authorization is already used).
      if (row.status === 'succeeded') return { hash: row.hash as Hash, row }
      if ((await chainState(chain, row.hash as Hash)) !== 'unknown') return { hash: row.hash as Hash, row }
      const used = await chain.publicClient.getTransactionCount({
        address: chain.executor.address,
        blockTag: 'latest',
      })
      if (BigInt(row.nonce) >= BigInt(used)) {
        await broadcast(chain, row.raw as Hex)
        return { hash: row.hash as Hash, row }
      }
      await setTxStatus(db, row.hash, 'dropped')
    }

    await p.beforeSign?.()
    const nonce = await chain.publicClient.getTransactionCount({
      address: chain.executor.address,
      blockTag: 'pending',
    })
    const request = await chain.walletClient.prepareTransactionRequest({
      account: chain.executor,
      chain: chain.walletClient.chain,
      to: p.to,
      data: p.data,
      nonce,
    })
    const raw = await chain.walletClient.signTransaction(request)
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

/** Rows still in flight for (payment, purpose): the chain decides what happened to them. */
export async function hasSentTransaction(db: Db, paymentId: string, purpose: EvmTxPurpose): Promise<boolean> {
  const row = await db
    .selectFrom('evm_transactions')
    .select('id')
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', purpose)
    .where('status', '=', 'sent')
    .executeTakeFirst()
  return row !== undefined
}

export async function setTxStatus(db: Db, hash: string, status: EvmTxStatus): Promise<void> {
  await db
    .updateTable('evm_transactions')
    .set({ status, updated_at: new Date() })
    .where('hash', '=', hash)
    .execute()
}

/** Polls for the receipt until `timeoutMs`; undefined when there is none yet. */
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
    if (receipt) return receipt
    if (Date.now() >= deadline) return undefined
    await sleep(waitMs, options.signal)
    waitMs = Math.min(waitMs * 2, chain.pollingIntervalMs)
  }
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
  return (await isKnownTransaction(chain, hash)) ? 'pending' : 'unknown'
}

/** Whether the node has the transaction at all (mined or in its pool). */
export async function isKnownTransaction(chain: EvmChain, hash: Hash): Promise<boolean> {
  try {
    await chain.publicClient.getTransaction({ hash })
    return true
  } catch (error) {
    if (error instanceof TransactionNotFoundError) return false
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
