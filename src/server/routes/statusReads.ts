import type { FastifyReply, FastifyRequest } from 'fastify'
import type { StatusResponse } from '../../contract/payment.js'
import { preferredWaitSeconds } from '../../contract/status.js'
import { header } from '../auth.js'
import { addVary } from '../cors.js'
import { fail } from '../errors.js'
import type { StatusChanges } from '../payments/statusChanges.js'

/**
 * A status read with `Prefer: wait=<seconds>` honoured (RFC 7240): a payment not final yet is answered
 * when its status changes (or after min(wait, statusWaitMaxMs)), and that answer says so with
 * `Preference-Applied: wait=<seconds>` and `pollInMs: 0` (the waiting is done: ask again at once). Without
 * the preference, or when the server offers no waiting now, it is one read, as before.
 */
export async function statusRead(
  request: FastifyRequest,
  reply: FastifyReply,
  changes: StatusChanges,
  paymentId: string,
  read: () => Promise<StatusResponse>,
): Promise<StatusResponse> {
  addVary(reply, 'Prefer')
  const waitMs = requestedWaitMs(request, changes.maxWaitMs)
  if (!waitMs || !changes.available) return read()
  const deadline = Date.now() + waitMs
  const gone = new AbortController()
  const onClose = () => gone.abort()
  reply.raw.once('close', onClose)
  // Registered before each read, so a change committed between the read and the wait still wakes it.
  let watch = changes.watch(paymentId)
  try {
    const first = await read()
    if (first.isFinal) return first
    let answer = first
    // Read again on each wake-up and at least every `recheckMs`: a change feed that died without an error
    // (a connection dropped by the network) then costs seconds, not the whole wait.
    while (answer.status === first.status && !gone.signal.aborted && !changes.closed) {
      const left = deadline - Date.now()
      if (left <= 0) break
      await watch.until(Math.min(left, recheckMs), gone.signal)
      watch.stop()
      watch = changes.watch(paymentId)
      answer = await read()
    }
    reply.header('preference-applied', `wait=${Math.ceil(waitMs / 1000)}`)
    return answer.isFinal ? answer : { ...answer, pollInMs: 0 }
  } finally {
    watch.stop()
    reply.raw.off('close', onClose)
  }
}

/** The longest a held read goes without reading its payment again, whatever the change feed says. */
const recheckMs = 5_000

/**
 * How long the request asks to be held, capped at `maxMs`; undefined without a `wait` preference. A
 * `Prefer` the server cannot read is ignored, as RFC 7240 asks of preferences it does not understand.
 */
function requestedWaitMs(request: FastifyRequest, maxMs: number): number | undefined {
  const prefer = header(request, 'prefer')
  // As every header the API reads (auth.ts): printable ASCII; tabs may separate its parts.
  if (prefer !== undefined && !/^[\t\x20-\x7e]*$/.test(prefer))
    fail('header_not_ascii', 'Header prefer must be printable ASCII.')
  const seconds = prefer === undefined ? undefined : preferredWaitSeconds(prefer)
  return seconds === undefined ? undefined : Math.min(seconds * 1000, maxMs)
}
