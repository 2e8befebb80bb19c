import { createHash, randomUUID } from 'node:crypto'
import type { IncomingMessage } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type RawData, type WebSocket, WebSocketServer } from 'ws'

/**
 * A WalletConnect relay small enough to read, for tests: WebSocket JSON-RPC on 127.0.0.1 with
 * the methods @walletconnect/core 2.25 sends (see core's subscriber.ts, publisher.ts and
 * sign-client's engine.ts):
 *
 * - `irn_subscribe`, `irn_batchSubscribe`, `irn_unsubscribe`, `irn_batchUnsubscribe`
 * - `irn_publish`, `irn_batchFetchMessages`
 * - `wc_proposeSession`: the dapp never subscribes to its pairing topic itself (it pairs with
 *   `skipSubscribe`), so the relay subscribes it while storing the proposal there.
 * - `wc_approveSession`: likewise subscribes the wallet to the new session topic, then publishes
 *   the proposal response on the pairing topic and the settle request on the session topic.
 * - server to client: `irn_subscription`, which the client acknowledges with `result: true`.
 *
 * Messages are a mailbox: kept per topic for their TTL and delivered to every subscriber except
 * the client that published them, including subscribers that arrive later (the wallet subscribes
 * to the pairing topic after the proposal was stored). A client is recognised across
 * reconnections by the `sub` of its relay JWT, so an acknowledged message is not sent again.
 * Nothing is authenticated: this relay only ever listens on loopback.
 */
export interface Relay {
  /** `ws://127.0.0.1:<port>` for sign-client's `relayUrl`. */
  readonly url: string
  /** Every JSON-RPC request received, in order (method and the topics it names). */
  readonly requests: readonly RelayRequest[]
  /** Messages stored on a topic so far (published or delivered by `wc_*` methods). */
  messagesOn(topic: string): number
  /** Closes every connection (code 1000) and the server. */
  stop(): Promise<void>
}

export interface RelayRequest {
  method: string
  topics: string[]
}

export interface StartRelayOptions {
  /** Pings each connection this often; core's Node relayer drops a socket silent for 35 s. */
  pingIntervalMs?: number
}

interface StoredMessage {
  id: number
  topic: string
  message: string
  publishedAt: number
  tag: number
  attestation?: string
  expiresAt: number
  publisher: string
}

interface Connection {
  socket: WebSocket
  clientId: string
  topics: Set<string>
  /** Messages written to this socket, so a re-subscribe on the same socket does not repeat them. */
  sent: Set<number>
}

interface JsonRpcRequest {
  id: number | string
  jsonrpc: '2.0'
  method: string
  params?: unknown
}

type Params = Record<string, unknown>

class RpcError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message)
  }
}

const defaultTtlSeconds = 300

