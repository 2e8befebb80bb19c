/**
 * Smart-account payers through x402: the published `@x402/fetch` client signing with viem's Coinbase
 * smart account (deployed: ERC-1271; undeployed: ERC-6492, deployed by caipay's relay through an
 * allow-listed factory), caipay the facilitator of the published resource server.
 */
import { ExactEvmScheme as ExactEvmClient } from '@x402/evm/exact/client'
import { wrapFetchWithPayment, x402Client } from '@x402/fetch'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { mintTestToken } from '../anvil.js'
import { coinbaseFactoryAddress, deployPayers, type Payers } from '../evm/payers.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { decodeHeader, listenX402, type ResourceServer, startWeatherServer } from './support.js'

let env: EvmEnv
let payers: Payers
let resource: ResourceServer
const price = usdc(0.01)

beforeAll(async () => {
  env = await createEvmEnv({
    anvilArgs: ['--hardfork', 'prague'],
    chainConfig: { eip6492Factories: [coinbaseFactoryAddress] },
  })
  payers = await deployPayers(env)
  env.startRunner()
  resource = await startWeatherServer(env, await listenX402(env.t.app), env.liveKey, price)
}, 60_000)

afterAll(async () => {
  await resource?.close()
  await env?.close()
})

describe('smart-account payers through x402', () => {
  it.each([
    ['deployed (ERC-1271)', true],
    ['undeployed (ERC-6492, deployed by the relay)', false],
  ])('Coinbase-style smart wallet, %s: paid once, exactly the price', async (_name, deployed) => {
    const { account } = await payers.coinbase(deployed)
    await mintTestToken(env.anvil.rpcUrl, env.token, account.address, usdc(1))
    const network = env.anvil.caip2 as `${string}:${string}`
    const client = x402Client.fromConfig({
      schemes: [{ network, client: new ExactEvmClient(account as never) }],
      spendControls: { allowedAssets: [{ network, asset: env.token, maxAmountPerPayment: '1000000' }] },
    })
    const res = await wrapFetchWithPayment(fetch, client)(`${resource.url}/weather`)
    expect(res.status).toBe(200)
    expect(decodeHeader(res.headers.get('PAYMENT-RESPONSE'))).toMatchObject({
      success: true,
      payer: account.address,
    })
    expect(await env.balance(account.address)).toBe(usdc(1) - price)
    expect(await env.publicClient.getCode({ address: account.address })).not.toBeUndefined()
  })
})
