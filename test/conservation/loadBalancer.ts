import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type Hex, toHex } from 'viem'

/**
 * An EVM JSON-RPC "load balancer" for tests: one per caipay process, in front of the shared fault proxy
 * (test/rpcFaults.ts), so that a test can tell which process made a call.
 *
 * - `lag({ share, blocks })`: that share of HTTP requests (a batch goes to one backend, as behind a real
 *   balancer) is answered as a replica `blocks` behind the head would answer it: an older
 *   `eth_blockNumber`; `null` for receipts and transactions mined in the last `blocks` blocks (and for
 *   pending ones: no mempool); nonces, balances, calls and estimates as of its head for `latest` and
 *   `pending`; `header not found` for a block number past its head; logs up to its head. Its answers come
 *   from the real node, read at the replica's head (Anvil keeps every block's state).
 * - `trap(method, hook)`: the next call of `method` waits for `hook` before it is forwarded: the moment
 *   to SIGSTOP or SIGKILL the process that made it, at a known step.
 */
export interface RpcLoadBalancer {
  readonly url: string
  lag(options: { share: number; blocks: number; random?: () => number }): void
  unlag(): void
  /** Answers the replica gave (lagged HTTP requests). */
  lagged(): number
  /**
   * Before the next call of `method` is forwarded, `hook` runs; `forward: false` from it answers nothing
   * (the connection is cut: the process was killed with the request in hand).
   */
  trap(method: string, hook: () => Promise<{ forward: boolean }>): void
  untrap(method?: string): void
  stop(): Promise<void>
}

interface JsonRpcRequest {
  jsonrpc?: string
  id?: unknown
  method?: string
  params?: unknown[]
}

interface JsonRpcResponse {
  jsonrpc: string
  id: unknown
  result?: unknown
  error?: { code: number; message: string }
}

const blockTags = new Set(['latest', 'pending', 'safe', 'finalized', 'earliest'])
/** Methods whose last parameter is a block (tag or number); the index of that parameter. */
const stateReads: Record<string, number> = {
  eth_getTransactionCount: 1,
  eth_getBalance: 1,
  eth_getCode: 1,
  eth_getStorageAt: 2,
  eth_call: 1,
  eth_estimateGas: 1,
}

