import { isFinalStatus } from '../../contract/common.js'
import type { StatusResponse } from '../../contract/payment.js'
import type { PaymentRow } from '../store/schema.js'

/** A final payment's status answer, with what a status read checks: the merchant and the mode. */
export interface KnownFinal {
  merchantId: string
  mode: PaymentRow['mode']
  answer: StatusResponse
}

/**
 * The status answers of final payments this process has seen (a fast path of FastPath, fastPath.ts).
 * A final payment never moves again (paymentTransitions has no move out of a final state, and its tx id
 * is written with its success), so its answer stays the same for good: every later poll is answered
 * without a round trip. Bounded: past `limit` entries the oldest goes; a limit of 0 keeps nothing.
 * A payment changed by hand in the database (or a restored backup) is seen by a process that kept its
 * answer only once it restarts (or with `fastPaths: false`).
 */
export class FinalStatuses {
  readonly #answers = new Map<string, KnownFinal>()
  constructor(private readonly limit: number) {}

  /** The kept answer, or undefined: not known, read the payment. */
  get(paymentId: string): KnownFinal | undefined {
    return this.#answers.get(paymentId)
  }

  /** Keeps `known` when its answer is final (anything else may still change). Call once committed. */
  remember(paymentId: string, known: KnownFinal): void {
    if (this.limit === 0 || !isFinalStatus(known.answer.status)) return
    if (!this.#answers.delete(paymentId) && this.#answers.size >= this.limit)
      this.#answers.delete(this.#answers.keys().next().value!)
    this.#answers.set(paymentId, Object.freeze({ ...known, answer: Object.freeze({ ...known.answer }) }))
  }
}
