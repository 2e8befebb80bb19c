import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'
import type { WebhookEvent } from '../../src/contract/webhooks.js'

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
