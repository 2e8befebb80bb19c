/**
 * The black-box benchmark's own chain: an Anvil process mining a block every second, spoken to over
 * plain JSON-RPC (HTTP for calls, a WebSocket `newHeads` subscription to time blocks as they arrive),
 * and transactions signed locally from keys whose nonces are counted here.
 * Nothing in this file comes from caipay: only viem's signing and encoding, and the TestUSDC artifact.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { createRequire } from 'node:module'
import { createServer } from 'node:net'
import { type Address, type Hash, type Hex, hexToBigInt, numberToHex } from 'viem'
import type { PrivateKeyAccount } from 'viem/accounts'
import WebSocket from 'ws'

export const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export interface Receipt {
  transactionHash: Hash
  blockNumber: Hex
  status: Hex
  gasUsed: Hex
  contractAddress: Address | null
}

export interface Chain {
  rpcUrl: string
  chainId: number
  call<T = unknown>(method: string, params?: unknown[]): Promise<T>
  /** One JSON-RPC batch; answers in request order. */
  batch<T = unknown>(calls: readonly { method: string; params: unknown[] }[]): Promise<T[]>
  heads: HeadClock
  stop(): Promise<void>
}

/** The heads as they arrived (a `newHeads` subscription), to count a wait in blocks and time a run. */
export interface HeadClock {
  /** Resolves with the next head's number and arrival time. */
  next(): Promise<{ number: number; at: number }>
  /** The newest head that had arrived at `time` (ms since the epoch). */
  at(time: number): number
  /** When head `number` arrived (ms since the epoch). */
  arrivalOf(number: number): number | undefined
  /** When the node first announced transaction `hash` as pending (a `newPendingTransactions` subscription). */
  sentAt(hash: Hash): number | undefined
}

/** The Anvil binary the npm package brings for this platform, else one on PATH. */
function anvilBinary(): string {
  try {
    return createRequire(import.meta.url).resolve('@foundry-rs/anvil-linux-amd64/bin/anvil')
  } catch {
    return 'anvil'
  }
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const address = server.address()
      server.close(() => resolve(typeof address === 'object' && address ? address.port : 0))
    })
  })
}

/** Anvil with `--block-time 1` (interval mining) on a free loopback port. */
export async function startChain(blockTimeSeconds = 1): Promise<Chain> {
  const port = await freePort()
  const child: ChildProcess = spawn(
    anvilBinary(),
    ['--host', '127.0.0.1', '--port', String(port), '--block-time', String(blockTimeSeconds), '--silent'],
    { stdio: 'ignore' },
  )
  const rpcUrl = `http://127.0.0.1:${port}`
  let id = 0
  const post = async (body: unknown) => {
    const response = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    })
    return response.json() as Promise<unknown>
  }
  const unwrap = (answer: unknown, method: string) => {
    const { result, error } = answer as { result?: unknown; error?: { message: string } }
    if (error) throw new Error(`${method}: ${error.message}`)
    return result
  }
  const call = async <T>(method: string, params: unknown[] = []) =>
    unwrap(await post({ jsonrpc: '2.0', id: ++id, method, params }), method) as T
  const batch = async <T>(calls: readonly { method: string; params: unknown[] }[]) => {
    if (calls.length === 0) return []
    const first = id + 1
    const answers = (await post(
      calls.map(({ method, params }) => ({ jsonrpc: '2.0', id: ++id, method, params })),
    )) as { id: number }[]
    const byId = new Map(answers.map((a) => [a.id, a]))
    return calls.map(({ method }, i) => unwrap(byId.get(first + i), method) as T)
  }
  const stop = async () => {
    socket?.close(1000)
    if (child.exitCode !== null) return
    child.kill('SIGTERM')
    await new Promise((resolve) => child.once('exit', resolve))
  }
  let socket: WebSocket | undefined
  try {
    for (let waited = 0; ; waited += 50) {
      if (child.exitCode !== null) throw new Error(`anvil exited with code ${child.exitCode}`)
      try {
        await call('eth_chainId')
        break
      } catch (error) {
        if (waited > 15_000) throw error
        await sleep(50)
      }
    }
    const chainId = Number(await call<Hex>('eth_chainId'))
    socket = new WebSocket(`ws://127.0.0.1:${port}`)
    const heads = await subscribeHeads(socket)
    return { rpcUrl, chainId, call, batch, heads, stop }
  } catch (error) {
    await stop()
    throw error
  }
}

