import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { createPublicClient, createWalletClient, http } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { testUsdcAbi } from '../fixtures/token/index.js'
import { type AnvilInstance, anvilPrivateKeys, deployTestToken, mintTestToken, startAnvil } from './anvil.js'

const run = promisify(execFile)

describe('startAnvil', () => {
  let anvil: AnvilInstance
  beforeAll(async () => {
    anvil = await startAnvil()
  })
  afterAll(() => anvil?.stop())

  it('serves the default chain on a local port', async () => {
    expect(anvil.chainId).toBe(31337)
    expect(anvil.caip2).toBe('eip155:31337')
    expect(anvil.rpcUrl).toBe(`http://127.0.0.1:${anvil.port}`)
    const client = createPublicClient({ transport: http(anvil.rpcUrl) })
    expect(await client.getChainId()).toBe(31337)
  })

  it('exports the keys of the accounts Anvil funds', async () => {
    const funded = await createWalletClient({ transport: http(anvil.rpcUrl) }).getAddresses()
    const ours = anvilPrivateKeys.map((key) => privateKeyToAccount(key).address.toLowerCase())
    expect(funded.map((a) => a.toLowerCase())).toEqual(ours)
  })

  it('deploys a USDC-like token and mints it', async () => {
    const client = createPublicClient({ transport: http(anvil.rpcUrl) })
    const token = await deployTestToken(anvil.rpcUrl, anvilPrivateKeys[0])
    const holder = privateKeyToAccount(anvilPrivateKeys[5]).address
    await mintTestToken(anvil.rpcUrl, token, holder, 2_500_000n)
    const read = <F extends 'name' | 'symbol' | 'decimals'>(functionName: F) =>
      client.readContract({ address: token, abi: testUsdcAbi, functionName })
    expect([await read('name'), await read('symbol'), await read('decimals')]).toEqual([
      'USD Coin',
      'USDC',
      6,
    ])
    expect(
      await client.readContract({
        address: token,
        abi: testUsdcAbi,
        functionName: 'balanceOf',
        args: [holder],
      }),
    ).toBe(2_500_000n)
    // EIP-5267: payment code reads the signing domain from the chain.
    const domain = await client.getEip712Domain({ address: token })
    expect(domain.domain).toMatchObject({
      name: 'USD Coin',
      version: '2',
      chainId: 31337,
      verifyingContract: token,
    })
  })
})

describe('startAnvil options and lifecycle', () => {
  it('takes a chain id, runs instances side by side and frees the port on stop', async () => {
    const started = Date.now()
    const [a, b] = await Promise.all([startAnvil({ chainId: 8453 }), startAnvil({ chainId: 10 })])
    const elapsed = Date.now() - started
    try {
      expect([a.caip2, b.caip2]).toEqual(['eip155:8453', 'eip155:10'])
      expect(a.port).not.toBe(b.port)
      expect(await createPublicClient({ transport: http(b.rpcUrl) }).getChainId()).toBe(10)
      // Generous bound for a shared 2-core machine; typically ~100 ms.
      expect(elapsed).toBeLessThan(5_000)
    } finally {
      await Promise.all([a.stop(), b.stop()])
    }
    await expect(fetch(a.rpcUrl, { method: 'POST' })).rejects.toThrow()
  })

  it('kills its node when the process exits without stop()', async () => {
    const script = [
      `import { startAnvil } from ${JSON.stringify(fileURLToPath(new URL('./anvil.ts', import.meta.url)))}`,
      'const anvil = await startAnvil()',
      'console.log(anvil.rpcUrl)',
    ].join('\n')
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script])
    const rpcUrl = stdout.trim()
    expect(rpcUrl).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/)
    await expect(fetch(rpcUrl, { method: 'POST' })).rejects.toThrow()
  })

  it('retries when the fixed port is taken instead of talking to the other node', async () => {
    const first = await startAnvil()
    try {
      const refused = await startAnvil({ port: first.port, chainId: 5, timeoutMs: 3_000 }).then(
        () => undefined,
        (error: Error) => error,
      )
      // Refused because the port is busy or the node there is another chain, not for a missing binary.
      expect(String(refused?.cause)).toMatch(/exited before it was ready|reports chain (31337|0x7a69), not 5/)
      expect(await createPublicClient({ transport: http(first.rpcUrl) }).getChainId()).toBe(31337)
    } finally {
      await first.stop()
    }
  })
})
