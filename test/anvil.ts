/**
 * Anvil harness: one real Anvil node per test file (ports spread per vitest worker), plus the
 * TestUSDC deploy/mint helpers. Test-only; nothing in src/ imports it.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { accessSync, constants } from 'node:fs'
import { createRequire } from 'node:module'
import { createServer, type Socket } from 'node:net'
import path from 'node:path'
import {
  type Address,
  type Chain,
  createPublicClient,
  createWalletClient,
  defineChain,
  getAddress,
  type Hash,
  type Hex,
  http,
  type LocalAccount,
  toHex,
} from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { testUsdcAbi, testUsdcBytecode } from '../fixtures/token/index.js'
import {
  type AuthorizationKind,
  authorizationTypedData as serverAuthorizationTypedData,
} from '../src/server/chains/evm/authorization.js'

/**
 * Private keys of Anvil's default accounts (mnemonic `test test ... junk`, m/44'/60'/0'/0/i).
 * Public knowledge: anything sent to them on a real network is taken within seconds.
 */
export const anvilPrivateKeys = [
  '0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80',
  '0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d',
  '0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a',
  '0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6',
  '0x47e179ec197488593b187f80a00eb0da91f1b9d0b13f8733639f19c30a34926a',
  '0x8b3a350cf5c34c9194ca85829a2df0ec3153be0318b5e2d3348e872092edffba',
  '0x92db14e403b83dfe3df233f83dfa3a0d7096f21ca9b0d6d6b8d88b2b4ec1564e',
  '0x4bbbf85ce3377467afe5d46f804f221813b2bb87f24d81f60f1fcdbf7cbf4356',
  '0xdbda1821b80551c9d65939329250298aa3472ba22feea921c0cf5d620ea67b97',
  '0x2a871d0798f97d79848a013d4936a73bf4cc922c825d33c1cf7073dff6d409c6',
] as const satisfies readonly Hex[]

export interface StartAnvilOptions {
  /** Default 31337 (Anvil's own default). */
  chainId?: number
  /** Fixed port; by default one is picked in this worker's range. */
  port?: number
  /** Extra command-line arguments, e.g. `['--block-time', '1']`. */
  args?: readonly string[]
  /** How long to wait for the node to answer; default 10 s. */
  timeoutMs?: number
}

export interface AnvilInstance {
  rpcUrl: string
  chainId: number
  /** CAIP-2 id, `eip155:<chainId>`. */
  caip2: string
  port: number
  /** The node's process id (a bench reads its CPU time from /proc). */
  pid: number | undefined
  stop(): Promise<void>
}

const anvilBinary = locateAnvil()
const running = new Set<ChildProcess>()
const portAttempts = 8
const portsPerWorker = 400

/** Starts a fresh Anvil node; retries on another port when the chosen one is taken. */
export async function startAnvil(options: StartAnvilOptions = {}): Promise<AnvilInstance> {
  if (anvilBinary === undefined) throw new Error(anvilMissing)
  const chainId = options.chainId ?? 31337
  let lastError: unknown
  for (let attempt = 0; attempt < (options.port ? 1 : portAttempts); attempt++) {
    const port = options.port ?? (await pickFreePort())
    try {
      return await launch(port, chainId, options)
    } catch (error) {
      lastError = error
    }
  }
  throw new Error(`Anvil did not start after ${portAttempts} attempts`, { cause: lastError })
}

/**
 * Where Anvil comes from: the platform package that tools/anvil (a dev dependency) brings as an
 * optional dependency where the registry has one (linux/x64), so `npm ci` works everywhere; else
 * an `anvil` on PATH (Foundry installed by hand). `undefined` when neither exists.
 */
export function locateAnvil(
  platform: string = process.platform,
  arch: string = process.arch,
  searchPath: string = process.env.PATH ?? '',
): string | undefined {
  const cpu = arch === 'x64' ? 'amd64' : arch
  const executable = platform === 'win32' ? 'anvil.exe' : 'anvil'
  const binary = `@foundry-rs/anvil-${platform}-${cpu}/bin/${executable}`
  const require = createRequire(import.meta.url)
  // Hoisted to the root node_modules by npm, or beside tools/anvil (the package that brings it).
  for (const from of [import.meta.url, 'caipay-anvil/package.json']) {
    try {
      return createRequire(from === import.meta.url ? from : require.resolve(from)).resolve(binary)
    } catch {
      // Not there: try the next place, then PATH.
    }
  }
  for (const dir of searchPath.split(path.delimiter)) {
    if (!dir) continue
    const candidate = path.join(dir, executable)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // Not here.
    }
  }
  return undefined
}

/** Why EVM tests cannot run here; one line, printed by the global setup and thrown by startAnvil. */
export const anvilMissing = `Anvil not found: no @foundry-rs/anvil-* package for ${process.platform}/${process.arch} and no anvil on PATH. Install Foundry (anvil on PATH) to run the EVM tests.`

