/**
 * `caipay/x402`'s x402Fetch paying the unmodified `@x402/hono` resource server (caipay its facilitator)
 * on Anvil with caipay's EVM signer; and hostile resource servers whose terms the payer refuses with its
 * key never asked to sign.
 */
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { x402Fetch } from '../../src/x402/index.js'
import { countingAccount } from '../countingAccount.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { expectPayError } from '../expectPayError.js'
import { hostileResource, listenX402, type ResourceServer, startWeatherServer } from './support.js'

let env: EvmEnv
let resource: ResourceServer
const price = usdc(0.01)

beforeAll(async () => {
  env = await createEvmEnv()
  env.startRunner()
  resource = await startWeatherServer(env, await listenX402(env.t.app), env.liveKey, price)
}, 60_000)

afterAll(async () => {
  await resource?.close()
  await env?.close()
})

/** A funded buyer whose every signature is counted, and an x402Fetch over it. */
async function payer(index: number, budget: Parameters<typeof x402Fetch>[1]['budget']) {
  const buyer = await env.buyer(index)
  const counted = countingAccount(buyer.key)
  const signer = evmSigner({
    account: counted.account,
    chains: { [env.anvil.caip2]: { rpcUrl: env.anvil.rpcUrl } },
  })
  return { buyer, calls: counted.calls, pay: x402Fetch(fetch, { signers: [signer], budget }) }
}

describe('x402Fetch', () => {
  it('pays the published resource server within its budget; the payment response is decoded', async () => {
    const { buyer, calls, pay } = await payer(2, { perRequest: { [env.asset]: price } })
    const before = await env.balance(buyer.address)
    const res = await pay(`${resource.url}/weather`)
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ weather: 'sunny' })
    expect(res.payment).toMatchObject({ success: true, network: env.anvil.caip2, payer: buyer.address })
    expect(before - (await env.balance(buyer.address))).toBe(price)
    expect(calls()).toBe(1)
  })

  it('stops at the per-origin budget: the third request is refused unsigned', async () => {
    const { calls, pay } = await payer(3, {
      perRequest: { [env.asset]: price },
      perOrigin: { [env.asset]: 2n * price },
    })
    expect((await pay(`${resource.url}/weather`)).status).toBe(200)
    expect((await pay(`${resource.url}/weather`)).status).toBe(200)
    await expectPayError(pay(`${resource.url}/weather`), 'action_rejected')
    expect(calls()).toBe(2)
  })

  it('a redirect never multiplies a budget: counted for the origin paid and the origin requested', async () => {
    const { buyer, calls, pay } = await payer(5, {
      perRequest: { [env.asset]: price },
      perOrigin: { [env.asset]: 2n * price },
    })
    const before = await env.balance(buyer.address)
    // Other origins (other loopback ports) that send the buyer to the same paid resource, one through two hops.
    const redirector = await startRedirector(`${resource.url}/weather`)
    const twoHops = await startRedirector(`${redirector.url}/weather`)
    try {
      expect((await pay(`${resource.url}/weather`)).status).toBe(200)
      expect((await pay(`${redirector.url}/weather`)).status).toBe(200)
      // The resource's origin has been paid its budget, whichever origin the buyer asked for.
      for (const url of [`${twoHops.url}/weather`, `${redirector.url}/weather`, `${resource.url}/weather`]) {
        const error = await expectPayError(pay(url), 'action_rejected')
        expect(error.context).toMatchObject({
          refusals: [expect.objectContaining({ reason: 'over_budget_per_origin' })],
        })
      }
    } finally {
      await redirector.close()
      await twoHops.close()
    }
    expect(calls()).toBe(2)
    expect(before - (await env.balance(buyer.address))).toBe(2n * price)
  })

  describe('hostile terms: refused, zero signing calls', () => {
    const hostile = hostileResource()

    const base = () => ({
      scheme: 'exact',
      network: env.anvil.caip2,
      amount: price.toString(),
      asset: env.token,
      payTo: env.merchant.destination,
      maxTimeoutSeconds: 60,
      extra: { name: 'USD Coin', version: '2' },
    })
    const cases: [string, () => Record<string, unknown>[], string][] = [
      [
        'an amount above the budget',
        () => [{ ...base(), amount: (price + 1n).toString() }],
        'over_budget_per_request',
      ],
      [
        'another asset',
        () => [{ ...base(), asset: privateKeyToAccount(generatePrivateKey()).address }],
        'asset_not_in_budget',
      ],
      [
        'a Permit2 batch',
        () => [{ ...base(), extra: { ...base().extra, assetTransferMethod: 'permit2' } }],
        'unsupported_transfer_method',
      ],
      [
        'a chain the signer has no account on',
        () => [{ ...base(), network: 'eip155:1' }],
        'asset_not_in_budget',
      ],
    ]
    it.each(cases)('%s', async (_name, accepts, reason) => {
      hostile.offer(accepts())
      const { calls, pay } = await payer(4, { perRequest: { [env.asset]: price } })
      const error = await expectPayError(pay(hostile.url()), 'action_rejected')
      expect(error.context).toMatchObject({ refusals: [expect.objectContaining({ reason })] })
      expect(calls()).toBe(0)
    })
  })
})

/** A server on its own loopback origin answering every request with a 302 to `target`. */
async function startRedirector(target: string) {
  const server = createServer((_req, res) => {
    res.writeHead(302, { Location: target })
    res.end()
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}
