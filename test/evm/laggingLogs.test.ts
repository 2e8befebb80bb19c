import { createWalletClient, getAddress, http, parseAbiItem } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import { testUsdcAbi } from '../../fixtures/token/index.js'
import { configuredAssets } from '../../src/server/chains/configured.js'
import { createEvmChain, type EvmChain } from '../../src/server/chains/evm/chain.js'
import { reconcileEvmChain, scanEvmTopUps } from '../../src/server/chains/evm/ledger.js'
import { createEvmNodes, NodesBehind } from '../../src/server/chains/evm/nodes.js'
import { scanEvmPushPayments } from '../../src/server/chains/evm/push.js'
import { RetryLater } from '../../src/server/jobs/runner.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { listDifferences } from '../../src/server/ledger/reconcile.js'
import { scannedTo } from '../../src/server/ledger/topUps.js'
import {
  type AnvilInstance,
  anvilChain,
  anvilControl,
  anvilPrivateKeys,
  mintTestToken,
  startAnvil,
} from '../anvil.js'
import { type LoadBalancer, startLoadBalancer } from './laggingReplica.js'
import { createEvmEnv, type EvmEnv, usdc } from './support.js'

/**
 * The scans that read Transfer logs (push payments, top-ups) behind a load balancer whose log reads land
 * on a replica that stopped a block before the transfer (a real Anvil forked from the chain, not mining):
 * the replica answers the range without the transfer. The scans read their logs from a node that has
 * every block of the range (EvmNodes.getLogs), so the transfer is found from the other node, and with no
 * such node nothing is read and the cursor stays (docs/live-mode.md, "Chain reads").
 */
const silent = { info() {}, warn() {}, error() {} }
const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)')

let env: EvmEnv
let balancer: LoadBalancer
let replica: AnvilInstance | undefined
/** The balancer, then the chain's own node. */
let twoNodes: EvmChain
/** The balancer alone. */
let balancerOnly: EvmChain

beforeAll(async () => {
  env = await createEvmEnv()
  balancer = await startLoadBalancer(env.anvil.rpcUrl, () => replica?.rpcUrl)
  const caip2 = env.anvil.caip2
  const config = env.t.app.config.chains[caip2]!
  const chainOn = (rpcUrls: string[]) =>
    createEvmChain({
      caip2,
      chain: { ...config, rpcUrl: balancer.url, rpcUrls },
      assets: configuredAssets(env.t.app.config)[caip2] ?? [],
      pollingIntervalMs: 25,
      log: silent,
    })
  twoNodes = chainOn([env.anvil.rpcUrl])
  balancerOnly = chainOn([])
})
afterEach(async () => {
  balancer.logsToReplica = false
  await replica?.stop()
  replica = undefined
})
afterAll(async () => {
  await balancer?.stop()
  await env?.close()
})

/** A replica of the chain as it is now (one block past what has been scanned), taking the log reads. */
async function replicaOfNow(): Promise<bigint> {
  await anvilControl(env.anvil.rpcUrl).mine(1)
  const head = await env.publicClient.getBlockNumber({ cacheTime: 0 })
  replica = await startAnvil({
    args: ['--fork-url', env.anvil.rpcUrl, '--fork-block-number', String(head), '--no-mining'],
  })
  balancer.logsToReplica = true
  return head
}

/** A plain ERC-20 transfer from one of Anvil's accounts; its block. */
async function transfer(fromIndex: number, to: `0x${string}`, amount: bigint): Promise<bigint> {
  const account = privateKeyToAccount(anvilPrivateKeys[fromIndex]!)
  await mintTestToken(env.anvil.rpcUrl, env.token, account.address, amount)
  const wallet = createWalletClient({
    account,
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
  })
  const hash = await wallet.writeContract({
    address: env.token,
    abi: testUsdcAbi,
    functionName: 'transfer',
    args: [to, amount],
  })
  return (await env.publicClient.waitForTransactionReceipt({ hash })).blockNumber
}

/** What an unpinned reader gets through the balancer now: the replica's answer, without `block`. */
async function unpinnedLogs(chain: EvmChain, to: `0x${string}`, fromBlock: bigint) {
  return chain.publicClient.getLogs({
    address: env.token,
    event: transferEvent,
    args: { to },
    fromBlock,
    toBlock: await env.publicClient.getBlockNumber({ cacheTime: 0 }),
  })
}

