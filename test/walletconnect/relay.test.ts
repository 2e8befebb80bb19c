import { afterEach, describe, expect, it } from 'vitest'
import WebSocket from 'ws'
import { type Relay, startRelay } from './relay.js'

// The relay seen from raw sockets: the mailbox rules sign-client relies on, without sign-client.

const topic = '1'.repeat(64)
const sessionTopic = '2'.repeat(64)

interface Peer {
  call(
    method: string,
    params: unknown,
  ): Promise<{ result?: unknown; error?: { code: number; message: string } }>
  /** irn_subscription payloads received so far (each one acknowledged). */
  inbox: { topic: string; message: string }[]
  close(): void
}

let relay: Relay
const sockets: WebSocket[] = []

afterEach(async () => {
  for (const socket of sockets.splice(0)) socket.close(1000)
  await relay?.stop()
})

/** A raw client; `sub` plays the client id the relay reads from sign-client's auth JWT. */
async function peer(sub: string): Promise<Peer> {
  const jwt = ['e30', Buffer.from(JSON.stringify({ sub })).toString('base64url'), 'sig'].join('.')
  const socket = new WebSocket(`${relay.url}/?auth=${jwt}&projectId=test`)
  sockets.push(socket)
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject))
  const waiting = new Map<number, (payload: Record<string, unknown>) => void>()
  const inbox: Peer['inbox'] = []
  socket.on('message', (raw) => {
    const payload = JSON.parse(raw.toString())
    if (payload.method === 'irn_subscription') {
      inbox.push({ topic: payload.params.data.topic, message: payload.params.data.message })
      socket.send(JSON.stringify({ id: payload.id, jsonrpc: '2.0', result: true }))
      return
    }
    waiting.get(payload.id)?.(payload)
  })
  let nextId = 1
  return {
    inbox,
    call(method, params) {
      const id = nextId++
      return new Promise((resolve) => {
        waiting.set(id, resolve)
        socket.send(JSON.stringify({ id, jsonrpc: '2.0', method, params }))
      })
    },
    close: () => socket.close(1000),
  }
}

/** A pause for deliveries that must NOT happen (an absence cannot be waited for). */
const settle = () => new Promise((resolve) => setTimeout(resolve, 30))

/** Waits until `inbox` holds `count` messages (however slow the machine), then settles for any extra. */
async function received(inbox: Peer['inbox'], count: number): Promise<void> {
  const deadline = Date.now() + 5_000
  while (inbox.length < count && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 5))
  await settle()
}

describe('local WalletConnect relay', () => {
  it('keeps messages for subscribers that come later and never echoes them to the publisher', async () => {
    relay = await startRelay()
    const dapp = await peer('did:key:dapp')
    expect(
      await dapp.call('wc_proposeSession', { pairingTopic: topic, sessionProposal: 'proposal', ttl: 300 }),
    ).toEqual(expect.objectContaining({ result: true }))
    const wallet = await peer('did:key:wallet')
    const subscribed = await wallet.call('irn_subscribe', { topic })
    expect(subscribed.result).toMatch(/^[0-9a-f]{64}$/)
    await received(wallet.inbox, 1)
    expect(wallet.inbox).toEqual([{ topic, message: 'proposal' }])
    expect(dapp.inbox).toEqual([])

    // The approval answers on the pairing topic (to the dapp, subscribed by wc_proposeSession) and
    // settles on the session topic, which the dapp subscribes to afterwards.
    await wallet.call('wc_approveSession', {
      pairingTopic: topic,
      sessionTopic,
      sessionProposalResponse: 'response',
      sessionSettlementRequest: 'settle',
    })
    await dapp.call('irn_subscribe', { topic: sessionTopic })
    await received(dapp.inbox, 2)
    expect(dapp.inbox).toEqual([
      { topic, message: 'response' },
      { topic: sessionTopic, message: 'settle' },
    ])
    expect(wallet.inbox).toHaveLength(1)
  })

  it('does not deliver an acknowledged message again when the client reconnects', async () => {
    relay = await startRelay()
    const sender = await peer('did:key:sender')
    const first = await peer('did:key:receiver')
    await first.call('irn_subscribe', { topic })
    await sender.call('irn_publish', { topic, message: 'once', ttl: 300, tag: 1108 })
    await received(first.inbox, 1)
    expect(first.inbox).toHaveLength(1)
    first.close()

    const again = await peer('did:key:receiver')
    await again.call('irn_batchSubscribe', { topics: [topic] })
    const fetched = await again.call('irn_batchFetchMessages', { topics: [topic] })
    await settle()
    expect(again.inbox).toEqual([])
    expect(fetched.result).toEqual({ hasMore: false, messages: [] })

    const stranger = await peer('did:key:stranger')
    const mailbox = await stranger.call('irn_batchFetchMessages', { topics: [topic] })
    expect(mailbox.result).toEqual({
      hasMore: false,
      messages: [expect.objectContaining({ topic, message: 'once', tag: 1108 })],
    })
  })

  it('stops delivering after irn_unsubscribe', async () => {
    relay = await startRelay()
    const sender = await peer('did:key:sender')
    const receiver = await peer('did:key:receiver')
    await receiver.call('irn_subscribe', { topic })
    await receiver.call('irn_unsubscribe', { topic, id: 'ignored' })
    await sender.call('irn_publish', { topic, message: 'unheard', ttl: 300 })
    await settle()
    expect(receiver.inbox).toEqual([])
    expect(relay.messagesOn(topic)).toBe(1)
  })

  it('answers JSON-RPC errors for unknown methods and malformed params', async () => {
    relay = await startRelay()
    const client = await peer('did:key:client')
    expect((await client.call('irn_nope', {})).error?.code).toBe(-32601)
    expect((await client.call('irn_subscribe', { topic: 'not-a-topic' })).error?.code).toBe(-32602)
    expect((await client.call('irn_publish', { topic })).error?.code).toBe(-32602)
    expect(relay.requests.map((r) => r.method)).toEqual(['irn_nope', 'irn_subscribe', 'irn_publish'])
  })
})
