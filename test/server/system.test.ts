import { gunzipSync } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { endpoints } from '../../src/contract/endpoints.js'
import { createTestServer, type TestServer } from './harness.js'
import { headers } from './helpers.js'

describe('rate limiting', () => {
  let t: TestServer
  beforeAll(async () => {
    t = await createTestServer({ config: { rateLimit: { perSecond: 2, burst: 3 } } })
  })
  afterAll(() => t.close())

  it('429 rate_limited with Retry-After past the burst, per key', async () => {
    const a = (await t.createKey('test')).apiKey
    const b = (await t.createKey('test')).apiKey
    const results = []
    for (let i = 0; i < 5; i++)
      results.push(await t.request({ method: 'GET', url: '/v1/merchants', headers: headers(a) }))
    expect(results.slice(0, 3).map((r) => r.statusCode)).toEqual([200, 200, 200])
    const limited = results[3]!
    expect(limited.statusCode).toBe(429)
    expect(limited.json).toEqual({ code: 'rate_limited', message: expect.any(String) })
    expect(Number(limited.headers['retry-after'])).toBeGreaterThanOrEqual(1)
    expect((await t.request({ method: 'GET', url: '/v1/merchants', headers: headers(b) })).statusCode).toBe(
      200,
    )
    expect((await t.request({ method: 'GET', url: '/healthz' })).statusCode).toBe(200)
  })
})

describe('system routes', () => {
  let t: TestServer
  beforeAll(async () => {
    t = await createTestServer({ config: { publicBaseUrl: 'https://pay.example.com' } })
  })
  afterAll(() => t.close())

  it('GET /healthz', async () => {
    const res = await t.request({ method: 'GET', url: '/healthz' })
    expect(res.statusCode).toBe(200)
    expect(res.json).toEqual({ ok: true })
  })

  it('GET /openapi.json documents every endpoint of the contract', async () => {
    const res = await t.request({ method: 'GET', url: '/openapi.json' })
    expect(res.statusCode).toBe(200)
    const doc = res.json
    expect(doc.openapi).toBe('3.1.0')
    expect(doc.servers).toEqual([{ url: 'https://pay.example.com' }])
    expect(doc.components.securitySchemes.ApiKey).toMatchObject({
      type: 'apiKey',
      in: 'header',
      name: 'Api-Key',
    })
    for (const [name, e] of Object.entries(endpoints)) {
      const path = e.path.replace(/:([A-Za-z]+)/g, '{$1}')
      const op = doc.paths[path]?.[e.method.toLowerCase()]
      expect(op, name).toBeDefined()
      expect(op.operationId).toBe(name)
      expect(op.responses[String(e.status)]).toBeDefined()
    }
    const create = doc.paths['/v1/merchants'].post
    expect(create.parameters.find((p: { name: string }) => p.name === 'Idempotency-Key').required).toBe(true)
    expect(create.requestBody.content['application/json'].schema.required).toEqual([
      'merchantName',
      'merchantEmail',
    ])
    expect(
      doc.paths['/v1/merchants/{merchant-id}/payments'] ?? doc.paths['/v1/merchants/{merchantId}/payments'],
    ).toBeDefined()
    expect(doc.paths['/v1/merchants/{merchantId}/payments'].get.deprecated).toBe(true)
    const list = doc.paths['/v1/merchants'].get.parameters.find((p: { name: string }) => p.name === 'limit')
    expect(list.in).toBe('query')
  })

  it('GET /docs and /docs/wcp serve the reference from this server alone, under a CSP', async () => {
    for (const url of ['/docs', '/docs/wcp']) {
      const res = await t.request({ method: 'GET', url })
      expect(res.statusCode).toBe(200)
      expect(res.headers['content-type']).toMatch(/text\/html/)
      const csp = String(res.headers['content-security-policy'])
      expect(csp).toContain("script-src 'self'")
      expect(csp).toContain("connect-src 'self'")
      expect(csp).not.toMatch(/https?:/)
      // Every file the page loads is a path on this server.
      const references = [...res.body.matchAll(/(?:src|href)="([^"]*)"/g)].map((m) => m[1]!)
      expect(references.length).toBeGreaterThan(0)
      for (const reference of references) {
        expect(reference).toMatch(/^\/docs\//)
        const asset = await t.request({ method: 'GET', url: reference })
        expect(asset.statusCode, reference).toBe(200)
        expect(asset.headers['x-content-type-options']).toBe('nosniff')
      }
    }
    const init = await t.request({ method: 'GET', url: '/docs/init.js' })
    expect(init.body).toContain('/openapi.json')
    expect(init.body).toContain('/wcp/openapi.json')
  })

  it('GET /docs/assets sends gzip to a browser that takes it', async () => {
    const url = '/docs/assets/swagger-ui-bundle.js'
    const plain = await t.app.inject({ method: 'GET', url })
    const gzipped = await t.app.inject({ method: 'GET', url, headers: { 'accept-encoding': 'gzip, br' } })
    expect(plain.headers['content-encoding']).toBeUndefined()
    expect(gzipped.headers['content-encoding']).toBe('gzip')
    expect(gzipped.rawPayload.length).toBeLessThan(plain.rawPayload.length / 2)
    expect(gunzipSync(gzipped.rawPayload).equals(plain.rawPayload)).toBe(true)
  })

  it('GET /docs/assets serves only the renderer files it lists', async () => {
    for (const file of ['package.json', 'index.html', 'swagger-ui-bundle.js.map', '..%2Fpackage.json']) {
      const res = await t.request({ method: 'GET', url: `/docs/assets/${file}` })
      expect(res.statusCode, file).toBe(404)
    }
  })

  it('GET / sends a browser to the API docs, not a JSON 404', async () => {
    const res = await t.request({ method: 'GET', url: '/' })
    expect(res.statusCode).toBe(302)
    expect(res.headers.location).toBe('/docs')
  })

  it('every response carries a Request-Id', async () => {
    const res = await t.request({ method: 'GET', url: '/v1/merchants' })
    expect(res.headers['request-id']).toMatch(/^req_/)
  })
})
