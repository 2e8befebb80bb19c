import type { Transaction } from 'kysely'
import type { UnsettledCollection } from '../ledger/entries.js'
import { type Db, inTransaction } from '../store/db.js'
import type { Database, PaymentRow } from '../store/schema.js'
import type { FinalStatuses } from './finalStatuses.js'
import { succeedPayments } from './lifecycle.js'
import type { BatchedSettlement } from './settlementItems.js'
import { statusJson } from './views.js'

export interface SucceededPayment {
  paymentId: string
  /** The chain's transaction that paid it. */
  txId: string
  /** Its settlement, when the merchant gets one. */
  settlement?: BatchedSettlement | undefined
  /** Collected with no settlement step (the ledger books it as its partner's float). */
  unsettled?: UnsettledCollection | undefined
  /**
   * The chain whose executor fee reservation of the payment (payments/relayGuards.ts) is given back in
   * the same transaction, instead of in a statement of its own before it (a FastPath, fastPath.ts).
   */
  releaseReservation?: string | undefined
}

/**
 * Finishes the payments whose transactions landed together (a block's, which the chain's watcher wakes
 * at once) in ONE database transaction: their transactions marked as the chain's table keeps them
 * and their fee reservations given back (`record`), then `processing -> succeeded` for all of them with their settlement items. Asked for while
 * one is being written, the next ones wait and go together in the next (a group commit).
 */
export interface PaymentFinisher {
  /** The payment as succeeded; undefined when it was no longer processing. */
  succeed(payment: SucceededPayment): Promise<PaymentRow | undefined>
}

interface Queued {
  payment: SucceededPayment
  resolve(row: PaymentRow | undefined): void
  reject(error: unknown): void
}

/** Payments per database transaction: bounds one statement's size. */
const maxGroup = 500

export function createPaymentFinisher(
  db: Db,
  /** What the chain writes with the group: its transactions' statuses, reservations given back. */
  record: (trx: Transaction<Database>, payments: readonly SucceededPayment[]) => Promise<void>,
  /**
   * The app's final answers (FastPath, fastPath.ts): what the group's statement returned is kept once
   * committed, so the held status reads its notification wakes answer without reading the payment again.
   */
  finals?: FinalStatuses,
): PaymentFinisher {
  const queue: Queued[] = []
  let scheduled = false

  const write = async (group: readonly Queued[]) => {
    const rows = await inTransaction(db, async (trx) => {
      await record(
        trx,
        group.map((q) => q.payment),
      )
      return succeedPayments(
        trx,
        group.map((q) => q.payment),
        new Date(),
      )
    })
    for (const row of rows)
      finals?.remember(row.id, { merchantId: row.merchant_id, mode: row.mode, answer: statusJson(row) })
    return rows
  }

  async function flush(): Promise<void> {
    try {
      while (queue.length > 0) {
        const group = queue.splice(0, maxGroup)
        try {
          const rows = new Map((await write(group)).map((row) => [row.id, row]))
          for (const q of group) q.resolve(rows.get(q.payment.paymentId))
        } catch (error) {
          if (group.length === 1) {
            group[0]!.reject(error)
            continue
          }
          // One payment's write must not fail the others': each alone, so only its own job retries.
          for (const q of group) {
            await write([q]).then(
              ([row]) => q.resolve(row),
              (own: unknown) => q.reject(own),
            )
          }
        }
      }
    } finally {
      scheduled = false
    }
  }

  return {
    succeed(payment) {
      return new Promise((resolve, reject) => {
        queue.push({ payment, resolve, reject })
        if (scheduled) return
        scheduled = true
        // After the other jobs the same block woke have queued theirs.
        setImmediate(() => void flush())
      })
    },
  }
}
