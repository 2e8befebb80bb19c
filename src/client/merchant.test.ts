import { describe, expect, expectTypeOf, it } from 'vitest'
import type { FiatUnit } from '../contract/currencies.js'
import type { Endpoints } from '../contract/endpoints.js'
import type { Fetch } from './http.js'
import { createMerchantClient, type MerchantCallInput } from './merchant.js'

const merchant = {
  id: 'mrch_1',
  name: 'S',
  email: 'a@b.co',
  iconUrl: null,
  status: 'active',
  createdAt: '2026-01-01T00:00:00Z',
}

function recordingFetch(body: unknown, status = 200) {
  const calls: { url: string; headers: Record<string, string> }[] = []
  const fetch: Fetch = async (url, init) => {
    calls.push({ url, headers: init.headers as Record<string, string> })
    return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json' } })
  }
  return { fetch, calls }
}

describe('createMerchantClient', () => {
  it('has one method per merchant endpoint and none for the wallet gateway', () => {
    const client = createMerchantClient({ baseUrl: 'http://x', apiKey: 'k' })
    expect(typeof client.getMerchant).toBe('function')
    expect(Object.keys(client).some((name) => name.startsWith('gateway'))).toBe(false)
  })

  it('fills and encodes path params, and sends the per-call Merchant-Id over the configured one', async () => {
    const { fetch, calls } = recordingFetch({ merchant })
    const client = createMerchantClient({ baseUrl: 'http://x/', apiKey: 'k', merchantId: 'm1', fetch })
    await expect(client.getMerchant({ params: { merchantId: 'a/b' }, merchantId: 'm2' })).resolves.toEqual({
      merchant,
    })
    expect(calls[0]!.url).toBe('http://x/v1/merchants/a%2Fb')
    expect(calls[0]!.headers['Merchant-Id']).toBe('m2')
    expect(calls[0]!.headers['Api-Key']).toBe('k')
  })

  it('adds an idempotency key where the endpoint requires one', async () => {
    const { fetch, calls } = recordingFetch({ merchant }, 201)
    const client = createMerchantClient({ baseUrl: 'http://x', apiKey: 'k', fetch })
    await client.createMerchant({ body: { merchantName: 'S', merchantEmail: 'a@b.co' } })
    await client.createMerchant({
      body: { merchantName: 'S', merchantEmail: 'a@b.co' },
      idempotencyKey: 'k1',
    })
    expect(calls[0]!.headers['Idempotency-Key']).toMatch(/^[0-9a-f-]{36}$/)
    expect(calls[1]!.headers['Idempotency-Key']).toBe('k1')
  })

  it('refuses a call missing a path parameter before sending anything', () => {
    const { fetch, calls } = recordingFetch({ merchant })
    const client = createMerchantClient({ baseUrl: 'http://x', apiKey: 'k', fetch })
    expect(() => client.getMerchant({ params: {} as never })).toThrowError(
      /Missing path parameter "merchantId"/,
    )
    expect(calls).toHaveLength(0)
  })

  it('types an amount unit as the server takes it: a currency it prices, or caip19/<asset id> (tsc checks)', () => {
    type Unit = MerchantCallInput<Endpoints['createPayment']>['body']['amount']['unit']
    expectTypeOf<Unit>().toEqualTypeOf<FiatUnit | `caip19/${string}`>()
    expectTypeOf<'iso4217/EUR'>().toExtend<Unit>()
    expectTypeOf<'iso4217/RWE'>().not.toExtend<Unit>()
  })
})
