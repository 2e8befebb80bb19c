import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createGatewayEnv, type GatewayEnv } from '../gateway/support.js'
import { headers, idem } from './helpers.js'

const wallet = 'https://wallet.example'

function preflight(url: string, origin: string, method = 'POST', requestHeaders = 'api-key,content-type') {
  return {
    method: 'OPTIONS' as const,
    url,
    headers: {
      origin,
      'access-control-request-method': method,
      'access-control-request-headers': requestHeaders,
    },
  }
}

describe('CORS with the defaults: the gateway open to any origin, the merchant API closed', () => {
  let env: GatewayEnv
  let paymentId: string
  beforeAll(async () => {
    env = await createGatewayEnv()
    paymentId = await env.pay()
  })
  afterAll(() => env.t.close())

  it('answers a gateway preflight with methods, the headers the library sends, and a max-age', async () => {
    const res = await env.t.request(preflight(`/v1/gateway/payment/${paymentId}/options`, wallet))
    expect(res.statusCode).toBe(204)
    expect(res.headers['access-control-allow-origin']).toBe('*')
    expect(String(res.headers['access-control-allow-methods']).split(', ')).toEqual(['GET', 'POST'])
    const allowed = String(res.headers['access-control-allow-headers']).toLowerCase().split(', ')
    for (const name of [
      'content-type',
      'api-key',
      'app-id',
      'client-id',
      'pay-version',
      'sdk-name',
      'sdk-version',
      'sdk-platform',
      'idempotency-key',
    ])
      expect(allowed).toContain(name)
    expect(allowed).not.toContain('merchant-id')
    expect(Number(res.headers['access-control-max-age'])).toBeGreaterThanOrEqual(600)
    expect(res.headers['access-control-allow-credentials']).toBeUndefined()
  })

  it('the compatibility mount /wcp/v1/gateway/ gets the same preflight answer', async () => {
    const res = await env.t.request(preflight(`/wcp/v1/gateway/payment/${paymentId}/options`, wallet))
    expect(res.statusCode).toBe(204)
    expect(res.headers['access-control-allow-origin']).toBe('*')
    expect(res.headers['access-control-allow-headers']).toContain('Client-Id')
  })

  it('an actual gateway request carries the CORS headers and exposes Pay-Version', async () => {
    const res = await env.gw('POST', paymentId, '/options', { accounts: [] }, { origin: wallet })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.headers['access-control-allow-origin']).toBe('*')
    expect(res.headers['pay-version']).toBeDefined()
    const exposed = String(res.headers['access-control-expose-headers']).toLowerCase().split(', ')
    for (const name of ['pay-version', 'retry-after', 'idempotent-replayed', 'request-id'])
      expect(exposed).toContain(name)
    expect(res.headers['access-control-allow-credentials']).toBeUndefined()
  })

  it('errors carry the CORS headers: 401, 400 (body and URL), 404 (payment and route)', async () => {
    const noAuth = await env.t.request({
      method: 'GET',
      url: `/v1/gateway/payment/${paymentId}`,
      headers: { origin: wallet },
    })
    expect(noAuth.statusCode).toBe(401)
    expect(noAuth.json.code).toBe('missing_auth_headers')
    expect(noAuth.headers['access-control-allow-origin']).toBe('*')

    const badBody = await env.gw('POST', paymentId, '/options', { accounts: 'x' }, { origin: wallet })
    expect(badBody.statusCode).toBe(400)
    expect(badBody.headers['access-control-allow-origin']).toBe('*')

    const unknown = await env.gw('GET', 'pay_doesnotexist', '', undefined, { origin: wallet })
    expect(unknown.statusCode).toBe(404)
    expect(unknown.json.code).toBe('payment_not_found')
    expect(unknown.headers['access-control-allow-origin']).toBe('*')

    const noRoute = await env.gw('GET', paymentId, '/nothing-here', undefined, { origin: wallet })
    expect(noRoute.statusCode).toBe(404)
    expect(noRoute.headers['access-control-allow-origin']).toBe('*')

    const badUrl = await env.t.request({
      method: 'GET',
      url: '/v1/gateway/payment/%E0%A4%A',
      headers: { ...headers(env.walletKey), origin: wallet },
    })
    expect(badUrl.statusCode).toBe(400)
    expect(badUrl.headers['access-control-allow-origin']).toBe('*')
  })

  it('the hosted form submission answers other origins too', async () => {
    const res = await env.t.request(preflight(`/v1/gateway/payment/${paymentId}/collect-data`, wallet))
    expect(res.statusCode).toBe(204)
    expect(res.headers['access-control-allow-origin']).toBe('*')
  })

  it('the merchant API refuses preflights and sends no CORS headers', async () => {
    const res = await env.t.request(preflight('/v1/payments', wallet))
    expect(res.statusCode).toBe(403)
    expect(res.json.code).toBe('forbidden')
    expect(res.json.message).toMatch(/cors/)
    expect(res.headers['access-control-allow-origin']).toBeUndefined()

    const actual = await env.t.request({
      method: 'GET',
      url: '/v1/merchants',
      headers: { ...headers(env.apiKey), origin: wallet },
    })
    expect(actual.statusCode).toBe(200)
    expect(actual.headers['access-control-allow-origin']).toBeUndefined()
  })

  it('requests without an Origin, and same-origin pages, get no CORS headers', async () => {
    const res = await env.gw('GET', paymentId, '/status')
    expect(res.statusCode).toBe(200)
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
    const health = await env.t.request({ method: 'GET', url: '/healthz', headers: { origin: wallet } })
    expect(health.headers['access-control-allow-origin']).toBeUndefined()
    const page = await env.t.request(preflight(`/pay/${paymentId}`, wallet, 'GET'))
    expect(page.headers['access-control-allow-origin']).toBeUndefined()
  })
})

