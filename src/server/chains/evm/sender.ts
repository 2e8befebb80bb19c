import { type Insertable, sql } from 'kysely'
import { type Address, type Hex, keccak256, type TransactionSerializableEIP1559 } from 'viem'
import { type Fence, FenceLost, holdFences } from '../../jobs/fence.js'
import { type FeeReservation, reserveExecutorFees } from '../../payments/relayGuards.js'
import { type Db, newTransaction } from '../../store/db.js'
import type { EvmChain } from './chain.js'
import type { EvmTransactionRow, EvmTransactionsTable, EvmTxPurpose } from './schema.js'

export interface NewTransaction {
  paymentId: string
  purpose: EvmTxPurpose
  /** The refund a `refund` transaction pays. */
  refundId?: string
  /** Which step of several of one purpose (schema.ts `step`). */
  step?: string
  to: Address
  data: Hex
  /** The gas limit to sign with (an estimate with headroom). */
  gas: bigint
  /**
   * The fees to sign with, when the caller simulated the transaction with them (sendOnce's `beforeSign`);
   * else the key's current fees.
   */
  fees?: EvmFees
  /**
   * The job step's claim (jobs/fence.ts): numbered, signed and recorded only while it holds, in the same
   * database transaction; otherwise `record` rejects with FenceLost and nothing exists to broadcast.
   */
  fence?: Fence
  /**
   * The send's executor fee reservation (payments/relayGuards.ts), taken in the same database transaction
   * under the key's lock, for the whole group in one call, before it is signed (fastPath.ts): refused,
   * `record` rejects with the guard's error (SendReverted, PayerCoolingDown, GasBudgetExhausted) and
   * nothing is signed or recorded for it; the group's other sends go on.
   */
  reservation?: FeeReservation
}

/**
 * The one sender of an executor key in this process. Transactions asked for at about the same time are
 * numbered and recorded together: under the key's PostgreSQL advisory lock, on one connection and in one
 * database transaction, each gets the next nonce (past the local counter, the chain's pending count and
 * every nonce recorded by any instance), is signed and inserted; only after the commit are they broadcast.
 * A transaction whose step lost its claim (its fence) is refused in that same database transaction.
 * No RPC call runs under the lock and no connection is held while waiting for another, so the pool size
 * never matters for progress. A crash after the commit leaves `sent` rows the next look re-broadcasts.
 */
export interface EvmSender {
  /** Records a new signed transaction (status `sent`); the caller broadcasts it. */
  record(transaction: NewTransaction): Promise<EvmTransactionRow>
  /** Today's EIP-1559 fees, read once per block (or polling interval) and shared by every transaction. */
  fees(): Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }>
  /**
   * The gas of a call shape (`key`: contract and function), estimated once per block (or polling
   * interval) and shared: the calls of one shape cost the same but for storage first written, which
   * the signed limit's headroom covers. A failed shared estimate leaves each caller to its own.
   */
  gas(key: string, estimate: () => Promise<bigint>): Promise<bigint>
  /** A nonce was refused as too low: read the chain's count again before numbering the next ones. */
  forgetChainNonce(): void
  /** Waits for room under the in-flight cap; the returned function gives the room back. */
  slot(): Promise<() => void>
}

export interface EvmFees {
  maxFeePerGas: bigint
  maxPriorityFeePerGas: bigint
}

interface Queued {
  transaction: NewTransaction
  resolve(row: EvmTransactionRow): void
  reject(error: unknown): void
}

/** Rows numbered per database transaction: bounds one lock hold (signing is ~1 ms each). */
const maxGroup = 256

/** Signing time between two turns given back to the event loop, ms. */
const signingSliceMs = 10

