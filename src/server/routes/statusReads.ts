import type { FastifyReply, FastifyRequest } from 'fastify'
import * as z from 'zod/mini'
import type { StatusResponse } from '../../contract/payment.js'
import { PreferHeader, preferredWaitSeconds } from '../../contract/status.js'
import { header } from '../auth.js'
import { fail } from '../errors.js'
import type { StatusChanges } from '../payments/statusChanges.js'

/**
 * A status read with `Prefer: wait=<seconds>` honoured (RFC 7240): a payment not final yet is read again
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
  const waitMs = requestedWaitMs(request, changes.maxWaitMs)
  if (!waitMs || !changes.available) return read()
  const watch = changes.watch(paymentId)
  const gone = new AbortController()
  const onClose = () => gone.abort()
  reply.raw.once('close', onClose)
  try {
    const first = await read()
    if (first.isFinal) return first
    await watch.until(waitMs, gone.signal)
    const answer = await read()
    reply.header('preference-applied', `wait=${Math.ceil(waitMs / 1000)}`)
    // Woken by the shutdown: a keep-alive connection would hold the server's close until it times out.
    if (changes.closed) reply.header('connection', 'close')
    return answer.isFinal ? answer : { ...answer, pollInMs: 0 }
  } finally {
    watch.stop()
    reply.raw.off('close', onClose)
  }
}

/** How long the request asks to be held, capped at `maxMs`; undefined without a `wait` preference. */
function requestedWaitMs(request: FastifyRequest, maxMs: number): number | undefined {
  const prefer = header(request, 'prefer')
  if (prefer === undefined) return undefined
  if (!z.safeParse(PreferHeader, prefer).success)
    fail('invalid_params', 'Prefer must be RFC 7240 preferences, e.g. "wait=10".')
  const seconds = preferredWaitSeconds(prefer)
  return seconds === undefined ? undefined : Math.min(seconds * 1000, maxMs)
}
