import {
  type AbiEvent,
  type Address,
  encodeEventTopics,
  fallback,
  formatLog,
  type GetLogsReturnType,
  type Hash,
  type Hex,
  http,
  type MaybeExtractEventArgsFromAbi,
  numberToHex,
  parseEventLogs,
  type RpcLog,
  type Transport,
} from 'viem'
import { RetryLater } from '../../jobs/runner.js'
import { keepAliveFetch } from '../keepAliveFetch.js'

/**
 * The nodes of one EVM chain (config `rpcUrls`, or `rpcUrl` alone) and what this process has seen of the
 * chain through them. Ordinary reads go to the first node that answers (viem's `fallback`: a node that
 * fails at the transport is skipped). Every block number in an answer raises `highest`, the newest block
 * seen from any node.
 *
 * A node behind the others (a lagging replica behind a load balancer) answers "not found" for
 * transactions already mined, older nonce counts, and fewer logs (none of the blocks it does not have).
 * That must never decide money: whether a recorded transaction can still land is asked by `fateOf`, pinned
 * at `highest`, and a scan's logs by `getLogs`, from a node that has every block asked (docs/live-mode.md,
 * "Chain reads").
 */
export interface EvmNodes {
  readonly urls: readonly string[]
  /** The transport of the chain's clients: failover across the nodes, answers observed. */
  readonly transport: Transport
  /** The newest block number seen from any node (0 before the first). */
  highest(): bigint
  observe(block: bigint): void
  /** What became of the transactions signed for `nonce` of `sender`, decided at or past `highest`. */
  fateOf(sender: Address, nonce: bigint, hashes: readonly Hash[]): Promise<NonceFate>
  /** Whether any of `hashes` is in a block or a pool, asked of a node at or past `highest`. */
  find(hashes: readonly Hash[]): Promise<{ kind: 'landed' | 'pending'; hash: Hash } | { kind: 'unknown' }>
  /**
   * viem's `getLogs` of one event over `fromBlock`..`toBlock`, answered by a node whose head is at or past
   * `toBlock` (its head and the logs in one request): a node behind answers fewer logs or none for the
   * blocks it does not have, and a scan that moved its cursor past them would never read them again.
   */
  getLogs<const event extends AbiEvent>(
    params: PinnedLogsParameters<event>,
  ): Promise<GetLogsReturnType<event>>
  /**
   * `calls` (JSON-RPC, e.g. `eth_call` at `block`) in one request to a node whose head is at or past
   * `block`, their results in order. A node behind it is asked nothing of it: NodesBehind when the nodes
   * that answered were all behind (one catches up: nothing is decided meanwhile). An error from a node at
   * `block` is that node's answer and is thrown as it is.
   */
  readAt(block: bigint, calls: readonly RpcCall[]): Promise<unknown[]>
}

export interface PinnedLogsParameters<event extends AbiEvent> {
  address: Address | Address[]
  event: event
  args?: MaybeExtractEventArgsFromAbi<[event], event['name']>
  fromBlock: bigint
  toBlock: bigint
}

/**
 * `landed`/`pending`: one of `hashes` is in a block or in the node's pool. `unused`: the nonce is still
 * free at the pinned block (the same bytes may be sent again: they can land once at most). `taken`: a
 * transaction that is none of `hashes` used the nonce, so none of them can ever land.
 */
export type NonceFate =
  | { kind: 'landed'; hash: Hash }
  | { kind: 'pending'; hash: Hash }
  | { kind: 'unused' }
  | { kind: 'taken' }

/**
 * No node could answer at or past the newest block seen: nothing is decided. A RetryLater, so that a job
 * meeting it waits for a current node however long that takes and never gives up on it (giving up would
 * fail a payment from what only lagging nodes said).
 */
export class NodesBehind extends RetryLater {
  override name = 'NodesBehind'
}

export interface EvmNodesOptions {
  urls: readonly string[]
  /** JSON-RPC calls of one event-loop turn per batch (1: no batching). */
  batchSize: number
  /** One decision read's time limit, ms (default 10 s). */
  timeoutMs?: number
  fetch?: typeof fetch
  /**
   * A FastPath (fastPath.ts): ask the nodes over kept-alive node:http connections (keepAliveFetch.ts)
   * instead of through fetch, unless `fetch` is given.
   */
  keepAlive?: boolean
}

