import { encodeFunctionData, erc20Abi } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { configuredAssets } from '../../src/server/chains/configured.js'
import { createEvmChain, type EvmChain } from '../../src/server/chains/evm/chain.js'
import { NodesBehind } from '../../src/server/chains/evm/nodes.js'
import { createEvmSender, type EvmSender } from '../../src/server/chains/evm/sender.js'
import { isKnownTransaction, sendOnce } from '../../src/server/chains/evm/transactions.js'
import { RetryLater } from '../../src/server/jobs/runner.js'
import { type AnvilInstance, mintTestToken, startAnvil } from '../anvil.js'
import { type LoadBalancer, startLoadBalancer } from './laggingReplica.js'
import { createEvmEnv, type EvmEnv, usdc } from './support.js'

const silent = { info() {}, warn() {}, error() {} }

/**
 * A mined payout whose row is still `sent` (its worker died before it recorded the receipt) is looked up
 * again by the next worker, through a load balancer whose lookups land on a replica a few blocks behind.
 * The replica's "not found" must not be taken for "dropped": that signs a second payout.
 */
describe('a node behind a load balancer', () => {
  let env: EvmEnv
  let balancer: LoadBalancer
  let replica: AnvilInstance | undefined
  let chain: EvmChain
  let sender: EvmSender
  beforeAll(async () => {
    env = await createEvmEnv()
    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(50))
    balancer = await startLoadBalancer(env.anvil.rpcUrl, () => replica?.rpcUrl)
    const caip2 = env.anvil.caip2
    const config = env.t.app.config.chains[caip2]!
    chain = createEvmChain({
      caip2,
      chain: { ...config, rpcUrl: balancer.url },
      assets: configuredAssets(env.t.app.config)[caip2] ?? [],
      pollingIntervalMs: 25,
      log: silent,
    })
    sender = createEvmSender(env.t.db, chain)
  })
  afterAll(async () => {
    await replica?.stop()
    await balancer?.stop()
    await env?.close()
  })

  it('decides nothing from the replica, and finds the mined payout once a node at the newest block answers', async () => {
    const { paymentId } = await env.pay('100')
    const recipient = privateKeyToAccount(generatePrivateKey()).address
    const data = encodeFunctionData({ abi: erc20Abi, functionName: 'transfer', args: [recipient, usdc(1)] })
    const payout = () =>
      sendOnce({
        db: env.t.db,
        chain,
        sender,
        paymentId,
        purpose: 'settle',
        to: env.token,
        data,
        estimateGas: () => chain.publicClient.estimateGas({ account: chain.executor, to: env.token, data }),
      })
    const before = await env.publicClient.getBlockNumber()
    const first = await payout()
    const receipt = await env.publicClient.waitForTransactionReceipt({ hash: first.hash })
    // The chain moves on, and this process sees it (its head reads reach the primary).
    for (let i = 0; i < 3; i++) await env.publicClient.request({ method: 'evm_mine', params: [] } as never)
    const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 })
    expect(chain.nodes.highest()).toBe(head)
    expect(receipt.blockNumber).toBeLessThan(head)

    // A replica from before the payout was mined: every lookup lands on it.
    replica = await startAnvil({
      args: ['--fork-url', env.anvil.rpcUrl, '--fork-block-number', String(before), '--no-mining'],
    })
    balancer.lookupsToReplica = true
    // What an unpinned reader would have seen, proving the split is real: "not found" next to a used nonce.
    expect(await chain.publicClient.getTransactionReceipt({ hash: first.hash }).catch(() => null)).toBeNull()
    const used = await chain.publicClient.getTransactionCount({ address: chain.executor.address })
    expect(BigInt(used)).toBeGreaterThan(BigInt(first.row.nonce))

    // The next worker's look: nothing decided, nothing signed.
    await expect(payout()).rejects.toBeInstanceOf(NodesBehind)
    // A job never gives up on it (the runner's attempt limit does not count a RetryLater).
    await expect(payout()).rejects.toBeInstanceOf(RetryLater)
    await expect(isKnownTransaction(chain, first.hash)).rejects.toBeInstanceOf(NodesBehind)
    expect(balancer.replicaRequests).toBeGreaterThan(0)
    const rows = () =>
      env.t.db
        .selectFrom('evm_transactions')
        .select(['hash', 'status'])
        .where('payment_id', '=', paymentId)
        .execute()
    expect(await rows()).toEqual([{ hash: first.hash, status: 'sent' }])

    // The replica leaves the pool: the payout is found, never sent twice.
    balancer.lookupsToReplica = false
    const again = await payout()
    expect(again.hash).toBe(first.hash)
    expect(await rows()).toHaveLength(1)
    expect(await env.balance(recipient)).toBe(usdc(1))
  })
})