export function createEvmSender(db: Db, chain: EvmChain): EvmSender {
  const sender = chain.executor.address.toLowerCase()
  const lockKey = `caipay.evm.executor:${chain.caip2}:${sender}`
  const queue: Queued[] = []
  let draining = false
  let localNext = 0n
  let chainCount: { value: Promise<bigint>; at: number } | undefined
  let feeCache:
    | { value: Promise<{ maxFeePerGas: bigint; maxPriorityFeePerGas: bigint }>; at: number }
    | undefined
  const freshMs = Math.max(100, chain.pollingIntervalMs)
  let inFlight = 0
  const gasCache = new Map<string, { value: Promise<bigint>; at: number }>()
  const waitingForRoom: (() => void)[] = []

  function pendingCount(): Promise<bigint> {
    if (!chainCount || Date.now() - chainCount.at > freshMs) {
      const value = chain.publicClient
        .getTransactionCount({ address: chain.executor.address, blockTag: 'pending' })
        .then(BigInt)
      chainCount = { value, at: Date.now() }
      value.catch(() => {
        if (chainCount?.value === value) chainCount = undefined
      })
    }
    return chainCount.value
  }

  async function drain(): Promise<void> {
    draining = true
    try {
      while (queue.length > 0) {
        const group = queue.splice(0, maxGroup)
        try {
          // Read before the lock is taken: the lock guards only numbering and recording.
          const [fees, counted] = await Promise.all([currentFees(), pendingCount()])
          const rows = await numberAndRecord(group, fees, counted)
          for (const [i, queued] of group.entries()) {
            const row = rows[i]!
            if (row instanceof Error) queued.reject(row)
            else queued.resolve(row)
          }
        } catch (error) {
          for (const queued of group) queued.reject(error)
        }
      }
    } finally {
      draining = false
    }
  }

  async function numberAndRecord(
    group: Queued[],
    fees: { maxFeePerGas: bigint; maxPriorityFeePerGas: bigint },
    counted: bigint,
  ): Promise<(EvmTransactionRow | Error)[]> {
    return newTransaction(db, async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtextextended(${lockKey}, 0))`.execute(trx)
      const fences = group.flatMap(({ transaction }) => (transaction.fence ? [transaction.fence] : []))
      const held = await holdFences(trx, fences)
      const fenceLost = (t: NewTransaction) =>
        t.fence && !held.has(t.fence.jobId) ? new FenceLost(t.fence) : undefined
      // Only the sends still held reserve: a lost one is not signed, so it spends nothing.
      const reserving = group.filter(({ transaction: t }) => t.reservation && !fenceLost(t))
      const verdicts = await reserveExecutorFees(
        trx,
        chain.caip2,
        reserving.map(({ transaction }) => transaction.reservation!),
      )
      const refused = new Map(reserving.map(({ transaction }, i) => [transaction, verdicts[i]]))
      const lost = (t: NewTransaction) => fenceLost(t) ?? refused.get(t)
      const recorded = await trx
        .selectFrom('evm_transactions')
        .select(sql<string | null>`max(nonce)`.as('nonce'))
        .where('chain_id', '=', chain.caip2)
        .where('sender', '=', sender)
        .executeTakeFirst()
      let nonce = max(max(localNext, counted), recorded?.nonce == null ? 0n : BigInt(recorded.nonce) + 1n)
      const now = new Date()
      const values: Insertable<EvmTransactionsTable>[] = []
      let slice = Date.now()
      for (const { transaction } of group) {
        if (lost(transaction)) continue
        // A signature is about a millisecond of CPU: let requests (status reads) in between slices of
        // them. Not between each two: a busy event loop makes every turn slow, and the lock (and the
        // whole group, and the next one waiting) would wait for as many turns as there are signatures.
        if (Date.now() - slice >= signingSliceMs) {
          await new Promise((resolve) => setImmediate(resolve))
          slice = Date.now()
        }
        const raw = await signTransaction(chain, {
          type: 'eip1559',
          chainId: chain.chainId,
          to: transaction.to,
          data: transaction.data,
          gas: transaction.gas,
          nonce: Number(nonce),
          ...(transaction.fees ?? fees),
        })
        values.push({
          payment_id: transaction.paymentId,
          purpose: transaction.purpose,
          refund_id: transaction.refundId ?? null,
          step: transaction.step ?? null,
          chain_id: chain.caip2,
          sender,
          nonce,
          hash: keccak256(raw),
          raw,
          status: 'sent' as const,
          created_at: now,
          updated_at: now,
        })
        nonce += 1n
      }
      const rows =
        values.length === 0
          ? []
          : await trx.insertInto('evm_transactions').values(values).returningAll().execute()
      localNext = nonce
      // RETURNING keeps the VALUES order in practice, but nothing promises it: match by hash.
      const byHash = new Map(rows.map((row) => [row.hash, row]))
      let next = 0
      return group.map(({ transaction }) => lost(transaction) ?? byHash.get(values[next++]!.hash as string)!)
    })
  }

  function currentFees() {
    if (!feeCache || Date.now() - feeCache.at > freshMs) {
      const value = chain.publicClient.estimateFeesPerGas()
      feeCache = { value, at: Date.now() }
      value.catch(() => {
        if (feeCache?.value === value) feeCache = undefined
      })
    }
    return feeCache.value
  }

  return {
    record(transaction) {
      return new Promise((resolve, reject) => {
        queue.push({ transaction, resolve, reject })
        if (!draining) void drain()
      })
    },
    fees: currentFees,
    async gas(key, estimate) {
      const cached = gasCache.get(key)
      if (cached && Date.now() - cached.at <= freshMs) {
        try {
          return await cached.value
        } catch {
          // Another caller's estimate failed (its own call refused): estimate this one itself.
        }
      }
      const value = estimate()
      gasCache.set(key, { value, at: Date.now() })
      value.catch(() => {
        if (gasCache.get(key)?.value === value) gasCache.delete(key)
      })
      return value
    },
    forgetChainNonce() {
      chainCount = undefined
      localNext = 0n
    },
    async slot() {
      while (inFlight >= chain.maxInFlight) await new Promise<void>((resolve) => waitingForRoom.push(resolve))
      inFlight += 1
      let released = false
      return () => {
        if (released) return
        released = true
        inFlight -= 1
        waitingForRoom.shift()?.()
      }
    },
  }
}

/** Signs locally: the account's own signer, no RPC (a wallet client would ask the node for its chain id). */
export function signTransaction(chain: EvmChain, transaction: TransactionSerializableEIP1559): Promise<Hex> {
  const sign = chain.executor.signTransaction
  if (!sign) throw new Error(`The executor of ${chain.caip2} cannot sign transactions locally.`)
  return sign(transaction)
}

const max = (a: bigint, b: bigint) => (a > b ? a : b)