async function launch(port: number, chainId: number, options: StartAnvilOptions): Promise<AnvilInstance> {
  const args = ['--host', '127.0.0.1', '--port', String(port), '--chain-id', String(chainId), '--silent']
  const child = spawn(anvilBinary as string, [...args, ...(options.args ?? [])], {
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  track(child)
  // A forgotten stop() must not keep a test process alive; the 'exit' hook then kills the node.
  child.unref()
  ;(child.stderr as Socket | null)?.unref()
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const exited = new Promise<never>((_, reject) => {
    child.once('exit', (code, signal) =>
      reject(new Error(`Anvil exited before it was ready (${signal ?? code}): ${stderr.trim()}`)),
    )
    child.once('error', reject)
  })
  exited.catch(() => {})
  const rpcUrl = `http://127.0.0.1:${port}`
  try {
    // Racing against `exited` matters: if our node lost the port to someone else's, the poll
    // could otherwise succeed against the other node.
    await Promise.race([waitUntilReady(rpcUrl, chainId, options.timeoutMs ?? 10_000), exited])
  } catch (error) {
    await kill(child)
    throw error
  }
  return { rpcUrl, chainId, caip2: `eip155:${chainId}`, port, pid: child.pid, stop: () => kill(child) }
}

async function waitUntilReady(rpcUrl: string, chainId: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    try {
      const response = await fetch(rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'eth_chainId', params: [] }),
      })
      const body = (await response.json()) as { result?: string }
      if (body.result !== undefined && Number(body.result) === chainId) return
      throw new Error(`a node on ${rpcUrl} reports chain ${body.result}, not ${chainId}`)
    } catch (error) {
      if (error instanceof Error && error.message.startsWith('a node on')) throw error
      await new Promise((resolve) => setTimeout(resolve, 10))
    }
  }
  throw new Error(`Anvil at ${rpcUrl} did not answer within ${timeoutMs} ms`)
}

/**
 * A random port in this worker's own range, checked free right before use. Separate ranges keep
 * parallel vitest workers from racing each other; the random offset keeps re-runs and other
 * engineers' processes from colliding with a fixed port.
 */
async function pickFreePort(): Promise<number> {
  const pool = Number(process.env.VITEST_POOL_ID ?? 0) % 40
  for (;;) {
    const port = 20_000 + pool * portsPerWorker + Math.floor(Math.random() * portsPerWorker)
    if (await isFree(port)) return port
  }
}

function isFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer()
    server.once('error', () => resolve(false))
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)))
  })
}

function track(child: ChildProcess): void {
  if (running.size === 0) process.once('exit', killAllSync)
  running.add(child)
  child.once('exit', () => running.delete(child))
}

// 'exit' handlers must be synchronous: SIGKILL now, nothing to wait for.
function killAllSync(): void {
  for (const child of running) child.kill('SIGKILL')
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  child.kill('SIGTERM')
  const timer = setTimeout(() => child.kill('SIGKILL'), 2_000)
  await exited
  clearTimeout(timer)
}

/**
 * Chain-level faults on an Anvil node (the node itself, not the proxy): a base fee that leaves a sent
 * transaction stuck, mining stopped and resumed, a reorg that drops recent blocks.
 */
export interface AnvilControl {
  /** The next block's base fee (wei): a transaction whose max fee is below it waits in the pool. */
  setNextBaseFee(wei: bigint): Promise<void>
  /** Automine on (a block per transaction) or off (transactions wait in the pool until `mine`). */
  setAutomine(on: boolean): Promise<void>
  mine(blocks?: number): Promise<void>
  /**
   * Replaces the last `depth` blocks by new ones: their transactions are gone from the chain. The new
   * blocks are empty, or hold `transactions` (signed raw bytes, each with the index of its new block).
   */
  reorg(depth: number, transactions?: ReadonlyArray<readonly [raw: Hex, block: number]>): Promise<void>
  snapshot(): Promise<Hex>
  revert(id: Hex): Promise<void>
  blockNumber(): Promise<bigint>
  /** Transaction hashes waiting in the pool. */
  pending(): Promise<Hash[]>
}

export function anvilControl(rpcUrl: string): AnvilControl {
  let id = 0
  const call = async <T>(method: string, params: unknown[] = []): Promise<T> => {
    const response = await fetch(rpcUrl, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method, params }),
    })
    const body = (await response.json()) as { result?: T; error?: { message: string } }
    if (body.error) throw new Error(`${method}: ${body.error.message}`)
    return body.result as T
  }
  return {
    setNextBaseFee: (wei) => call('anvil_setNextBlockBaseFeePerGas', [toHex(wei)]).then(() => {}),
    setAutomine: (on) => call('evm_setAutomine', [on]).then(() => {}),
    mine: (blocks = 1) => call('anvil_mine', [toHex(blocks)]).then(() => {}),
    reorg: (depth, transactions = []) => call('anvil_reorg', [depth, transactions]).then(() => {}),
    snapshot: () => call<Hex>('evm_snapshot'),
    revert: (snapshotId) => call('evm_revert', [snapshotId]).then(() => {}),
    blockNumber: () => call<Hex>('eth_blockNumber').then(BigInt),
    async pending() {
      const content = await call<{ pending: Record<string, Record<string, { hash: Hash }>> }>(
        'txpool_content',
      )
      return Object.values(content.pending).flatMap((byNonce) => Object.values(byNonce).map((tx) => tx.hash))
    },
  }
}

