import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createEvmChain } from '../../src/server/chains/evm/chain.js'
import type { ChainConfig } from '../../src/server/config.js'
import { type AnvilInstance, anvilPrivateKeys, startAnvil } from '../anvil.js'
import { type FaultProxy, startFaultProxy } from '../rpcFaults.js'

const silent = { info() {}, warn() {}, error() {} }

describe('EVM JSON-RPC batching (rpcBatchSize)', () => {
  let anvil: AnvilInstance
  let proxy: FaultProxy

  beforeAll(async () => {
    anvil = await startAnvil()
    proxy = await startFaultProxy(anvil.rpcUrl)
  })
  afterAll(async () => {
    await proxy?.stop()
    await anvil?.stop()
  })

  const chainWith = (rpcBatchSize?: number) =>
    createEvmChain({
      caip2: `eip155:${anvil.chainId}`,
      chain: {
        rpcUrl: proxy.url,
        signerKey: anvilPrivateKeys[0],
        assets: {},
        ...(rpcBatchSize === undefined ? {} : { rpcBatchSize }),
      } as ChainConfig,
      assets: [],
      log: silent,
    })

  /** Six reads made in one turn, as a block's receipts or a burst of relays are; the HTTP requests they took. */
  async function burst(rpcBatchSize?: number) {
    const { publicClient, executor } = chainWith(rpcBatchSize)
    const before = proxy.httpRequests()
    const answers = await Promise.all([
      publicClient.getChainId(),
      publicClient.getBlockNumber({ cacheTime: 0 }),
      ...anvilPrivateKeys.slice(0, 4).map((_, i) =>
        publicClient.getBalance({
          address: i === 0 ? executor.address : `0x${String(i).padStart(40, '0')}`,
        }),
      ),
    ])
    return { answers, httpRequests: proxy.httpRequests() - before }
  }

  it('calls made together travel as one batch by default, with the same answers as one by one', async () => {
    const batched = await burst()
    const alone = await burst(1)
    expect(batched.httpRequests).toBe(1)
    expect(alone.httpRequests).toBe(6)
    expect(batched.answers[0]).toBe(anvil.chainId)
    expect(batched.answers.slice(2)).toEqual(alone.answers.slice(2))
  })

  it('a batch never exceeds rpcBatchSize calls', async () => {
    expect((await burst(4)).httpRequests).toBe(2)
  })
})
