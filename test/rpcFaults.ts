import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import bs58 from 'bs58'
import { type Hex, keccak256 } from 'viem'

/**
 * A fault-injecting JSON-RPC proxy for tests, in front of Anvil or the Solana harness. By default it
 * forwards every request as is (optionally with latency); a test scripts faults per method:
 *
 * ```ts
 * const proxy = await startFaultProxy(anvil.rpcUrl)
 * proxy.inject('eth_sendRawTransaction', { kind: 'drop' }, { times: 1 }) // hash answered, never sent
 * proxy.inject('eth_getTransactionReceipt', { kind: 'withhold' })        // "not yet" until cleared
 * proxy.clear('eth_getTransactionReceipt')
 * proxy.inject('getSignatureStatuses', { kind: 'rewrite', fn: (answer) => ({ ...answer, result: ... }) })
 * ```
 *
 * Chain-level faults (base fee raised, mining stopped, a reorg) are the node's own: see
 * `anvilControl` in test/anvil.ts and `expireBlockhash()` of the Solana harness.
 */
export type Fault =
  /** A send is answered with its hash or signature and never reaches the node (it was "dropped"). */
  | { kind: 'drop' }
  /** Answered after `ms`. */
  | { kind: 'delay'; ms: number }
  /** A JSON-RPC error, without forwarding. */
  | { kind: 'error'; code: number; message: string }
  /** Never answered (until `cutHeld`, `release` or `stop`): a node that stopped responding. */
  | { kind: 'hang' }
  /** A body that is not JSON. */
  | { kind: 'malformed' }
  /** HTTP 429 Too Many Requests (a rate-limited provider). */
  | { kind: 'rateLimited' }
  /** "Not found yet": a receipt or transaction of `null`, or Solana signature statuses of `[null, ...]`. */
  | { kind: 'withhold' }
  /**
   * Forwarded, and the node's answer replaced by `fn(answer, params)` (a JSON-RPC response object): a node
   * that reports another state than the truth, e.g. a Solana signature only `confirmed`.
   */
  | { kind: 'rewrite'; fn: (answer: JsonRpcResponse, params: unknown) => JsonRpcResponse }
  /** Forwarded, and the connection cut before the answer: the node acted, the caller never learns it. */
  | { kind: 'lostAnswer' }

export interface JsonRpcResponse {
  jsonrpc?: string
  id?: unknown
  result?: unknown
  error?: { code: number; message: string; data?: unknown }
}

export interface FaultProxy {
  readonly url: string
  /** Requests seen for `method` (faulted ones included; each call of a batch counts). */
  calls(method: string): number
  /** HTTP requests seen (a batch is one). */
  httpRequests(): number
  /** Parameters of every request seen for `method`, in order. */
  params(method: string): unknown[]
  /** Scripts `fault` for `method`; `times` limits it to the next n calls (default: until cleared). */
  inject(method: string, fault: Fault, options?: { times?: number }): void
  /** Forwards `method` again (one method) or everything (no argument). */
  clear(method?: string): void
  /** Holds `method`'s requests unanswered until `release`. */
  hold(method: string): void
  /** Requests held right now. */
  held(): number
  /** Forwards the held requests of `method` and stops holding it. */
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

interface Scripted {
  fault: Fault
  remaining: number
}

interface JsonRpcRequest {
  id?: unknown
  method?: string
  params?: unknown
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

export async function startFaultProxy(
  target: string,
  options: { latencyMs?: number } = {},
): Promise<FaultProxy> {
  const counts = new Map<string, number>()
  const seen = new Map<string, unknown[]>()
  const scripted = new Map<string, Scripted>()
  let held: Held[] = []
  let httpRequests = 0
  const latency = () => (options.latencyMs ? sleep(Math.random() * options.latencyMs) : Promise.resolve())

  /** The node's answer to `body`, or undefined when it could not be reached. */
  async function fromNode(body: string): Promise<{ status: number; text: string } | undefined> {
    try {
      await latency()
      const upstream = await fetch(target, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body,
      })
      const text = await upstream.text()
      await latency()
      return { status: upstream.status, text }
    } catch {
      return undefined
    }
  }

