import { type ChildProcess, spawn, spawnSync } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'

export interface TestValidatorProcess {
  readonly rpcUrl: string
  readonly wsUrl: string
  stop(): Promise<void>
}

/** True when the Solana CLI's `solana-test-validator` can be started from PATH. */
export function hasSolanaTestValidator(): boolean {
  const probe = spawnSync('solana-test-validator', ['--version'], { stdio: 'ignore', timeout: 10_000 })
  return probe.error === undefined && probe.status === 0
}

/**
 * Starts `solana-test-validator` on random ports with a throw-away ledger and waits until its RPC
 * answers `getHealth`. The validator serves WebSocket on the RPC port + 1.
 */
export async function startTestValidator(
  options: { timeoutMs?: number } = {},
): Promise<TestValidatorProcess> {
  const ledger = await mkdtemp(join(tmpdir(), 'caipay-solana-ledger-'))
  const rpcPort = await freePortPair()
  const faucetPort = await freePort()
  const gossipPort = await freePort()
  // The validator needs a private range for its TPU/TVU sockets; pick one unlikely to collide.
  const rangeStart = 20_000 + Math.floor(Math.random() * 40_000)
  const child = spawn(
    'solana-test-validator',
    [
      '--ledger',
      ledger,
      '--reset',
      '--quiet',
      '--bind-address',
      '127.0.0.1',
      '--rpc-port',
      String(rpcPort),
      '--faucet-port',
      String(faucetPort),
      '--gossip-port',
      String(gossipPort),
      '--dynamic-port-range',
      `${rangeStart}-${rangeStart + 25}`,
    ],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  )
  let stderr = ''
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString()).slice(-4000)
  })
  const rpcUrl = `http://127.0.0.1:${rpcPort}`
  const stop = async () => {
    await killAndWait(child)
    await rm(ledger, { recursive: true, force: true })
  }
  try {
    await waitHealthy(rpcUrl, child, options.timeoutMs ?? 60_000)
  } catch (error) {
    await stop()
    throw new Error(`solana-test-validator did not start: ${(error as Error).message}\n${stderr}`)
  }
  return { rpcUrl, wsUrl: `ws://127.0.0.1:${rpcPort + 1}`, stop }
}

async function waitHealthy(rpcUrl: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`exited with code ${child.exitCode}`)
    try {
      const response = await fetch(rpcUrl, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'getHealth' }),
      })
      const body = (await response.json()) as { result?: string }
      if (body.result === 'ok') return
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 250))
  }
  throw new Error(`no healthy RPC within ${timeoutMs} ms`)
}

function killAndWait(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve()
    const force = setTimeout(() => child.kill('SIGKILL'), 10_000)
    child.once('exit', () => {
      clearTimeout(force)
      resolve()
    })
    child.kill('SIGTERM')
  })
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number }
      server.close(() => resolve(port))
    })
  })
}

/** A port P such that P + 1 (the validator's WebSocket port) is free as well, at the time of asking. */
async function freePortPair(): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const port = await freePort()
    const ok = await new Promise<boolean>((resolve) => {
      const probe = createServer()
      probe.once('error', () => resolve(false))
      probe.listen(port + 1, '127.0.0.1', () => probe.close(() => resolve(true)))
    })
    if (ok) return port
  }
  throw new Error('No free port pair found for solana-test-validator')
}
