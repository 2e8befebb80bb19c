import { Keypair, LAMPORTS_PER_SOL, SystemProgram, Transaction } from '@solana/web3.js'
import { createPublicClient, createWalletClient, http, parseGwei } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type AnvilInstance, anvilChain, anvilControl, anvilPrivateKeys, startAnvil } from './anvil.js'
import { type FaultProxy, startFaultProxy } from './rpcFaults.js'
import { airdrop, type SolanaValidator, startSolanaValidator } from './solana/index.js'

describe('fault proxy in front of Anvil', () => {
  let anvil: AnvilInstance
  let proxy: FaultProxy
  const account = privateKeyToAccount(anvilPrivateKeys[1])
  const to = privateKeyToAccount(anvilPrivateKeys[2]).address

  beforeAll(async () => {
    anvil = await startAnvil()
    proxy = await startFaultProxy(anvil.rpcUrl)
  })
  afterAll(async () => {
    await proxy?.stop()
    await anvil?.stop()
  })

  const clients = () => {
    const chain = anvilChain(anvil.chainId, proxy.url)
    const transport = http(proxy.url, { retryCount: 0 })
    return {
      publicClient: createPublicClient({ chain, transport }),
      walletClient: createWalletClient({ chain, transport, account }),
      node: createPublicClient({ chain, transport: http(anvil.rpcUrl) }),
    }
  }

  it('a dropped eth_sendRawTransaction answers its real hash, and the node never sees the transaction', async () => {
    const { walletClient, node } = clients()
    proxy.inject('eth_sendRawTransaction', { kind: 'drop' }, { times: 1 })
    const hash = await walletClient.sendTransaction({ to, value: 1n })
    expect(hash).toMatch(/^0x[0-9a-f]{64}$/)
    await expect(node.getTransaction({ hash })).rejects.toThrow(/could not be found/)
    // The fault was for one call: the next send goes through.
    const next = await walletClient.sendTransaction({ to, value: 1n })
    expect((await node.waitForTransactionReceipt({ hash: next })).status).toBe('success')
  })

  it('withheld receipts read as "not yet" until cleared, then the real receipt comes back', async () => {
    const { walletClient, publicClient } = clients()
    const hash = await walletClient.sendTransaction({ to, value: 1n })
    proxy.inject('eth_getTransactionReceipt', { kind: 'withhold' })
    await expect(publicClient.getTransactionReceipt({ hash })).rejects.toThrow(/could not be found/)
    proxy.clear('eth_getTransactionReceipt')
    expect((await publicClient.getTransactionReceipt({ hash })).status).toBe('success')
  })

  it('an RPC error, a 429 and malformed JSON each reach the client as a failure, not a result', async () => {
    const { publicClient } = clients()
    proxy.inject(
      'eth_blockNumber',
      { kind: 'error', code: -32000, message: 'header not found' },
      { times: 1 },
    )
    await expect(publicClient.getBlockNumber({ cacheTime: 0 })).rejects.toThrow(/header not found/)
    proxy.inject('eth_blockNumber', { kind: 'rateLimited' }, { times: 1 })
    await expect(publicClient.getBlockNumber({ cacheTime: 0 })).rejects.toThrow(/429|Too many|rate/i)
    proxy.inject('eth_blockNumber', { kind: 'malformed' }, { times: 1 })
    await expect(publicClient.getBlockNumber({ cacheTime: 0 })).rejects.toThrow()
    expect(await publicClient.getBlockNumber({ cacheTime: 0 })).toBeGreaterThan(0n)
  })

  it('a hung request stays unanswered until cut (a timeout for the caller), and delay answers late', async () => {
    const chain = anvilChain(anvil.chainId, proxy.url)
    const publicClient = createPublicClient({
      chain,
      transport: http(proxy.url, { retryCount: 0, timeout: 300 }),
    })
    proxy.inject('eth_chainId', { kind: 'hang' }, { times: 1 })
    await expect(publicClient.getChainId()).rejects.toThrow(/took too long|timed out/i)
    expect(proxy.held()).toBe(1)
    proxy.cutHeld()
    proxy.inject('eth_chainId', { kind: 'delay', ms: 150 }, { times: 1 })
    const started = Date.now()
    expect(await createPublicClient({ chain, transport: http(proxy.url) }).getChainId()).toBe(anvil.chainId)
    expect(Date.now() - started).toBeGreaterThanOrEqual(140)
  })

  it('a rewritten answer reaches the client in place of the node’s, and a lost answer leaves the node having acted unseen', async () => {
    const { walletClient, publicClient, node } = clients()
    proxy.inject(
      'eth_blockNumber',
      { kind: 'rewrite', fn: (answer) => ({ ...answer, result: '0x2a' }) },
      { times: 1 },
    )
    expect(await publicClient.getBlockNumber({ cacheTime: 0 })).toBe(42n)
    expect(await publicClient.getBlockNumber({ cacheTime: 0 })).not.toBe(42n)

    const nonce = await node.getTransactionCount({ address: account.address })
    proxy.inject('eth_sendRawTransaction', { kind: 'lostAnswer' }, { times: 1 })
    await expect(walletClient.sendTransaction({ to, value: 1n, nonce })).rejects.toThrow()
    // The node took it although the caller saw only a network error. Anvil answers a send when the pool
    // has it and mines right after, so a read at once may still find the block before.
    await vi.waitFor(
      async () => expect(await node.getTransactionCount({ address: account.address })).toBe(nonce + 1),
      { timeout: 5_000, interval: 20 },
    )
  })

  it('a batch meets the faults its calls would meet alone: per call for answers, whole for the connection', async () => {
    const chain = anvilChain(anvil.chainId, proxy.url)
    const batched = createPublicClient({
      chain,
      transport: http(proxy.url, { retryCount: 0, timeout: 300, batch: { wait: 0 } }),
    })
    const { walletClient } = clients()
    const hash = await walletClient.sendTransaction({ to, value: 1n })
    const other = await walletClient.sendTransaction({ to, value: 2n })
    const before = proxy.calls('eth_getTransactionReceipt')
    proxy.inject(
      'eth_blockNumber',
      { kind: 'error', code: -32000, message: 'header not found' },
      { times: 1 },
    )
    proxy.inject('eth_getTransactionReceipt', { kind: 'withhold' }, { times: 1 })
    const [failed, withheld, chainId, receipt] = await Promise.allSettled([
      batched.getBlockNumber({ cacheTime: 0 }),
      batched.getTransactionReceipt({ hash }),
      batched.getChainId(),
      batched.getTransactionReceipt({ hash: other }),
    ])
    expect(String((failed as PromiseRejectedResult).reason)).toMatch(/header not found/)
    expect(String((withheld as PromiseRejectedResult).reason)).toMatch(/could not be found/)
    expect(chainId).toEqual({ status: 'fulfilled', value: anvil.chainId })
    expect(receipt.status === 'fulfilled' && receipt.value.status).toBe('success')
    expect(proxy.calls('eth_getTransactionReceipt') - before).toBe(2)

    // One hung call holds the whole answer: the other calls of its batch time out with it, and their own
    // scripted faults, never applied, are still there for their next call.
    proxy.inject('eth_chainId', { kind: 'hang' }, { times: 1 })
    proxy.inject(
      'eth_blockNumber',
      { kind: 'error', code: -32000, message: 'header not found' },
      { times: 1 },
    )
    const held = await Promise.allSettled([batched.getChainId(), batched.getBlockNumber({ cacheTime: 0 })])
    expect(held.map((r) => r.status)).toEqual(['rejected', 'rejected'])
    expect(proxy.held()).toBe(1)
    proxy.cutHeld()
    await expect(batched.getBlockNumber({ cacheTime: 0 })).rejects.toThrow(/header not found/)
    expect(await batched.getBlockNumber({ cacheTime: 0 })).toBeGreaterThan(0n)
  })

  it('a raised base fee leaves a low-fee transaction unmined, and a reorg removes a mined one', async () => {
    const { walletClient, node } = clients()
    const control = anvilControl(anvil.rpcUrl)
    // Accepted into the pool at today's base fee, then the fee rises before it is mined.
    await control.setAutomine(false)
    const stuck = await walletClient.sendTransaction({
      to,
      value: 1n,
      maxFeePerGas: parseGwei('2'),
      maxPriorityFeePerGas: parseGwei('1'),
    })
    await control.setNextBaseFee(parseGwei('500'))
    await control.mine(2)
    // Anvil evicts it from the pool once it cannot pay the base fee: it will never be mined as signed.
    await expect(node.getTransactionReceipt({ hash: stuck })).rejects.toThrow(/could not be found/)
    expect(await control.pending()).not.toContain(stuck)
    await control.setAutomine(true)
    await control.setNextBaseFee(parseGwei('1'))
    const landed = await walletClient.sendTransaction({ to, value: 1n })
    expect((await node.waitForTransactionReceipt({ hash: landed })).status).toBe('success')

    await control.reorg(2)
    await expect(node.getTransactionReceipt({ hash: landed })).rejects.toThrow(/could not be found/)
  })
})