  async function forward(
    body: string,
    res: ServerResponse,
    edit: (text: string) => string | undefined = (text) => text,
  ): Promise<void> {
    const answer = await fromNode(body)
    const text = answer && edit(answer.text)
    if (!answer || text === undefined) {
      res.socket?.destroy()
      return
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' })
    res.end(text)
  }

  function answer(res: ServerResponse, id: unknown, payload: { result: unknown } | { error: unknown }): void {
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify({ jsonrpc: '2.0', id: id ?? null, ...payload }))
  }

  function take(method: string): Fault | undefined {
    const entry = scripted.get(method)
    if (!entry) return undefined
    entry.remaining -= 1
    if (entry.remaining <= 0) scripted.delete(method)
    return entry.fault
  }

  async function applyFault(fault: Fault, request: JsonRpcRequest, body: string, res: ServerResponse) {
    switch (fault.kind) {
      case 'drop':
        return answer(res, request.id, { result: sentId(request) })
      case 'delay':
        await sleep(fault.ms)
        return forward(body, res)
      case 'error':
        return answer(res, request.id, { error: { code: fault.code, message: fault.message } })
      case 'hang':
        held.push({ method: request.method ?? '', body, res })
        return
      case 'malformed':
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end('{"jsonrpc":"2.0","id":')
        return
      case 'rateLimited':
        res.writeHead(429, { 'content-type': 'application/json', 'retry-after': '1' })
        res.end(
          JSON.stringify({
            jsonrpc: '2.0',
            id: request.id ?? null,
            error: { code: 429, message: 'Too many requests' },
          }),
        )
        return
      case 'withhold':
        return answer(res, request.id, { result: notFoundYet(request) })
      case 'rewrite':
        return forward(body, res, (text) =>
          JSON.stringify(fault.fn(JSON.parse(text) as JsonRpcResponse, request.params)),
        )
      case 'lostAnswer':
        return forward(body, res, () => undefined)
    }
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    httpRequests += 1
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks).toString('utf8')
    let parsed: JsonRpcRequest | JsonRpcRequest[]
    try {
      parsed = JSON.parse(body)
    } catch {
      return forward(body, res)
    }
    const requests = Array.isArray(parsed) ? parsed : [parsed]
    for (const r of requests) {
      if (!r.method) continue
      counts.set(r.method, (counts.get(r.method) ?? 0) + 1)
      seen.set(r.method, [...(seen.get(r.method) ?? []), r.params])
    }
    if (Array.isArray(parsed)) return onBatch(parsed, body, res)
    const fault = parsed.method ? take(parsed.method) : undefined
    if (fault) return applyFault(fault, parsed, body, res)
    return forward(body, res)
  }

