import { expect } from 'vitest'
import type { Db } from '../src/server/store/db.js'

/**
 * What the push suites read back about deposits on either chain (test/evm/push.test.ts,
 * test/solana-live/push.test.ts, test/evm/stray.test.ts): a payment's deposits, and the ledger's proof
 * that each went back to its sender once.
 */

/** The payment's deposits, oldest first. */
export function depositsOf(db: Db, paymentId: string) {
  return db
    .selectFrom('deposits')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .orderBy('created_at')
    .orderBy('id')
    .execute()
}

const refundStages = ['deposit.held', 'deposit.refunding', 'deposit.refunded']

/**
 * The ledger booked nothing for the payment but its `deposits` deposits each sent back once: held, then
 * refunding, then refunded. Their entries may interleave, so the order is checked as counts: at no point
 * more deposits refunding than held, or refunded than refunding.
 */
export async function expectEachSentBackOnce(db: Db, paymentId: string, deposits: number): Promise<void> {
  const entries = await db
    .selectFrom('ledger_entries')
    .select('flow')
    .where('payment_id', '=', paymentId)
    .orderBy('id')
    .execute()
  const flows = entries.map((entry) => entry.flow)
  expect([...flows].sort()).toEqual(
    refundStages.flatMap((stage) => Array<string>(deposits).fill(stage)).sort(),
  )
  const reached = [0, 0, 0]
  for (const flow of flows) {
    reached[refundStages.indexOf(flow)]! += 1
    expect(reached[1]! <= reached[0]! && reached[2]! <= reached[1]!, flows.join(', ')).toBe(true)
  }
}
