import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { flushTracing, startTracing, tracingOn } from '../../src/server/metrics/tracing.js'
import { anvilPrivateKeys } from '../anvil.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv } from '../evm/support.js'
import { type OtlpReceiver, type ReceivedSpan, startOtlpReceiver } from './otlpReceiver.js'

/**
 * OpenTelemetry traces of live EIP-3009 payments on Anvil, exported over OTLP/HTTP to a receiver in
 * this test: each payment is one trace from the confirm request through the domain, the relay job and
 * its chain send to the settlement that finishes it, with the payment id on every span of it.
 */
let receiver: OtlpReceiver
let env: EvmEnv
let buyer: Buyer
beforeAll(async () => {
  receiver = await startOtlpReceiver()
  // The standard OTel environment, as an operator sets it; set before the app is built (its hooks).
  process.env.OTEL_EXPORTER_OTLP_ENDPOINT = receiver.endpoint
  process.env.OTEL_BSP_SCHEDULE_DELAY = '100'
  process.env.OTEL_SERVICE_NAME = 'caipay-under-test'
  expect(await startTracing()).toBe(true)
  env = await createEvmEnv()
  buyer = await env.buyer(2)
  env.startRunner()
}, 60_000)
afterAll(async () => {
  await env?.close()
  await receiver?.close()
})

const paymentSpans = (paymentId: string) =>
  receiver.spans.filter((span) => span.attributes['caipay.payment_id'] === paymentId)

/** Waits until the receiver holds a span of `paymentId` matching `found` (the batch exports every 100 ms). */
async function waitForSpan(paymentId: string, found: (span: ReceivedSpan) => boolean): Promise<void> {
  const deadline = Date.now() + 15_000
  while (!paymentSpans(paymentId).some(found)) {
    if (Date.now() > deadline)
      throw new Error(`No such span of ${paymentId}: ${JSON.stringify(receiver.spans)}`)
    await flushTracing()
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

const only = (spans: ReceivedSpan[], name: string, purpose?: string) => {
  const matching = spans.filter(
    (span) => span.name === name && (purpose === undefined || span.attributes['caipay.purpose'] === purpose),
  )
  expect(
    matching.map((span) => span.name),
    `${name} ${purpose ?? ''}`,
  ).toHaveLength(1)
  return matching[0]!
}

describe('traces over OTLP/HTTP (OTEL_EXPORTER_OTLP_ENDPOINT set)', () => {
  it('makes each live payment one connected trace: confirm request -> domain -> relay job -> chain send -> settlement', {
    timeout: 120_000,
  }, async () => {
    expect(tracingOn()).toBe(true)
    const payments: string[] = []
    for (const cents of ['1000', '2500']) {
      const { paymentId } = await confirmGasless(env, buyer, cents)
      expect((await env.waitFinal(paymentId)).status).toBe('succeeded')
      await env.waitSettled(paymentId)
      await waitForSpan(paymentId, (span) => span.name === 'job evm.settle')
      await waitForSpan(paymentId, (span) => span.attributes['caipay.purpose'] === 'settle')
      payments.push(paymentId)
    }
    await flushTracing()
    expect(receiver.contentTypes.every((type) => type.startsWith('application/json'))).toBe(true)

    const traceIds = new Set<string>()
    for (const paymentId of payments) {
      const request = only(paymentSpans(paymentId), 'POST /v1/gateway/payment/:id/confirm')
      expect(request.parentSpanId).toBe('')
      expect(request.kind).toBe(2) // SERVER
      expect(request.service).toBe('caipay-under-test')
      expect(request.attributes).toMatchObject({
        'http.request.method': 'POST',
        'http.route': '/v1/gateway/payment/:id/confirm',
        'http.response.status_code': 200,
      })
      traceIds.add(request.traceId)
      const trace = receiver.spans.filter((span) => span.traceId === request.traceId)
      // Every step of this payment past the confirm is in the confirm's trace (other requests about it,
      // like its creation and status reads, are traces of their own).
      for (const span of paymentSpans(paymentId).filter((s) => !/^(GET|POST|PUT|DELETE|PATCH) /.test(s.name)))
        expect(span.traceId, span.name).toBe(request.traceId)
      // The parent links: each span's parent is in the trace, and the confirm request is its only root.
      const ids = new Set(trace.map((span) => span.spanId))
      for (const span of trace)
        if (span !== request) expect(ids.has(span.parentSpanId), `${span.name}'s parent`).toBe(true)

      const domain = only(trace, 'payment.confirm')
      expect(domain.parentSpanId).toBe(request.spanId)
      const relayJob = only(trace, 'job evm.relay')
      expect(relayJob.parentSpanId).toBe(domain.spanId)
      expect(relayJob.attributes).toMatchObject({
        'caipay.job.kind': 'evm.relay',
        'caipay.payment_id': paymentId,
      })
      const relaySend = only(trace, 'evm.send', 'relay')
      expect(relaySend.parentSpanId).toBe(relayJob.spanId)
      expect(relaySend.attributes).toMatchObject({
        'caipay.chain': env.anvil.caip2,
        'caipay.payment_id': paymentId,
      })
      // The relay marked the payment succeeded and queued its settlement: the settlement continues the trace.
      const settleJob = only(trace, 'job evm.settle')
      expect(settleJob.parentSpanId).toBe(relayJob.spanId)
      expect(only(trace, 'evm.send', 'settle').parentSpanId).toBe(settleJob.spanId)
    }
    expect(traceIds.size).toBe(payments.length)

    // No secret and no customer data in any attribute: not the executor's key, not the buyer's address.
    const exported = JSON.stringify(receiver.spans).toLowerCase()
    expect(exported).not.toContain(anvilPrivateKeys[1]!.slice(2).toLowerCase())
    expect(exported).not.toContain(buyer.address.slice(2).toLowerCase())
  })
})
