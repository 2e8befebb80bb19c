import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'
import { expect } from 'vitest'
import type { WebhookEvent } from '../../src/contract/webhooks.js'
import { startWebhookDispatcher } from '../../src/server/webhooks/dispatch.js'
import type { TestServer } from '../server/harness.js'
import { headers } from '../server/helpers.js'

/** One request as the receiver got it. */
export interface Received {
  headers: IncomingHttpHeaders
  body: string
  event: WebhookEvent
  at: number
}

/**
 * A real HTTP receiver on loopback (port 0). `respond` decides each answer's status (default 200);
 * `hang` keeps requests open without answering. `verify(secret)` checks every request with the
 * `standardwebhooks` package, an implementation nobody here wrote.
 */
export interface Receiver {
  url: string
  received: Received[]
  respond: (received: Received) => number
  hang: boolean
  /** Resolves once `count` requests have arrived (all time, not new ones). */
  waitFor(count: number, timeoutMs?: number): Promise<Received[]>
  close(): Promise<void>
}

export async function startReceiver(path = '/hooks'): Promise<Receiver> {
  const waiters: { count: number; resolve: () => void }[] = []
  const receiver: Receiver = {
    url: '',
    received: [],
    respond: () => 200,
    hang: false,
    async waitFor(count, timeoutMs = 15_000) {
      if (receiver.received.length < count) {
        await new Promise<void>((resolve, reject) => {
          const timer = setTimeout(
            () => reject(new Error(`receiver got ${receiver.received.length} of ${count} requests`)),
            timeoutMs,
          )
          waiters.push({
            count,
            resolve: () => {
              clearTimeout(timer)
              resolve()
            },
          })
        })
      }
      return receiver.received
    },
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
  const server: Server = createServer(async (req, res) => {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks).toString('utf8')
    const received: Received = { headers: req.headers, body, event: JSON.parse(body), at: Date.now() }
    receiver.received.push(received)
    for (const waiter of waiters.filter((w) => receiver.received.length >= w.count)) {
      waiters.splice(waiters.indexOf(waiter), 1)
      waiter.resolve()
    }
    if (receiver.hang) return
    res.writeHead(receiver.respond(received), { 'content-type': 'text/plain' })
    res.end('ok')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`
  return receiver
}

/** Verifies with `standardwebhooks` (throws when it refuses) and returns the parsed event. */
export function verifyWithStandardWebhooks(secret: string, received: Received): WebhookEvent {
  return new Webhook(secret).verify(received.body, received.headers as Record<string, string>) as WebhookEvent
}

/** A receiver subscribed to a live server's events, with the dispatcher that delivers them. */
export interface Subscription {
  receiver: Receiver
  secret: string
  /** This payment's `count` events, verified with `standardwebhooks`, in payment_state_version order. */
  eventsOf(paymentId: string, count: number, timeoutMs?: number): Promise<WebhookEvent[]>
  close(): Promise<void>
}

/** Starts a receiver, registers it as a webhook endpoint with `liveKey`, and dispatches every 50 ms. */
export async function subscribeReceiver(t: TestServer, liveKey: string): Promise<Subscription> {
  const dispatcher = startWebhookDispatcher({ db: t.db, listenUrl: t.databaseUrl, intervalMs: 50 })
  const receiver = await startReceiver()
  const res = await t.request({
    method: 'POST',
    url: '/v1/webhook-endpoints',
    headers: headers(liveKey),
    payload: { url: receiver.url },
  })
  expect(res.statusCode, res.body).toBe(201)
  const secret: string = res.json.secret
  const mine = (paymentId: string) => receiver.received.filter((x) => x.event.data.payment_id === paymentId)
  return {
    receiver,
    secret,
    async eventsOf(paymentId, count, timeoutMs = 20_000) {
      const deadline = Date.now() + timeoutMs
      while (mine(paymentId).length < count && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
      expect(mine(paymentId)).toHaveLength(count)
      return mine(paymentId)
        .map((x) => verifyWithStandardWebhooks(secret, x))
        .sort((a, b) => a.data.payment_state_version - b.data.payment_state_version)
    },
    async close() {
      await dispatcher.stop()
      await receiver.close()
    },
  }
}
