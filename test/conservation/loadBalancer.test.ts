import { createPublicClient, createWalletClient, http, toHex } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type AnvilInstance, anvilControl, anvilPrivateKeys, startAnvil } from '../anvil.js'
import { type RpcLoadBalancer, startRpcLoadBalancer } from './loadBalancer.js'

/**
 * The conservation suite's load balancer: its lagging replica answers as a node `blocks` behind would,
 * and a trap holds a call until its hook is done.
 */
let anvil: AnvilInstance
let balancer: RpcLoadBalancer
beforeAll(async () => {
  anvil = await startAnvil()
  balancer = await startRpcLoadBalancer(anvil.rpcUrl, anvil.rpcUrl)
})
afterAll(async () => {
  await balancer?.stop()
  await anvil?.stop()
})

async function rpc(method: string, params: unknown[] = []) {
  const res = await fetch(balancer.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method, params }),
  })
  return (await res.json()) as { result?: unknown; error?: { code: number; message: string } }
}

describe('RPC load balancer with a lagging replica', () => {
  it('answers as a node 3 blocks behind: older head, recent transactions not found, state as of its head, header not found past it', async () => {
    // History first, so that the replica's head (3 back) is a block after genesis.
    await anvilControl(anvil.rpcUrl).mine(5)
    const account = privateKeyToAccount(anvilPrivateKeys[0])
    const wallet = createWalletClient({ account, transport: http(anvil.rpcUrl) })
    const hash = await wallet.sendTransaction({ chain: null, to: account.address, value: 0n })
    const client = createPublicClient({ transport: http(anvil.rpcUrl) })
    const receipt = await client.waitForTransactionReceipt({ hash, pollingInterval: 20 })
    const nonce = await client.getTransactionCount({ address: account.address })
    const head = await client.getBlockNumber()

    balancer.lag({ share: 1, blocks: 3 })
    expect((await rpc('eth_blockNumber')).result).toBe(toHex(head - 3n))
    expect((await rpc('eth_getTransactionReceipt', [hash])).result).toBeNull()
    expect((await rpc('eth_getTransactionByHash', [hash])).result).toBeNull()
    expect((await rpc('eth_getTransactionCount', [account.address, 'latest'])).result).toBe(toHex(nonce - 1))
    expect((await rpc('eth_getTransactionCount', [account.address, toHex(head)])).error).toEqual({
      code: -32000,
      message: 'header not found',
    })
    expect((await rpc('eth_getBlockByNumber', [toHex(receipt.blockNumber), false])).result).toBeNull()

    await anvilControl(anvil.rpcUrl).mine(3)
    const found = (await rpc('eth_getTransactionReceipt', [hash])).result as { transactionHash: string }
    expect(found.transactionHash).toBe(hash)
    balancer.unlag()
    expect((await rpc('eth_blockNumber')).result).toBe(toHex(head + 3n))
    expect(balancer.lagged()).toBe(7)
  })

  it('a trap holds the next call of its method until the hook is done, and can cut it', async () => {
    const order: string[] = []
    balancer.trap('eth_chainId', async () => {
      order.push('hook')
      return { forward: true }
    })
    expect((await rpc('eth_chainId')).result).toBe(toHex(anvil.chainId))
    order.push('answered')
    expect(order).toEqual(['hook', 'answered'])

    balancer.trap('eth_chainId', async () => ({ forward: false }))
    await expect(rpc('eth_chainId')).rejects.toThrow()
    expect((await rpc('eth_chainId')).result).toBe(toHex(anvil.chainId))
  })
})
