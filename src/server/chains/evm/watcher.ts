import type { Hash, TransactionReceipt } from 'viem'
import { countReorgSeen, observeSendToFinal } from '../../metrics/counters.js'
import type { Db } from '../../store/db.js'
import type { EvmChain } from './chain.js'
import type { EvmTransactionRow, EvmTxPurpose } from './schema.js'

/** What became of a step's transactions while it waited. */
export type WatchOutcome =
  | { kind: 'receipt'; receipt: TransactionReceipt }
  /** None of its transactions is `sent` or `succeeded` (dropped: their nonce went to another): send anew. */
  | { kind: 'gone' }
  | { kind: 'timeout' }

/**
 * One watcher per chain and process: polls the head every `chain.pollingIntervalMs`; per new block it
 * reads the receipts of every transaction the waiting steps have in flight in one JSON-RPC batch (between
 * blocks, only those of the steps that began waiting since the last poll), and wakes each step whose
 * transaction has its confirmations. Fee bumps, re-broadcasts and dropped nonces are the sweep's
 * (`sweepInFlight`), run from the same loop at its own pace, never inside a step. Runs only while some
 * step waits.
 */
export interface EvmWatcher {
  wait(
    paymentId: string,
    purpose: EvmTxPurpose,
    /** `refundId`: a `refund` step's refund (a payment has one such step per refund). */
    options: { timeoutMs: number; signal: AbortSignal; refundId?: string; step?: string },
  ): Promise<WatchOutcome>
}

interface Waiter {
  paymentId: string
  purpose: EvmTxPurpose
  refundId: string | null
  /** Which step of several of one purpose (schema.ts `step`). */
  step: string | null
  /**
   * The newest block seen when the step began waiting (right after its send): where send-to-final counts
   * from. Unknown (nothing read from the chain yet): the head of the watcher's first look.
   */
  since: bigint | undefined
  settle(outcome: WatchOutcome | { kind: 'error'; error: unknown }): void
}