describe('fault proxy in front of the Solana harness', () => {
  let validator: SolanaValidator
  let proxy: FaultProxy

  beforeAll(async () => {
    validator = await startSolanaValidator({ backend: 'litesvm' })
    proxy = await startFaultProxy(validator.rpcUrl)
  })
  afterAll(async () => {
    await proxy?.stop()
    await validator?.stop()
  })

  it('a dropped sendTransaction answers the transaction signature, and the cluster never lands it', async () => {
    const payer = Keypair.generate()
    await airdrop(validator.connection, payer.publicKey, LAMPORTS_PER_SOL)
    const { blockhash } = await validator.connection.getLatestBlockhash()
    const tx = new Transaction({ feePayer: payer.publicKey, recentBlockhash: blockhash }).add(
      SystemProgram.transfer({
        fromPubkey: payer.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 1000,
      }),
    )
    tx.sign(payer)
    proxy.inject('sendTransaction', { kind: 'drop' }, { times: 1 })
    const answered = await fetch(proxy.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 1,
        method: 'sendTransaction',
        params: [tx.serialize().toString('base64'), { encoding: 'base64' }],
      }),
    }).then((r) => r.json() as Promise<{ result: string }>)
    const { encodeBase58 } = await import('../src/server/chains/solana/index.js')
    expect(answered.result).toBe(encodeBase58(tx.signature!))
    const status = await validator.connection.getSignatureStatus(answered.result)
    expect(status.value).toBeNull()

    proxy.inject('getSignatureStatuses', { kind: 'withhold' })
    const viaProxy = await fetch(proxy.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: 2,
        method: 'getSignatureStatuses',
        params: [[answered.result]],
      }),
    }).then((r) => r.json() as Promise<{ result: { value: unknown[] } }>)
    expect(viaProxy.result.value).toEqual([null])
    expect(proxy.calls('sendTransaction')).toBe(1)
  })
})
