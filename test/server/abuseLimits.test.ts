/**
 * The API's limits under hostile callers, each written as the abuser: one partner's flood beside another
 * partner behind the same address, a flood of wrong keys, and a copied App-Id flooded from another
 * address. Client addresses are set per request (loopback addresses, as a proxy or NAT would present them).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers } from './helpers.js'

const burst = 4
const failedAuthPerMinute = 6

let t: TestServer
beforeAll(async () => {
  t = await createTestServer({
    // The auth cache on: an honest caller's recently valid key is what lets it past its address's failures.
    fastPaths: true,
    config: { rateLimit: { perSecond: 1, burst, failedAuthPerMinute } },
  })
})
afterAll(() => t.close())

type Send = (remoteAddress: string) => Promise<{ statusCode: number; headers: Record<string, unknown> }>

/** Statuses of `count` requests sent one after another. */
async function statuses(send: Send, remoteAddress: string, count: number): Promise<number[]> {
  const seen: number[] = []
  for (let i = 0; i < count; i++) seen.push((await send(remoteAddress)).statusCode)
  return seen
}

const x402Verify =
  (key: string): Send =>
  (remoteAddress) =>
    t.request({
      method: 'POST',
      url: '/x402/verify',
      remoteAddress,
      headers: { authorization: `Bearer ${key}` },
      payload: {
        x402Version: 2,
        paymentPayload: {
          x402Version: 2,
          accepted: {
            scheme: 'exact',
            network: 'eip155:1',
            amount: '1',
            asset: '0x0000000000000000000000000000000000000001',
            payTo: '0x0000000000000000000000000000000000000002',
            maxTimeoutSeconds: 60,
          },
          payload: {},
        },
        paymentRequirements: {
          scheme: 'exact',
          network: 'eip155:1',
          amount: '1',
          asset: '0x0000000000000000000000000000000000000001',
          payTo: '0x0000000000000000000000000000000000000002',
          maxTimeoutSeconds: 60,
        },
      },
    })

const merchants =
  (key: string): Send =>
  (remoteAddress) =>
    t.request({ method: 'GET', url: '/v1/merchants', remoteAddress, headers: headers(key) })

/** A wallet's `/wcp` status read (the payment does not exist: 404 unless the limiter answers first). */
const wcpStatus =
  (key: string): Send =>
  (remoteAddress) =>
    t.request({
      method: 'GET',
      url: '/wcp/v1/gateway/payment/pay_doesnotexist0000000000/status',
      remoteAddress,
      headers: { 'api-key': key },
    })

describe('limits per credential, for failed authentication, and per App-Id and address', () => {
  it('two partners behind one address: one key flooding /x402 and the API never throttles the other', async () => {
    const address = '127.0.0.2'
    for (const mount of [x402Verify, merchants]) {
      const flooder = (await t.createKey('live', 'partner', await t.createPartner())).apiKey
      const honest = (await t.createKey('live', 'partner', await t.createPartner())).apiKey
      const flood = await statuses(mount(flooder), address, burst * 3)
      expect(flood.filter((s) => s === 429)).toHaveLength(burst * 2)
      const seenByHonest = await statuses(mount(honest), address, burst)
      expect(seenByHonest.filter((s) => s === 429)).toEqual([])
    }
  })

  it('two wallets behind one address: one wallet key flooding /wcp never throttles the other', async () => {
    const address = '127.0.0.5'
    const flooder = (await t.createKey('live', 'wallet', await t.createPartner())).apiKey
    const honest = (await t.createKey('live', 'wallet', await t.createPartner())).apiKey
    const flood = await statuses(wcpStatus(flooder), address, burst * 3)
    expect(flood.filter((s) => s === 429)).toHaveLength(burst * 2)
    expect(flood.slice(0, burst).every((s) => s === 404)).toBe(true)
    const seenByHonest = await statuses(wcpStatus(honest), address, burst)
    expect(seenByHonest).toEqual(Array(burst).fill(404))
  })

  it('a flood of wrong keys is limited per address with Retry-After; other addresses and known keys pass', async () => {
    const attacker = '127.0.0.3'
    const honestKey = (await t.createKey('test')).apiKey
    // The honest caller behind the attacker's address has used its key before the flood.
    expect((await merchants(honestKey)(attacker)).statusCode).toBe(200)
    const wrong =
      (i: number): Send =>
      (remoteAddress) =>
        t.request({
          method: 'GET',
          url: '/v1/merchants',
          remoteAddress,
          headers: headers(`svc_test_${'x'.repeat(30)}${i}`),
        })
    const seen: number[] = []
    let retryAfter: unknown
    for (let i = 0; i < failedAuthPerMinute * 3; i++) {
      const res = await wrong(i)(attacker)
      seen.push(res.statusCode)
      if (res.statusCode === 429) retryAfter = res.headers['retry-after']
    }
    expect(seen.slice(0, failedAuthPerMinute).every((s) => s === 401)).toBe(true)
    expect(seen.slice(failedAuthPerMinute).every((s) => s === 429)).toBe(true)
    expect(Number(retryAfter)).toBeGreaterThanOrEqual(1)
    // A wrong Bearer key on /x402 from the same address: limited too.
    expect((await x402Verify('svc_live_wrong_wrong_wrong_wrong')(attacker)).statusCode).toBe(429)
    // Another address's mistake is still a plain 401; the honest key at the attacker's address still works.
    expect((await wrong(0)('127.0.0.4')).statusCode).toBe(401)
    expect((await merchants(honestKey)(attacker)).statusCode).toBe(200)
  })

  it("a copied App-Id flooded from one address leaves the honest wallet's address its whole quota", async () => {
    const { appId } = await t.createAppId('test')
    const key = (await t.createKey('test')).apiKey
    const paymentId = await createPayment(t, key, await createMerchant(t, key))
    const wallet: Send = (remoteAddress) =>
      t.request({
        method: 'GET',
        url: `/v1/gateway/payment/${paymentId}`,
        remoteAddress,
        headers: { 'app-id': appId, 'client-id': `device-${remoteAddress}` },
      })
    const flood = await statuses(wallet, '127.0.0.5', burst * 3)
    expect(flood.filter((s) => s === 429)).toHaveLength(burst * 2)
    const seenByHonest = await statuses(wallet, '127.0.0.6', burst)
    expect(seenByHonest).toEqual(Array(burst).fill(200))
  })
})