export function createEvmWatcher(
  db: Db,
  chain: EvmChain,
  sweep: (db: Db, chain: EvmChain) => Promise<void>,
): EvmWatcher {
  const waiters = new Set<Waiter>()
  let running = false
  let lastHead: bigint | undefined
  /** Steps that began waiting since the last look: looked at on the next poll, new block or not. */
  const fresh = new Set<Waiter>()
  let lastSweep = 0
  /** Receipts seen for transactions still short of their confirmations: the block each was in. */
  const unconfirmed = new Map<string, string>()
  const sweepEveryMs = Math.max(chain.pollingIntervalMs, Math.min(1_000, chain.feeBump.afterMs / 4))

  async function loop(): Promise<void> {
    running = true
    try {
      while (waiters.size > 0) {
        await tick().catch((error: unknown) => {
          // The node could not answer (timeouts, 429s, malformed answers): the steps decide what that
          // means for them (a transaction in flight is never given up).
          for (const waiter of [...waiters]) waiter.settle({ kind: 'error', error })
        })
        if (waiters.size === 0) break
        await new Promise<void>((resolve) => setTimeout(resolve, chain.pollingIntervalMs))
      }
    } finally {
      running = false
    }
  }

  async function tick(): Promise<void> {
    const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 })
    if (lastHead !== undefined && head < lastHead) countReorgSeen(chain.caip2)
    for (const waiter of waiters) waiter.since ??= head
    if (head !== lastHead) {
      lastHead = head
      fresh.clear()
      await look(head, [...waiters])
    } else if (fresh.size > 0) {
      // No new block: only the newcomers can have anything to find (their transaction landed before
      // they waited), so the others' receipts are not read again.
      const newcomers = [...fresh]
      fresh.clear()
      await look(head, newcomers)
    }
    if (Date.now() - lastSweep >= sweepEveryMs) {
      lastSweep = Date.now()
      await sweep(db, chain)
    }
  }

  async function look(head: bigint, watching: readonly Waiter[]): Promise<void> {
    if (watching.length === 0) return
    const rows = await db
      .selectFrom('evm_transactions')
      .selectAll()
      .where('chain_id', '=', chain.caip2)
      .where('status', 'in', ['sent', 'succeeded'])
      .where(
        'payment_id',
        'in',
        watching.map((w) => w.paymentId),
      )
      .execute()
    const byStep = new Map<string, EvmTransactionRow[]>()
    for (const row of rows) {
      const key = stepKey(row.payment_id, row.purpose, row.refund_id, row.step)
      byStep.set(key, [...(byStep.get(key) ?? []), row])
    }
    const receipts = await receiptsOf(
      chain,
      rows.map((r) => r.hash as Hash),
    )
    for (const waiter of watching) {
      const own = byStep.get(stepKey(waiter.paymentId, waiter.purpose, waiter.refundId, waiter.step)) ?? []
      if (own.length === 0) {
        waiter.settle({ kind: 'gone' })
        continue
      }
      for (const row of own) {
        const receipt = receipts.get(row.hash)
        noteReorg(row.hash, receipt)
        if (receipt && head - receipt.blockNumber + 1n >= BigInt(chain.confirmations)) {
          observeSendToFinal('block', chain.caip2, waiter.purpose, Number(head - (waiter.since ?? head)))
          for (const mine of own) unconfirmed.delete(mine.hash)
          waiter.settle({ kind: 'receipt', receipt })
          break
        }
      }
    }
  }

  /** A receipt seen before that is gone, or now in another block: its block was reorganised away. */
  function noteReorg(hash: string, receipt: TransactionReceipt | undefined): void {
    const before = unconfirmed.get(hash)
    if (before !== undefined && before !== receipt?.blockHash) countReorgSeen(chain.caip2)
    if (receipt) unconfirmed.set(hash, receipt.blockHash)
    else unconfirmed.delete(hash)
  }

  return {
    wait(paymentId, purpose, options) {
      return new Promise<WatchOutcome>((resolve, reject) => {
        const timeout = setTimeout(() => waiter.settle({ kind: 'timeout' }), options.timeoutMs)
        const onAbort = () => waiter.settle({ kind: 'error', error: options.signal.reason })
        const waiter: Waiter = {
          paymentId,
          purpose,
          refundId: options.refundId ?? null,
          step: options.step ?? null,
          since: chain.nodes.highest() || undefined,
          settle(outcome) {
            if (!waiters.delete(waiter)) return
            fresh.delete(waiter)
            clearTimeout(timeout)
            options.signal.removeEventListener('abort', onAbort)
            if (outcome.kind === 'error') reject(outcome.error)
            else resolve(outcome)
          },
        }
        if (options.signal.aborted) return reject(options.signal.reason)
        options.signal.addEventListener('abort', onAbort, { once: true })
        waiters.add(waiter)
        // Looked at on the next poll even without a new block: it may have landed before it was waited for.
        fresh.add(waiter)
        if (!running) void loop()
      })
    },
  }
}

const stepKey = (paymentId: string, purpose: string, refundId: string | null, step: string | null) =>
  `${paymentId}/${purpose}/${refundId ?? ''}/${step ?? ''}`

/** Receipts by hash (lower case), read together (one JSON-RPC batch per `rpcBatchSize`); absent: none yet. */
async function receiptsOf(
  chain: EvmChain,
  hashes: readonly Hash[],
): Promise<Map<string, TransactionReceipt>> {
  const found = await Promise.all(
    hashes.map((hash) =>
      chain.publicClient.getTransactionReceipt({ hash }).catch((error: unknown) => {
        if (error instanceof Error && error.name === 'TransactionReceiptNotFoundError') return undefined
        throw error
      }),
    ),
  )
  const receipts = new Map<string, TransactionReceipt>()
  hashes.forEach((hash, i) => {
    const receipt = found[i]
    if (receipt) receipts.set(hash.toLowerCase(), receipt)
  })
  return receipts
}
