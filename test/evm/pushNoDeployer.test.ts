import type { Hex } from 'viem'
import { afterAll, beforeAll, expect, it } from 'vitest'
import { configuredAssets } from '../../src/server/chains/configured.js'
import { createEvmChain } from '../../src/server/chains/evm/chain.js'
import { NodesBehind } from '../../src/server/chains/evm/nodes.js'
import {
  create2Deployer,
  createEvmPushQuoter,
  depositAddressOf,
  pushFactoryAddress,
} from '../../src/server/chains/evm/push.js'
import { type AnvilInstance, anvilControl, startAnvil } from '../anvil.js'
import { until } from '../until.js'
import { type LoadBalancer, startLoadBalancer } from './laggingReplica.js'
import { anvilRpc } from './payers.js'
import { createEvmEnv, type EvmEnv } from './support.js'

/**
 * A chain without the deterministic deployment proxy (Anvil started without its default CREATE2
 * deployer): the push forwarder factory could never be deployed there, so a deposit address would hold
 * the buyer's money with nothing able to sweep it. Such a chain offers no push option; its pull options
 * are untouched (docs/push-payments.md, "Not yet"). The code is read pinned at the newest block seen,
 * and "no code" holds for its block only: the proxy deployed later turns push on without a restart, and
 * a node behind the deployment turns nothing off.
 */

/** The proxy's runtime code, as Anvil deploys it by default (Arachnid's deterministic-deployment-proxy). */
const proxyRuntime: Hex =
  '0x7fffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffe03601600081602082378035828234f58015156039578182fd5b8082525050506014600cf3'
const silent = { info() {}, warn() {}, error() {} }

let env: EvmEnv
let replica: AnvilInstance | undefined
let balancer: LoadBalancer | undefined
/** The head just before the proxy was deployed (by the second test). */
let beforeDeployment: bigint
beforeAll(async () => {
  env = await createEvmEnv({ anvilArgs: ['--disable-default-create2-deployer'] })
})
afterAll(async () => {
  await balancer?.stop()
  await replica?.stop()
  await env?.close()
})

type PushOption = { source?: string; account: string; actions: unknown[] }
const pushOptionsOf = (options: PushOption[]) => options.filter((option) => option.source === 'push')

it('offers no push option where the deployment proxy is missing, and the pull options still', async () => {
  expect(await env.publicClient.getCode({ address: create2Deployer })).toBeUndefined()
  const buyer = await env.buyer(2)
  const { paymentId } = await env.pay('1250')

  const sendOnly = await env.gw('POST', paymentId, '/options', { accounts: [] })
  expect(sendOnly.statusCode, sendOnly.body).toBe(200)
  expect(sendOnly.json.options).toEqual([])

  const withAccount = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
  expect(withAccount.statusCode, withAccount.body).toBe(200)
  const options: PushOption[] = withAccount.json.options
  expect(options.length).toBeGreaterThan(0)
  expect(pushOptionsOf(options)).toEqual([])
  expect(options.every((option) => option.actions.length > 0)).toBe(true)

  // Nothing is watched: no deposit address recorded, no scan cursor for the chain.
  expect(await env.t.db.selectFrom('evm_push_deposits').selectAll().execute()).toEqual([])
  expect(await env.t.db.selectFrom('evm_push_scans').selectAll().execute()).toEqual([])
})

it('offers push once the proxy is deployed, without a restart: "no code" held for the block it was read at', async () => {
  const control = anvilControl(env.anvil.rpcUrl)
  beforeDeployment = await control.blockNumber()
  // Set on a newer block than `beforeDeployment`, whose state keeps no code (a fork of it has none).
  await control.mine(1)
  await anvilRpc(env.anvil.rpcUrl, 'anvil_setCode', [create2Deployer, proxyRuntime])
  await control.mine(2)
  const { paymentId } = await env.pay('1250')
  // The server's head read is cached for viem's polling interval (4 s): asked again until it moves on.
  const push = await until(async () => {
    const res = await env.gw('POST', paymentId, '/options', { accounts: [] })
    expect(res.statusCode, res.body).toBe(200)
    const found = pushOptionsOf(res.json.options)
    return found.length > 0 ? found : undefined
  }, 'a push option once the proxy is deployed')
  const factory = pushFactoryAddress(env.collection)
  expect(push).toEqual([
    expect.objectContaining({ account: `${env.anvil.caip2}:${depositAddressOf(factory, paymentId)}` }),
  ])
  expect(await env.t.db.selectFrom('evm_push_scans').select('chain_id').execute()).toEqual([
    { chain_id: env.anvil.caip2 },
  ])
})

it('takes no "no code" from a node behind the deployment: nothing decided until a node at the newest block answers', async () => {
  // A replica from before the proxy was deployed, behind a load balancer that sends it the code reads.
  replica = await startAnvil({
    args: [
      '--fork-url',
      env.anvil.rpcUrl,
      '--fork-block-number',
      String(beforeDeployment),
      '--no-mining',
      '--disable-default-create2-deployer',
    ],
  })
  balancer = await startLoadBalancer(env.anvil.rpcUrl, () => replica?.rpcUrl)
  balancer.codeToReplica = true
  const caip2 = env.anvil.caip2
  const chain = createEvmChain({
    caip2,
    chain: { ...env.t.app.config.chains[caip2]!, rpcUrl: balancer.url },
    assets: configuredAssets(env.t.app.config)[caip2] ?? [],
    pollingIntervalMs: 25,
    log: silent,
  })
  // What an unpinned reader would see, proving the split is real: the proxy is missing on the replica.
  expect(await chain.publicClient.getCode({ address: create2Deployer })).toBeUndefined()

  const quote = createEvmPushQuoter(chain, env.t.db, silent)
  const { paymentId } = await env.pay('1250')
  const context = {
    payment: {
      id: paymentId,
      mode: 'live' as const,
      merchantId: 'merchant',
      amount: { unit: 'iso4217/USD', value: '1250' },
      expiresAt: Math.floor(Date.now() / 1000) + 600,
    },
    asset: configuredAssets(env.t.app.config)[caip2]![0]!,
    tokenAmount: 12_500_000n,
    expiresAt: Math.floor(Date.now() / 1000) + 600,
    reference: '',
  }
  const replicaAsked = balancer.replicaRequests
  // The code read goes to the replica, whose head is behind the newest block seen: it is asked nothing
  // of it, and the options call offers no push option this time (gateway/options.ts), deciding nothing.
  await expect(quote(context)).rejects.toBeInstanceOf(NodesBehind)
  expect(balancer.replicaRequests).toBeGreaterThan(replicaAsked)

  balancer.codeToReplica = false
  const request = await quote(context)
  expect(request?.recipient).toBe(depositAddressOf(pushFactoryAddress(env.collection), paymentId))
})