async function subscribeHeads(socket: WebSocket): Promise<HeadClock> {
  const seen: { number: number; at: number }[] = []
  const pending = new Map<string, number>()
  const subscriptions = new Map<string, 'heads' | 'pending'>()
  let waiting: ((head: { number: number; at: number }) => void)[] = []
  await new Promise((resolve, reject) => {
    socket.once('open', resolve)
    socket.once('error', reject)
  })
  const subscribed = new Promise<void>((resolve) => {
    socket.on('message', (data) => {
      const at = Date.now()
      const message = JSON.parse(String(data)) as {
        id?: number
        result?: string
        method?: string
        params?: { subscription: string; result: { number?: Hex } | Hash }
      }
      if (message.id !== undefined && message.result) {
        subscriptions.set(message.result, message.id === 1 ? 'heads' : 'pending')
        if (subscriptions.size === 2) resolve()
        return
      }
      if (message.method !== 'eth_subscription' || !message.params) return
      const { subscription, result } = message.params
      if (subscriptions.get(subscription) === 'pending' && typeof result === 'string') {
        if (!pending.has(result.toLowerCase())) pending.set(result.toLowerCase(), at)
        return
      }
      if (typeof result === 'string' || result.number === undefined) return
      const head = { number: Number(result.number), at }
      seen.push(head)
      const woken = waiting
      waiting = []
      for (const wake of woken) wake(head)
    })
  })
  socket.send(JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_subscribe', params: ['newHeads'] }))
  socket.send(
    JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'eth_subscribe', params: ['newPendingTransactions'] }),
  )
  await subscribed
  return {
    next: () => new Promise((resolve) => waiting.push(resolve)),
    at(time) {
      let number = seen[0] ? seen[0].number - 1 : 0
      for (const head of seen) if (head.at <= time) number = head.number
      return number
    },
    arrivalOf: (number) => seen.find((head) => head.number === number)?.at,
    sentAt: (hash) => pending.get(hash.toLowerCase()),
  }
}

export interface Call {
  to?: Address
  data: Hex
  gas: bigint
}

/**
 * Signs `calls` from `account` with consecutive nonces counted here (from the chain's pending count),
 * fees at twice the current base fee plus the suggested tip. Returns the raw transactions.
 */
export async function signPipelined(
  chain: Chain,
  account: PrivateKeyAccount,
  calls: readonly Call[],
): Promise<Hex[]> {
  const [nonceHex, block, tipHex] = await chain.batch<Hex | { baseFeePerGas: Hex }>([
    { method: 'eth_getTransactionCount', params: [account.address, 'pending'] },
    { method: 'eth_getBlockByNumber', params: ['latest', false] },
    { method: 'eth_maxPriorityFeePerGas', params: [] },
  ])
  let nonce = Number(nonceHex as Hex)
  const tip = hexToBigInt(tipHex as Hex)
  const maxFeePerGas = hexToBigInt((block as { baseFeePerGas: Hex }).baseFeePerGas) * 2n + tip
  const raws: Hex[] = []
  for (const { to, data, gas } of calls) {
    raws.push(
      await account.signTransaction({
        type: 'eip1559',
        chainId: chain.chainId,
        ...(to && { to }),
        data,
        gas,
        nonce: nonce++,
        maxFeePerGas,
        maxPriorityFeePerGas: tip,
      }),
    )
  }
  return raws
}

/** Sends raw transactions in one batch, without waiting for anything. */
export function broadcast(chain: Chain, raws: readonly Hex[]): Promise<Hash[]> {
  return chain.batch<Hash>(raws.map((raw) => ({ method: 'eth_sendRawTransaction', params: [raw] })))
}

/** Waits for every receipt (checked at each new head); throws when one reverted. */
export async function receiptsOf(
  chain: Chain,
  hashes: readonly Hash[],
  timeoutMs = 60_000,
): Promise<Receipt[]> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const receipts = await chain.batch<Receipt | null>(
      hashes.map((hash) => ({ method: 'eth_getTransactionReceipt', params: [hash] })),
    )
    if (receipts.every((r) => r !== null)) {
      const reverted = receipts.find((r) => r.status !== '0x1')
      if (reverted) throw new Error(`Transaction ${reverted.transactionHash} reverted.`)
      return receipts
    }
    if (Date.now() > deadline) throw new Error('Transactions not mined in time.')
    await Promise.race([chain.heads.next(), sleep(1_500)])
  }
}

export function setBalance(chain: Chain, address: Address, wei: bigint): Promise<unknown> {
  return chain.call('anvil_setBalance', [address, numberToHex(wei)])
}