  /**
   * A batch meets the faults its calls would meet alone. A call's own answer (`drop`, `error`, `withhold`,
   * `rewrite`) replaces its element of the batch's answer; `delay` delays the whole answer; a fault of the
   * connection (`hang`, `malformed`, `rateLimited`, `lostAnswer`) is the whole batch's, as on a real node,
   * where one HTTP answer carries every element.
   */
  async function onBatch(requests: JsonRpcRequest[], body: string, res: ServerResponse): Promise<void> {
    // A connection fault decides the whole answer: only its own count goes down (the other calls' scripted
    // faults were not applied, so they are not used up).
    const connection = requests.findIndex((r) => {
      const kind = r.method ? scripted.get(r.method)?.fault.kind : undefined
      return kind === 'hang' || kind === 'malformed' || kind === 'rateLimited' || kind === 'lostAnswer'
    })
    if (connection >= 0) {
      const request = requests[connection]!
      return applyFault(take(request.method!)!, request, body, res)
    }
    const faults = requests.map((r) => (r.method ? take(r.method) : undefined))
    const delayMs = Math.max(0, ...faults.map((f) => (f?.kind === 'delay' ? f.ms : 0)))
    if (delayMs > 0) await sleep(delayMs)
    const local = (f: Fault | undefined) =>
      f?.kind === 'drop' || f?.kind === 'error' || f?.kind === 'withhold'
    const upstream = requests.filter((_, i) => !local(faults[i]))
    let answers: JsonRpcResponse[] = []
    if (upstream.length > 0) {
      const forwarded = await fromNode(JSON.stringify(upstream))
      if (forwarded === undefined) {
        res.socket?.destroy()
        return
      }
      const parsed = JSON.parse(forwarded.text) as JsonRpcResponse | JsonRpcResponse[]
      // A node that refused the batch as a whole: its answer as it is.
      if (!Array.isArray(parsed)) {
        res.writeHead(forwarded.status, { 'content-type': 'application/json' })
        res.end(forwarded.text)
        return
      }
      answers = parsed
    }
    const byId = new Map(answers.map((a) => [a.id, a]))
    const elements = requests.map((request, i): JsonRpcResponse => {
      const fault = faults[i]
      const element = { jsonrpc: '2.0', id: request.id ?? null }
      if (fault?.kind === 'drop') return { ...element, result: sentId(request) }
      if (fault?.kind === 'error') return { ...element, error: { code: fault.code, message: fault.message } }
      if (fault?.kind === 'withhold') return { ...element, result: notFoundYet(request) }
      const answer = byId.get(request.id) ?? {
        ...element,
        error: { code: -32603, message: 'no answer in the batch' },
      }
      return fault?.kind === 'rewrite' ? fault.fn(answer, request.params) : answer
    })
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(elements))
  }

  const server = createServer((req, res) => {
    onRequest(req, res).catch(() => res.socket?.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo

  const proxy: FaultProxy = {
    url: `http://127.0.0.1:${port}`,
    calls: (method) => counts.get(method) ?? 0,
    httpRequests: () => httpRequests,
    params: (method) => [...(seen.get(method) ?? [])],
    inject(method, fault, injectOptions = {}) {
      scripted.set(method, { fault, remaining: injectOptions.times ?? Number.POSITIVE_INFINITY })
    },
    clear(method) {
      if (method === undefined) scripted.clear()
      else scripted.delete(method)
    },
    hold: (method) => proxy.inject(method, { kind: 'hang' }),
    held: () => held.length,
    release(method) {
      proxy.clear(method)
      const now = held.filter((h) => h.method === method)
      held = held.filter((h) => h.method !== method)
      for (const h of now) void forward(h.body, h.res)
    },
    cutHeld() {
      for (const h of held) h.res.socket?.destroy()
      held = []
    },
    fail(method, error) {
      if (error) proxy.inject(method, { kind: 'error', ...error })
      else proxy.clear(method)
    },
    async stop() {
      for (const h of held) h.res.socket?.destroy()
      held = []
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
  return proxy
}

/** What a node answers for a send: the EVM transaction hash, or the Solana transaction's first signature. */
function sentId(request: JsonRpcRequest): string {
  const [raw, config] = (request.params ?? []) as [string, { encoding?: string } | undefined]
  if (request.method === 'eth_sendRawTransaction') return keccak256(raw as Hex)
  if (request.method === 'sendTransaction') {
    const bytes = config?.encoding === 'base64' ? Buffer.from(raw, 'base64') : Buffer.from(bs58.decode(raw))
    // Wire format: compact-u16 signature count (1 byte below 128), then 64-byte signatures.
    return bs58.encode(bytes.subarray(1, 65))
  }
  throw new Error(`The 'drop' fault applies to sends, not ${request.method}`)
}

function notFoundYet(request: JsonRpcRequest): unknown {
  if (request.method === 'getSignatureStatuses') {
    const [signatures] = (request.params ?? [[]]) as [string[]]
    return { context: { slot: 0 }, value: signatures.map(() => null) }
  }
  return null
}