export async function startRpcLoadBalancer(upstream: string, node: string): Promise<RpcLoadBalancer> {
  let lagging: { share: number; blocks: number; random: () => number } | undefined
  let laggedCount = 0
  const traps = new Map<string, () => Promise<{ forward: boolean }>>()
  let nextId = 1

  async function post(url: string, body: string): Promise<{ status: number; text: string } | undefined> {
    try {
      const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body })
      return { status: res.status, text: await res.text() }
    } catch {
      return undefined
    }
  }

  async function nodeCall(method: string, params: unknown[]): Promise<JsonRpcResponse> {
    const answer = await post(node, JSON.stringify({ jsonrpc: '2.0', id: nextId++, method, params }))
    if (!answer) return { jsonrpc: '2.0', id: null, error: { code: -32603, message: 'node unreachable' } }
    return JSON.parse(answer.text) as JsonRpcResponse
  }

  /** What a replica whose head is `head` answers to `request`. */
  async function asReplica(request: JsonRpcRequest, head: bigint): Promise<JsonRpcResponse> {
    const reply = (payload: { result: unknown } | { error: { code: number; message: string } }) => ({
      jsonrpc: '2.0',
      id: request.id ?? null,
      ...payload,
    })
    const method = request.method ?? ''
    const params = [...(request.params ?? [])]
    const headerNotFound = reply({ error: { code: -32000, message: 'header not found' } })
    const pastHead = (tag: unknown) =>
      typeof tag === 'string' && !blockTags.has(tag) && tag.startsWith('0x') && BigInt(tag) > head
    const forwarded = async () => {
      const answer = await nodeCall(method, params)
      return { ...answer, id: request.id ?? null }
    }
    if (method === 'eth_blockNumber') return reply({ result: toHex(head) })
    if (method === 'eth_getBlockByNumber') {
      const tag = params[0]
      if (tag === 'latest' || tag === 'pending') params[0] = toHex(head)
      else if (pastHead(tag)) return reply({ result: null })
      return forwarded()
    }
    if (method === 'eth_getBlockByHash') {
      const answer = await forwarded()
      const number = (answer.result as { number?: Hex } | null)?.number
      return number && BigInt(number) > head ? reply({ result: null }) : answer
    }
    if (method === 'eth_getTransactionReceipt' || method === 'eth_getTransactionByHash') {
      const answer = await forwarded()
      const number = (answer.result as { blockNumber?: Hex | null } | null)?.blockNumber
      if (answer.result && (!number || BigInt(number) > head)) return reply({ result: null })
      return answer
    }
    if (method in stateReads) {
      const at = stateReads[method]!
      const tag = params[at]
      if (tag === undefined || tag === 'latest' || tag === 'pending') params[at] = toHex(head)
      else if (pastHead(tag)) return headerNotFound
      return forwarded()
    }
    if (method === 'eth_getLogs') {
      const filter = { ...(params[0] as { fromBlock?: string; toBlock?: string; blockHash?: string }) }
      if (filter.blockHash) return forwarded()
      if (pastHead(filter.fromBlock)) return reply({ result: [] })
      if (filter.toBlock === undefined || filter.toBlock === 'latest' || filter.toBlock === 'pending')
        filter.toBlock = toHex(head)
      else if (pastHead(filter.toBlock)) return headerNotFound
      params[0] = filter
      return forwarded()
    }
    return forwarded()
  }

  async function lagAnswer(body: string, res: ServerResponse, blocks: number): Promise<void> {
    const parsed = JSON.parse(body) as JsonRpcRequest | JsonRpcRequest[]
    const headAnswer = await nodeCall('eth_blockNumber', [])
    const realHead = BigInt((headAnswer.result as Hex | undefined) ?? '0x0')
    const head = realHead > BigInt(blocks) ? realHead - BigInt(blocks) : 0n
    laggedCount += 1
    const answers = Array.isArray(parsed)
      ? await Promise.all(parsed.map((r) => asReplica(r, head)))
      : await asReplica(parsed, head)
    res.writeHead(200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(answers))
  }

  async function onRequest(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = []
    for await (const chunk of req) chunks.push(chunk as Buffer)
    const body = Buffer.concat(chunks).toString('utf8')
    let parsed: JsonRpcRequest | JsonRpcRequest[] | undefined
    try {
      parsed = JSON.parse(body)
    } catch {
      parsed = undefined
    }
    const methods =
      parsed === undefined ? [] : (Array.isArray(parsed) ? parsed : [parsed]).map((r) => r.method)
    for (const method of methods) {
      const hook = method === undefined ? undefined : traps.get(method)
      if (!hook || method === undefined) continue
      traps.delete(method)
      const { forward } = await hook()
      if (!forward) {
        res.socket?.destroy()
        return
      }
    }
    // Sends reach the network through any backend; only reads can come from the lagging replica.
    const sends = methods.includes('eth_sendRawTransaction')
    if (lagging && parsed !== undefined && !sends && lagging.random() < lagging.share)
      return lagAnswer(body, res, lagging.blocks)
    const answer = await post(upstream, body)
    if (!answer) {
      res.socket?.destroy()
      return
    }
    res.writeHead(answer.status, { 'content-type': 'application/json' })
    res.end(answer.text)
  }

  const server = createServer((req, res) => {
    onRequest(req, res).catch(() => res.socket?.destroy())
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    lag({ share, blocks, random = Math.random }) {
      lagging = { share, blocks, random }
    },
    unlag() {
      lagging = undefined
    },
    lagged: () => laggedCount,
    trap(method, hook) {
      traps.set(method, hook)
    },
    untrap(method) {
      if (method === undefined) traps.clear()
      else traps.delete(method)
    },
    async stop() {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
