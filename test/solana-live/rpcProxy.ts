import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A JSON-RPC pass-through in front of the Solana test cluster, for what a test must see or break on
 * the wire: it counts calls by method, can hold a method's requests (a node that stops answering) and
 * cut them off (the worker's connection dies), or answer a method with an error without forwarding it
 * (an unhealthy node that never took the transaction).
 */
export interface RpcProxy {
  readonly url: string
  calls(method: string): number
  hold(method: string): void
  /** Requests held right now. */
  held(): number
  /** Forwards the held requests and stops holding. */
  release(method: string): void
  /** Destroys the connections of held requests (their callers see a network error). */
  cutHeld(): void
  /** Answers `method` with this JSON-RPC error instead of forwarding; null to forward again. */
  fail(method: string, error: { code: number; message: string } | null): void
  stop(): Promise<void>
}

interface Held {
  method: string
  body: string
  res: ServerResponse
}

export async function startRpcProxy(target: string): Promise<RpcProxy> {
  const counts = new Map<string, number>()
  const holding = new Set<string>()
  const failing = new Map<string, { code: number; message: string }>()
  let held: Held[] = []

  async function forward(body: string, res: ServerResponse): Promise<void> {
    try {
      const upstream = await fetch(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      })
      const text = await upstream.text()
      res.writeHead(upstream.status, { 'content-type': 'application/json' })
      res.end(text)
    } catch {
      res.socket?.destroy()
    }
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks).toString('utf8')
    let parsed: { id?: unknown; method?: string } | { id?: unknown; method?: string }[]
    try {
      parsed = JSON.parse(body)
    } catch {
      return forward(body, res)
    }
    const requests = Array.isArray(parsed) ? parsed : [parsed]
    for (const r of requests) if (r.method) counts.set(r.method, (counts.get(r.method) ?? 0) + 1)
    const single = Array.isArray(parsed) ? undefined : parsed
    const failure = single?.method ? failing.get(single.method) : undefined
    if (single && failure) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ jsonrpc: '2.0', id: single.id ?? null, error: failure }))
      return
    }
    if (single?.method && holding.has(single.method)) {
      held.push({ method: single.method, body, res })
      return
    }
    return forward(body, res)
  }

  const server = createServer((req, res) => {
    onRequest(req, res).catch(() => res.socket?.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  return {
    url: `http://127.0.0.1:${port}`,
    calls: (method) => counts.get(method) ?? 0,
    hold: (method) => holding.add(method),
    held: () => held.length,
    release(method) {
      holding.delete(method)
      const now = held.filter((h) => h.method === method)
      held = held.filter((h) => h.method !== method)
      for (const h of now) void forward(h.body, h.res)
    },
    cutHeld() {
      for (const h of held) h.res.socket?.destroy()
      held = []
    },
    fail(method, error) {
      if (error) failing.set(method, error)
      else failing.delete(method)
    },
    async stop() {
      for (const h of held) h.res.socket?.destroy()
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
