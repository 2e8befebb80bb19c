import type { PaymentStatus } from '../contract/common.js'
import { isFinalStatus } from '../contract/statuses.js'
import { isPayError } from '../errors/PayError.js'
import { afterExpiredQuote } from './exposure.js'
import { pollUntilFinal } from './poll.js'
import { call, checkpointOrReport, type FlowRun, finish, transition } from './run.js'
import type { TerminalState } from './states.js'
import type { StatusEvent } from './types.js'

/**
 * Sends the recorded results. A final answer ends the flow; otherwise it moves to `polling`. When the
 * quote expired, exposure.ts decides: build again, poll a payment an earlier signature already paid,
 * or fail.
 */
export async function confirm(run: FlowRun): Promise<void> {
  const option = run.data.option!
  const body = { optionId: option.id, results: [...run.data.results] }
  let response: StatusEvent & { txId?: string }
  try {
    // A stable key: a resumed flow confirming again gets the first answer, never a second submission.
    const idempotencyKey = `caipay-${run.data.flowId}-confirm-${fingerprint(body.results)}`
    response = await call(run, (signal) =>
      run.config.gateway.confirm(run.paymentId, body, { signal, idempotencyKey }),
    )
  } catch (error) {
    if (isPayError(error, 'quote_expired') && (await afterExpiredQuote(run))) return
    // Confirmed earlier by a call whose answer was lost: carry on from the payment's actual status.
    if (!isPayError(error, 'invalid_state')) throw error
    const status = await call(run, (signal) => getStatus(run, signal))
    if (status.status === 'requires_action') throw error
    response = status
  }
  showStatus(run, response)
  if (response.isFinal && isFinalStatus(response.status)) {
    let txId = response.txId
    if (response.status === 'succeeded' && txId === undefined) {
      txId = await getStatus(run, run.controller.signal).then(
        (status) => status.txId,
        () => undefined,
      )
    }
    finishWithStatus(run, response.status, txId)
    return
  }
  transition(run, 'polling')
  await checkpointOrReport(run)
}

/** Reads the payment's status until it is final, then ends the flow with it. */
export async function poll(run: FlowRun): Promise<void> {
  const final = await pollUntilFinal({
    getStatus: (signal, waitSeconds) => getStatus(run, signal, waitSeconds),
    firstDelayMs: run.data.pollInMs,
    signal: run.controller.signal,
    onStatus: (status) => showStatus(run, status),
    ...(run.config.poll && { options: run.config.poll }),
  })
  finishWithStatus(run, final.status, final.txId)
}

function getStatus(run: FlowRun, signal: AbortSignal, waitSeconds?: number) {
  return run.config.gateway.getStatus(run.paymentId, { signal, waitSeconds })
}

function showStatus(run: FlowRun, status: StatusEvent): void {
  run.data.pollInMs = status.pollInMs
  run.events.emit('status', { status: status.status, isFinal: status.isFinal, pollInMs: status.pollInMs })
}

function finishWithStatus(run: FlowRun, status: PaymentStatus, txId: string | undefined): void {
  const option = run.data.option
  if (status === 'succeeded') {
    finish(run, 'succeeded', {
      ...(txId !== undefined && { txId }),
      ...(option && { optionAmount: option.amount }),
    })
  } else {
    finish(run, status as TerminalState)
  }
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