/** A viem chain for a local node; Anvil's chain id may be anything, so the `anvil` preset will not do. */
export function anvilChain(chainId: number, rpcUrl: string): Chain {
  return defineChain({
    id: chainId,
    name: `Anvil ${chainId}`,
    nativeCurrency: { name: 'Ether', symbol: 'ETH', decimals: 18 },
    rpcUrls: { default: { http: [rpcUrl] } },
  })
}

async function clientsFor(rpcUrl: string, privateKey: Hex) {
  const transport = http(rpcUrl)
  const chainId = await createPublicClient({ transport }).getChainId()
  const chain = anvilChain(chainId, rpcUrl)
  return {
    publicClient: createPublicClient({ chain, transport }),
    walletClient: createWalletClient({ chain, transport, account: privateKeyToAccount(privateKey) }),
  }
}

/** Deploys TestUSDC and returns its address once the deployment is mined. */
export async function deployTestToken(
  rpcUrl: string,
  deployerPrivateKey: Hex = anvilPrivateKeys[0],
): Promise<Address> {
  const { publicClient, walletClient } = await clientsFor(rpcUrl, deployerPrivateKey)
  const hash = await walletClient.deployContract({ abi: testUsdcAbi, bytecode: testUsdcBytecode })
  const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 })
  if (receipt.status !== 'success' || !receipt.contractAddress) {
    throw new Error(`TestUSDC deployment failed in ${hash}`)
  }
  return getAddress(receipt.contractAddress)
}

/** Mints `amount` minor units (6 decimals) of TestUSDC to `to` and waits until mined. */
export async function mintTestToken(
  rpcUrl: string,
  token: Address,
  to: Address,
  amount: bigint,
  minterPrivateKey: Hex = anvilPrivateKeys[0],
): Promise<Hash> {
  const { publicClient, walletClient } = await clientsFor(rpcUrl, minterPrivateKey)
  const hash = await walletClient.writeContract({
    address: token,
    abi: testUsdcAbi,
    functionName: 'mint',
    args: [to, amount],
  })
  const receipt = await publicClient.waitForTransactionReceipt({ hash, pollingInterval: 50 })
  if (receipt.status !== 'success') throw new Error(`TestUSDC mint failed in ${hash}`)
  return hash
}

export type { AuthorizationKind }

export interface AuthorizationParameters {
  token: Address
  chainId: number
  from: Address
  to: Address
  value: bigint
  kind?: AuthorizationKind
  /** Unix seconds; default 0 (valid now) and one hour from now. */
  validAfter?: bigint
  validBefore?: bigint
  nonce?: Hex
}

/**
 * EIP-3009 typed data for TestUSDC exactly as the payments server sends it over JSON (its own builder,
 * with TestUSDC's domain and test defaults). Pass it through `JSON.stringify` for `eth_signTypedData_v4`.
 */
export function authorizationTypedData(p: AuthorizationParameters) {
  const now = BigInt(Math.floor(Date.now() / 1000))
  return serverAuthorizationTypedData({
    kind: p.kind ?? 'TransferWithAuthorization',
    chainId: p.chainId,
    token: p.token,
    domain: { name: 'USD Coin', version: '2' },
    from: p.from,
    to: p.to,
    value: p.value,
    validAfter: p.validAfter ?? 0n,
    validBefore: p.validBefore ?? now + 3600n,
    nonce: p.nonce ?? toHex(randomBytes(32)),
  })
}

/** EIP-3009 typed data in its JSON form: what `authorizationTypedData` returns, or a server's option. */
export interface AuthorizationTypedDataJson {
  types: Record<string, readonly { name: string; type: string }[]>
  primaryType: string
  domain: Record<string, unknown>
  message: Record<string, unknown> & { value: string; validAfter: string; validBefore: string }
}

/**
 * Signs that JSON form with a bare key, as a wallet would: viem wants the uints back as bigints and no
 * `EIP712Domain` among the types (it derives that from the domain).
 */
export function signAuthorization(account: LocalAccount, typed: AuthorizationTypedDataJson): Promise<Hex> {
  const { EIP712Domain: _, ...types } = typed.types
  return account.signTypedData({
    domain: typed.domain,
    types,
    primaryType: typed.primaryType,
    message: {
      ...typed.message,
      value: BigInt(typed.message.value),
      validAfter: BigInt(typed.message.validAfter),
      validBefore: BigInt(typed.message.validBefore),
    },
  } as Parameters<LocalAccount['signTypedData']>[0])
}