describe('CORS on rate-limited responses', () => {
  let env: GatewayEnv
  beforeAll(async () => {
    env = await createGatewayEnv({ config: { rateLimit: { perSecond: 1, burst: 2 } } })
  })
  afterAll(() => env.t.close())

  it('a 429 carries the CORS headers and exposes Retry-After; preflights are not counted', async () => {
    const paymentId = await env.pay()
    const url = `/v1/gateway/payment/${paymentId}/status`
    for (let i = 0; i < 5; i++)
      expect((await env.t.request(preflight(url, wallet, 'GET'))).statusCode).toBe(204)
    const statuses = []
    let limited: Awaited<ReturnType<typeof env.gw>> | undefined
    for (let i = 0; i < 3; i++) {
      const res = await env.gw('GET', paymentId, '/status', undefined, { origin: wallet })
      statuses.push(res.statusCode)
      if (res.statusCode === 429) limited = res
    }
    expect(statuses).toEqual([200, 200, 429])
    expect(limited!.json.code).toBe('rate_limited')
    expect(limited!.headers['access-control-allow-origin']).toBe('*')
    expect(Number(limited!.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    expect(limited!.headers['access-control-expose-headers']).toContain('Retry-After')
  })
})

describe('CORS with configured origins', () => {
  const dashboard = 'https://dashboard.example'
  let env: GatewayEnv
  let paymentId: string
  beforeAll(async () => {
    env = await createGatewayEnv({
      config: {
        cors: { gateway: ['https://Wallet.example:443', 'chrome-extension://abcdef'], merchant: [dashboard] },
      },
    })
    paymentId = await env.pay()
  })
  afterAll(() => env.t.close())

  it('a listed origin gets its own origin back (normalised), with Vary: Origin', async () => {
    for (const origin of [wallet, 'chrome-extension://abcdef']) {
      const pre = await env.t.request(preflight(`/v1/gateway/payment/${paymentId}/confirm`, origin))
      expect(pre.statusCode).toBe(204)
      expect(pre.headers['access-control-allow-origin']).toBe(origin)
      expect(pre.headers.vary).toMatch(/Origin/)
      const res = await env.gw('GET', paymentId, '/status', undefined, { origin })
      expect(res.statusCode).toBe(200)
      expect(res.headers['access-control-allow-origin']).toBe(origin)
      expect(res.headers.vary).toMatch(/Origin/)
    }
  })

  it('an unlisted origin is refused at preflight and gets no CORS headers on an actual request', async () => {
    const evil = 'https://evil.example'
    const pre = await env.t.request(preflight(`/v1/gateway/payment/${paymentId}/options`, evil))
    expect(pre.statusCode).toBe(403)
    expect(pre.headers['access-control-allow-origin']).toBeUndefined()
    expect(pre.headers.vary).toMatch(/Origin/)
    const res = await env.gw('GET', paymentId, '/status', undefined, { origin: evil })
    expect(res.headers['access-control-allow-origin']).toBeUndefined()
    // Same host on another scheme or port is another origin.
    for (const near of ['http://wallet.example', 'https://wallet.example:8443']) {
      const other = await env.t.request(preflight(`/v1/gateway/payment/${paymentId}/options`, near))
      expect(other.statusCode, near).toBe(403)
    }
  })

  it('the merchant API answers exactly its listed origins, with Merchant-Id and the write methods', async () => {
    const pre = await env.t.request(preflight('/v1/merchants', dashboard, 'PATCH', 'api-key,merchant-id'))
    expect(pre.statusCode).toBe(204)
    expect(pre.headers['access-control-allow-origin']).toBe(dashboard)
    expect(pre.headers['access-control-allow-headers']).toContain('Merchant-Id')
    expect(pre.headers['access-control-allow-methods']).toContain('DELETE')
    const created = await env.t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: { ...headers(env.apiKey), origin: dashboard, 'idempotency-key': idem() },
      payload: { merchantName: 'Tea', merchantEmail: 'tea@example.com' },
    })
    expect(created.statusCode).toBe(201)
    expect(created.headers['access-control-allow-origin']).toBe(dashboard)
    expect(created.headers['access-control-expose-headers']).toContain('Idempotent-Replayed')
    // The wallet's origin may reach the gateway, not the merchant API.
    expect((await env.t.request(preflight('/v1/merchants', wallet))).statusCode).toBe(403)
  })
})