describe('EvmNodes.getLogs', () => {
  it('answers from a node that has the range, and NodesBehind when every node stops short of it', async () => {
    const recipient = privateKeyToAccount(anvilPrivateKeys[3]!).address
    const replicaHead = await replicaOfNow()
    const block = await transfer(2, recipient, usdc(2))
    const head = await env.publicClient.getBlockNumber({ cacheTime: 0 })
    expect(block).toBeGreaterThan(replicaHead)
    const read = (urls: string[], toBlock = head) =>
      createEvmNodes({ urls, batchSize: 1 }).getLogs({
        address: env.token,
        event: transferEvent,
        args: { to: recipient },
        fromBlock: replicaHead,
        toBlock,
      })
    // The replica alone, asked straight: the range past its head comes back without the transfer.
    expect(await unpinnedLogs(balancerOnly, recipient, replicaHead)).toEqual([])

    const logs = await read([replica!.rpcUrl, env.anvil.rpcUrl])
    expect(logs.map((log) => [log.blockNumber, getAddress(log.args.to!), log.args.value])).toEqual([
      [block, recipient, usdc(2)],
    ])
    await expect(read([replica!.rpcUrl])).rejects.toBeInstanceOf(NodesBehind)
    await expect(read([replica!.rpcUrl])).rejects.toBeInstanceOf(RetryLater)
    // What it has (up to its head) the replica answers itself.
    expect(await read([replica!.rpcUrl], replicaHead)).toEqual([])
  })
})

describe('log scans with a node behind', () => {
  it('push: the transfer past the lagging node is found from the other node; with that node alone, the cursor stays', async () => {
    const { paymentId } = await env.pay('1250')
    const options = await env.gw('POST', paymentId, '/options', { accounts: [] })
    expect(options.statusCode, options.body).toBe(200)
    const deposit = getAddress(
      options.json.options.find((o: { source?: string }) => o.source === 'push').push.recipient,
    )
    const cursor = async () =>
      BigInt(
        (
          await env.t.db
            .selectFrom('evm_push_scans')
            .select('scanned_to')
            .where('chain_id', '=', env.anvil.caip2)
            .executeTakeFirstOrThrow()
        ).scanned_to,
      )
    await scanEvmPushPayments(env.t.db, twoNodes, env.t.app.config)
    const scanned = await cursor()
    await replicaOfNow()
    const block = await transfer(5, deposit, usdc(12.5))
    expect(await unpinnedLogs(balancerOnly, deposit, scanned + 1n)).toEqual([])

    // Only the lagging backend answers logs: nothing is read, the cursor does not move past the transfer.
    await expect(scanEvmPushPayments(env.t.db, balancerOnly, env.t.app.config)).rejects.toBeInstanceOf(
      NodesBehind,
    )
    expect(await cursor()).toBe(scanned)
    const requests = balancer.replicaRequests
    // The other node has the blocks: the transfer is found in this pass.
    expect(await scanEvmPushPayments(env.t.db, twoNodes, env.t.app.config)).toBe(1)
    expect(balancer.replicaRequests).toBeGreaterThan(requests)
    const found = await env.t.db
      .selectFrom('evm_push_transfers')
      .select(['payment_id', 'amount', 'block', 'state'])
      .where('payment_id', '=', paymentId)
      .execute()
    expect(found).toEqual([
      { payment_id: paymentId, amount: usdc(12.5).toString(), block: String(block), state: 'found' },
    ])
    expect(await cursor()).toBeGreaterThanOrEqual(block)
  })

  it('top-up: the transfer into the collection address past the lagging node is credited, and reconciliation agrees', async () => {
    const asset = twoNodes.assets[0]!
    const holder = holderOf(env.anvil.caip2, env.collection)
    await scanEvmTopUps(env.t.db, twoNodes, asset)
    const scanned = (await scannedTo(env.t.db, holder, asset.id))!
    await replicaOfNow()
    await transfer(6, env.collection, usdc(3))
    expect(await unpinnedLogs(balancerOnly, env.collection, scanned + 1n)).toEqual([])

    await expect(scanEvmTopUps(env.t.db, balancerOnly, asset)).rejects.toBeInstanceOf(NodesBehind)
    expect(await scannedTo(env.t.db, holder, asset.id)).toBe(scanned)
    await reconcileEvmChain(env.t.db, twoNodes)
    const topUps = await env.t.db
      .selectFrom('ledger_entries')
      .select('amount')
      .where('holder', '=', holder)
      .where('flow', '=', 'topup')
      .execute()
    expect(topUps).toEqual([{ amount: usdc(3).toString() }])
    expect(await listDifferences(env.t.db, { open: true })).toEqual([])
  })
})
