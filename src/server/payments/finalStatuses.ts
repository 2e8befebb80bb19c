import { isFinalStatus } from '../../contract/common.js'
import type { StatusResponse } from '../../contract/payment.js'
import type { Db } from '../store/db.js'
import { processMemo } from '../store/processMemo.js'
import type { PaymentRow } from '../store/schema.js'

/**
 * The status answers of final payments this process has seen, per database. A final payment never moves
 * again (paymentTransitions has no move out of a final state) and its tx id is written with its success,
 * so its answer stays the same for good: a wallet's poll after a confirm that finished the payment (test
 * mode's does), and every later poll, is answered without a round trip. Only what a status read checks is
 * kept with it: the merchant and the mode. Bounded: past `finalStatusLimit` entries the oldest goes.
 * A payment changed by hand in the database (or a restored backup) is seen by a process that kept its
 * answer only once it restarts.
 */
export interface KnownFinal {
  merchantId: string
  mode: PaymentRow['mode']
  answer: StatusResponse
}

export const finalStatusLimit = 20_000
const finals = processMemo<KnownFinal>(finalStatusLimit)

export function knownFinal(db: Db, paymentId: string): KnownFinal | undefined {
  return finals.get(db, paymentId)
}

/**
 * Keeps `known` when its answer is final (anything else may still change, and is not kept). Inside a
 * transaction nothing is kept: it is not committed yet.
 */
export function rememberFinal(db: Db, paymentId: string, known: KnownFinal): void {
  if (!isFinalStatus(known.answer.status)) return
  finals.set(db, paymentId, Object.freeze({ ...known, answer: Object.freeze({ ...known.answer }) }))
}
