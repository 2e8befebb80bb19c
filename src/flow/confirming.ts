import { isFinalStatus } from '../contract/statuses.js'
import { isPayError } from '../errors/PayError.js'
import { rebuildAfterExpiredQuote } from './exposure.js'
import { pollUntilFinal } from './poll.js'
import type { FlowRun } from './run.js'
import type { StatusEvent } from './types.js'

/**
 * Sends the recorded results. A final answer ends the flow; otherwise it moves to `polling`, or back to
 * `fetchingActions` when the quote expired and a rebuild is allowed.
 */
export async function confirm(run: FlowRun): Promise<void> {
  const option = run.data.option!
  const body = { optionId: option.id, results: [...run.data.results] }
  let response: StatusEvent & { txId?: string }
  try {
    // A stable key: a resumed flow confirming again gets the first answer, never a second submission.
    const idempotencyKey = `caipay-${run.data.flowId}-confirm-${fingerprint(body.results)}`
    response = await run.call((signal) =>
      run.gateway.confirm(run.paymentId, body, { signal, idempotencyKey }),
    )
  } catch (error) {
    if (isPayError(error, 'quote_expired') && (await rebuildAfterExpiredQuote(run))) return
    // Confirmed earlier by a call whose answer was lost: carry on from the payment's actual status.
    if (!isPayError(error, 'invalid_state')) throw error
    const status = await run.call((signal) => run.getStatus(signal))
    if (status.status === 'requires_action') throw error
    response = status
  }
  run.status(response)
  if (response.isFinal && isFinalStatus(response.status)) {
    let txId = response.txId
    if (response.status === 'succeeded' && txId === undefined) {
      txId = await run.getStatus(run.signal).then(
        (status) => status.txId,
        () => undefined,
      )
    }
    run.finishWithStatus(response.status, txId)
    return
  }
  run.transition('polling')
  await run.checkpointOrReport()
}

/** Reads the payment's status until it is final, then ends the flow with it. */
export async function poll(run: FlowRun): Promise<void> {
  const final = await pollUntilFinal({
    getStatus: (signal) => run.getStatus(signal),
    firstDelayMs: run.data.pollInMs,
    signal: run.signal,
    onStatus: (status) => run.status(status),
    ...(run.config.poll && { options: run.config.poll }),
  })
  run.finishWithStatus(final.status, final.txId)
}

/** FNV-1a of the results: the same results confirm under the same idempotency key, new ones under a new one. */
function fingerprint(results: readonly string[]): string {
  let hash = 0x811c9dc5
  for (const char of results.join('\n')) {
    hash ^= char.charCodeAt(0)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash.toString(36)
}