export function createEvmNodes(options: EvmNodesOptions): EvmNodes {
  const { urls } = options
  if (urls.length === 0) throw new Error('An EVM chain needs at least one RPC URL.')
  const doFetch = options.fetch ?? (options.keepAlive ? keepAliveFetch() : fetch)
  const timeoutMs = options.timeoutMs ?? 10_000
  let highest = 0n
  const observe = (block: bigint) => {
    if (block > highest) highest = block
  }

  const perNode = urls.map((url) =>
    http(url, {
      retryCount: 2,
      ...(options.keepAlive && !options.fetch ? { fetchFn: doFetch } : {}),
      ...(options.batchSize > 1 ? { batch: { batchSize: options.batchSize, wait: 0 } } : {}),
    }),
  )
  const inner = perNode.length === 1 ? perNode[0]! : fallback(perNode, { retryCount: 0 })
  const transport: Transport = (parameters) => {
    const created = inner(parameters as Parameters<typeof inner>[0])
    const request = created.request
    return {
      ...created,
      async request(args: { method: string; params?: unknown }, requestOptions?: unknown) {
        const answer = await (request as (a: unknown, o?: unknown) => Promise<unknown>)(args, requestOptions)
        observeAnswer(args.method, answer, observe)
        return answer
      },
    } as ReturnType<Transport>
  }

  async function askOne(url: string, calls: readonly RpcCall[]): Promise<RpcAnswer[]> {
    const body = calls.map((call, id) => ({ jsonrpc: '2.0', id, method: call.method, params: call.params }))
    const response = await doFetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(timeoutMs),
    })
    if (!response.ok) throw new Error(`HTTP ${response.status}`)
    const answers = (await response.json()) as unknown
    if (!Array.isArray(answers)) throw new Error('The node did not answer the batch with a batch.')
    const byId = new Map<unknown, RpcAnswer>(answers.map((a: RpcAnswer) => [a?.id, a]))
    return calls.map((_, id) => byId.get(id) ?? { id, error: { code: -32603, message: 'no answer' } })
  }

  return {
    urls,
    transport,
    highest: () => highest,
    observe,
    async fateOf(sender, nonce, hashes) {
      const pinned = highest
      // The sender's nonce count pinned at the newest block seen: a backend behind that block cannot
      // answer it, so a count that comes back is from a node that has every block this process has seen.
      const [count, ...found] = await askFresh([
        { method: 'eth_getTransactionCount', params: [sender, pinned > 0n ? numberToHex(pinned) : 'latest'] },
        ...lookups(hashes),
      ])
      const seen = seenIn(found, hashes)
      if (seen) return seen
      return BigInt(count as Hex) > nonce ? { kind: 'taken' } : { kind: 'unused' }
    },
    async find(hashes) {
      return seenIn(await askFresh(lookups(hashes)), hashes) ?? { kind: 'unknown' }
    },
    async getLogs<const event extends AbiEvent>({
      address,
      event,
      args,
      fromBlock,
      toBlock,
    }: PinnedLogsParameters<event>): Promise<GetLogsReturnType<event>> {
      const topics = encodeEventTopics({ abi: [event], eventName: event.name, args } as Parameters<
        typeof encodeEventTopics
      >[0])
      const filter = { address, topics, fromBlock: numberToHex(fromBlock), toBlock: numberToHex(toBlock) }
      const [logs] = await askFresh([{ method: 'eth_getLogs', params: [filter] }], toBlock)
      return parseEventLogs({
        abi: [event] as AbiEvent[],
        args: args as never,
        logs: (logs as RpcLog[]).map((log) => formatLog(log)),
        strict: false,
      }) as unknown as GetLogsReturnType<event>
    },
    readAt,
  }

  /** `calls` at `block`: an error answer from a node that has the block is the answer (it throws). */
  function readAt(block: bigint, calls: readonly RpcCall[]): Promise<unknown[]> {
    return askAtOrPast(calls, block, 'throw')
  }

  /**
   * `calls` in one HTTP request, after `eth_blockNumber`, to the first node whose head is at or past
   * `atLeast` (by default the newest block seen): behind a load balancer one backend answers the whole
   * request, so its "not found" means not in any block up to that head. Their results, in order;
   * NodesBehind when no node can (a node's error answer passes to the next).
   */
  function askFresh(calls: readonly RpcCall[], atLeast?: bigint): Promise<unknown[]> {
    return askAtOrPast(calls, atLeast ?? highest, 'next')
  }

  /**
   * The one loop of readAt and askFresh: the first node whose head is at or past `pinned` answers
   * `calls`. An error answer to one of them throws (`'throw'`) or asks the next node (`'next'`). None
   * able: NodesBehind when a node was behind or errors pass on (wait: nothing is decided), else an Error.
   */
  async function askAtOrPast(
    calls: readonly RpcCall[],
    pinned: bigint,
    onCallError: 'throw' | 'next',
  ): Promise<unknown[]> {
    const reasons: string[] = []
    let behind = false
    for (const url of urls) {
      let answers: RpcAnswer[]
      try {
        answers = await askOne(url, [{ method: 'eth_blockNumber', params: [] }, ...calls])
      } catch (error) {
        reasons.push(`${hostOf(url)}: ${error instanceof Error ? error.message : String(error)}`)
        continue
      }
      const [head, ...rest] = answers
      const headBlock = typeof head?.result === 'string' ? BigInt(head.result) : undefined
      if (headBlock === undefined || headBlock < pinned) {
        behind = true
        reasons.push(`${hostOf(url)}: head ${headBlock ?? '?'} (block ${pinned} needed)`)
        continue
      }
      observe(headBlock)
      const failed = rest.find((a) => a.error !== undefined)
      if (failed && onCallError === 'throw')
        throw new Error(`${hostOf(url)} at block ${pinned}: ${failed.error!.message}`)
      if (failed) {
        reasons.push(`${hostOf(url)}: ${failed.error!.message} (block ${pinned} needed)`)
        continue
      }
      return rest.map((a) => a.result)
    }
    const message = `No node answered at block ${pinned} (${reasons.join('; ')})`
    if (behind || onCallError === 'next')
      throw new NodesBehind(`${message}; nothing is decided until one does.`)
    throw new Error(message)
  }

  /** Landed or pending, from each hash's receipt and transaction answers (`lookups` order). */
  function seenIn(
    found: readonly unknown[],
    hashes: readonly Hash[],
  ): { kind: 'landed' | 'pending'; hash: Hash } | undefined {
    const receipts = found.slice(0, hashes.length)
    const transactions = found.slice(hashes.length)
    const landed = receipts.findIndex(Boolean)
    if (landed >= 0) {
      observe(BigInt((receipts[landed] as { blockNumber: Hex }).blockNumber))
      return { kind: 'landed', hash: hashes[landed]! }
    }
    const known = transactions.findIndex(Boolean)
    if (known < 0) return undefined
    const inBlock = (transactions[known] as { blockNumber: Hex | null }).blockNumber !== null
    return { kind: inBlock ? 'landed' : 'pending', hash: hashes[known]! }
  }
}

const lookups = (hashes: readonly Hash[]): RpcCall[] => [
  ...hashes.map((hash) => ({ method: 'eth_getTransactionReceipt', params: [hash] })),
  ...hashes.map((hash) => ({ method: 'eth_getTransactionByHash', params: [hash] })),
]

export interface RpcCall {
  method: string
  params: unknown[]
}

interface RpcAnswer {
  id?: unknown
  result?: unknown
  error?: { code: number; message: string }
}

/** Raises the high-water mark from the block numbers an answer carries. */
function observeAnswer(method: string, answer: unknown, observe: (block: bigint) => void): void {
  try {
    if (method === 'eth_blockNumber' && typeof answer === 'string') observe(BigInt(answer))
    else if (
      (method === 'eth_getTransactionReceipt' || method === 'eth_getBlockByNumber') &&
      answer !== null &&
      typeof answer === 'object'
    ) {
      const block =
        (answer as { blockNumber?: unknown; number?: unknown }).blockNumber ??
        (answer as { number?: unknown }).number
      if (typeof block === 'string') observe(BigInt(block))
    }
  } catch {
    // Not a number: nothing seen.
  }
}

/** A URL's host for messages: API keys often sit in the path or the query. */
function hostOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return 'node'
  }
}