export async function startRelay(options: StartRelayOptions = {}): Promise<Relay> {
  const server = new WebSocketServer({ host: '127.0.0.1', port: 0 })
  await new Promise<void>((resolve, reject) => {
    server.once('listening', resolve)
    server.once('error', reject)
  })
  const { port } = server.address() as AddressInfo

  const mailbox = new Map<string, StoredMessage[]>()
  const subscribers = new Map<string, Set<Connection>>()
  const acked = new Map<string, Set<number>>()
  const awaitingAck = new Map<string, { clientId: string; messageId: number }>()
  const requests: RelayRequest[] = []
  let nextMessageId = 1
  let nextRpcId = Date.now() * 1000

  const subscriptionId = (topic: string, clientId: string) =>
    createHash('sha256')
      .update(topic + clientId)
      .digest('hex')

  const live = (topic: string): StoredMessage[] => {
    const now = Date.now()
    const kept = (mailbox.get(topic) ?? []).filter((m) => m.expiresAt > now)
    mailbox.set(topic, kept)
    return kept
  }

  const deliverable = (conn: Connection, message: StoredMessage) =>
    message.publisher !== conn.clientId &&
    !conn.sent.has(message.id) &&
    !acked.get(conn.clientId)?.has(message.id)

  const send = (conn: Connection, payload: unknown) => {
    if (conn.socket.readyState === conn.socket.OPEN) conn.socket.send(JSON.stringify(payload))
  }

  const deliver = (conn: Connection, message: StoredMessage) => {
    if (!deliverable(conn, message)) return
    conn.sent.add(message.id)
    const id = nextRpcId++
    awaitingAck.set(String(id), { clientId: conn.clientId, messageId: message.id })
    send(conn, {
      id,
      jsonrpc: '2.0',
      method: 'irn_subscription',
      params: {
        id: subscriptionId(message.topic, conn.clientId),
        data: {
          topic: message.topic,
          message: message.message,
          publishedAt: message.publishedAt,
          tag: message.tag,
          ...(message.attestation === undefined ? {} : { attestation: message.attestation }),
        },
      },
    })
  }

  const subscribe = (conn: Connection, topic: string): string => {
    conn.topics.add(topic)
    const set = subscribers.get(topic) ?? new Set<Connection>()
    set.add(conn)
    subscribers.set(topic, set)
    // After the response is written, so the client has recorded the subscription first.
    queueMicrotask(() => {
      for (const message of live(topic)) deliver(conn, message)
    })
    return subscriptionId(topic, conn.clientId)
  }

  const unsubscribe = (conn: Connection, topic: string) => {
    conn.topics.delete(topic)
    subscribers.get(topic)?.delete(conn)
  }

  const publish = (from: Connection, topic: string, message: string, params: Params) => {
    const ttl = typeof params.ttl === 'number' && params.ttl > 0 ? params.ttl : defaultTtlSeconds
    const stored: StoredMessage = {
      id: nextMessageId++,
      topic,
      message,
      publishedAt: Date.now(),
      tag: typeof params.tag === 'number' ? params.tag : 0,
      expiresAt: Date.now() + ttl * 1000,
      publisher: from.clientId,
      ...(typeof params.attestation === 'string' ? { attestation: params.attestation } : {}),
    }
    live(topic).push(stored)
    for (const conn of subscribers.get(topic) ?? []) deliver(conn, stored)
  }

  const handlers: Record<string, (conn: Connection, params: Params) => unknown> = {
    irn_subscribe: (conn, params) => subscribe(conn, topicParam(params, 'topic')),
    irn_batchSubscribe: (conn, params) => topicArray(params, 'topics').map((topic) => subscribe(conn, topic)),
    irn_unsubscribe: (conn, params) => {
      unsubscribe(conn, topicParam(params, 'topic'))
      return true
    },
    irn_batchUnsubscribe: (conn, params) => {
      const subscriptions = params.subscriptions
      if (!Array.isArray(subscriptions)) throw new RpcError(-32602, 'subscriptions must be an array')
      for (const entry of subscriptions) unsubscribe(conn, topicParam(entry as Params, 'topic'))
      return true
    },
    irn_publish: (conn, params) => {
      publish(conn, topicParam(params, 'topic'), stringParam(params, 'message'), params)
      return true
    },
    irn_batchFetchMessages: (conn, params) => {
      const messages = topicArray(params, 'topics').flatMap((topic) =>
        live(topic).filter((message) => deliverable(conn, message)),
      )
      for (const message of messages) conn.sent.add(message.id)
      return {
        hasMore: false,
        messages: messages.map(({ topic, message, publishedAt, tag, attestation }) => ({
          topic,
          message,
          publishedAt,
          tag,
          ...(attestation === undefined ? {} : { attestation }),
        })),
      }
    },
    wc_proposeSession: (conn, params) => {
      const pairingTopic = topicParam(params, 'pairingTopic')
      subscribe(conn, pairingTopic)
      publish(conn, pairingTopic, stringParam(params, 'sessionProposal'), params)
      return true
    },
    wc_approveSession: (conn, params) => {
      const pairingTopic = topicParam(params, 'pairingTopic')
      const sessionTopic = topicParam(params, 'sessionTopic')
      subscribe(conn, sessionTopic)
      publish(conn, pairingTopic, stringParam(params, 'sessionProposalResponse'), params)
      publish(conn, sessionTopic, stringParam(params, 'sessionSettlementRequest'), params)
      return true
    },
  }

  const onMessage = (conn: Connection, data: RawData) => {
    let payload: unknown
    try {
      payload = JSON.parse(data.toString())
    } catch {
      send(conn, { id: null, jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' } })
      return
    }
    if (!isObject(payload)) return
    // A response is the client acknowledging an irn_subscription.
    if (!('method' in payload)) {
      const pending = awaitingAck.get(String(payload.id))
      if (pending && payload.result !== undefined) {
        awaitingAck.delete(String(payload.id))
        const set = acked.get(pending.clientId) ?? new Set<number>()
        set.add(pending.messageId)
        acked.set(pending.clientId, set)
      }
      return
    }
    const request = payload as unknown as JsonRpcRequest
    const params = isObject(request.params) ? request.params : {}
    requests.push({ method: request.method, topics: topicsNamed(params) })
    const handler = handlers[request.method]
    try {
      if (!handler) throw new RpcError(-32601, `Method not found: ${request.method}`)
      send(conn, { id: request.id, jsonrpc: '2.0', result: handler(conn, params) })
    } catch (error) {
      const code = error instanceof RpcError ? error.code : -32603
      send(conn, { id: request.id, jsonrpc: '2.0', error: { code, message: (error as Error).message } })
    }
  }

  const connections = new Set<Connection>()
  server.on('connection', (socket: WebSocket, req: IncomingMessage) => {
    const conn: Connection = { socket, clientId: clientIdOf(req), topics: new Set(), sent: new Set() }
    connections.add(conn)
    socket.on('message', (data) => onMessage(conn, data))
    socket.on('close', () => {
      connections.delete(conn)
      for (const topic of conn.topics) subscribers.get(topic)?.delete(conn)
    })
  })

  const pinger = setInterval(() => {
    for (const conn of connections) if (conn.socket.readyState === conn.socket.OPEN) conn.socket.ping()
  }, options.pingIntervalMs ?? 10_000)
  pinger.unref()

  return {
    url: `ws://127.0.0.1:${port}`,
    requests,
    messagesOn: (topic) => (mailbox.get(topic) ?? []).length,
    async stop() {
      clearInterval(pinger)
      for (const conn of connections) conn.socket.close(1000)
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

/** The `sub` (did:key of the client's relay key) of the JWT in `?auth=`; unverified, loopback only. */
function clientIdOf(req: IncomingMessage): string {
  const auth = new URL(req.url ?? '/', 'ws://127.0.0.1').searchParams.get('auth')
  try {
    const payload = JSON.parse(Buffer.from(auth!.split('.')[1]!, 'base64url').toString('utf8'))
    if (typeof payload.sub === 'string' && payload.sub) return payload.sub
  } catch {
    // fall through: an anonymous client gets an id of its own
  }
  return `anonymous:${randomUUID()}`
}

function topicParam(params: Params, name: string): string {
  return asTopic(params[name], name)
}

function asTopic(value: unknown, name: string): string {
  if (typeof value !== 'string' || !/^[0-9a-f]{64}$/.test(value)) {
    throw new RpcError(-32602, `${name} must be a 32-byte hex topic`)
  }
  return value
}

function stringParam(params: Params, name: string): string {
  const value = params[name]
  if (typeof value !== 'string' || value.length === 0) throw new RpcError(-32602, `${name} must be a string`)
  return value
}

function topicArray(params: Params, name: string): string[] {
  const value = params[name]
  if (!Array.isArray(value)) throw new RpcError(-32602, `${name} must be an array`)
  return value.map((topic, index) => asTopic(topic, `${name}[${index}]`))
}

function topicsNamed(params: Params): string[] {
  const named = ['topic', 'pairingTopic', 'sessionTopic'].map((key) => params[key])
  const list = Array.isArray(params.topics) ? params.topics : []
  return [...named, ...list].filter((value): value is string => typeof value === 'string')
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}
