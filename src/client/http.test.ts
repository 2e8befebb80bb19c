import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { serviceErrorCodes, serviceErrorStatus } from '../contract/errors.js'
import { isPayError, PayError } from '../errors/PayError.js'
import { createGatewayClient } from './gateway.js'
import { createHttpClient } from './http.js'
import { parseRetryAfter, retryDelay } from './retry.js'
import { zodParser } from './zodParser.js'

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void
let handlers: Handler[] = []
let seen: { method: string; url: string; headers: IncomingMessage['headers']; body: string }[] = []
let server: Server
let baseUrl: string

beforeAll(async () => {
  server = createServer((req, res) => {
    let body = ''
    req.on('data', (chunk) => {
      body += chunk
    })
    req.on('end', () => {
      seen.push({ method: req.method!, url: req.url!, headers: req.headers, body })
      const handler = handlers.shift()
      if (!handler) {
        res.writeHead(599).end()
        return
      }
      handler(req, res, body)
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
afterEach(() => {
  handlers = []
  seen = []
})

const json =
  (status: number, body: unknown, headers: Record<string, string> = {}): Handler =>
  (_req, res) => {
    res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body))
  }
const ok = zodParser(z.object({ ok: z.boolean() }))
const fastRetry = { attempts: 3, baseDelayMs: 1, maxDelayMs: 50 }

describe('createHttpClient', () => {
  it('sends auth, version, SDK and idempotency headers and a JSON body', async () => {
    handlers.push(json(200, { ok: true }))
    const http = createHttpClient({
      baseUrl: `${baseUrl}/`,
      auth: { apiKey: 'svc_test_x' },
      version: '2026-02-18',
      sdk: { platform: 'test' },
    })
    const result = await http.request({
      method: 'POST',
      path: '/v1/things',
      query: { status: ['a', 'b'], skip: undefined },
      body: { a: 1 },
      idempotencyKey: 'k1',
      parse: ok,
      errorCodes: serviceErrorCodes,
    })
    expect(result).toEqual({ ok: true })
    const [call] = seen
    expect(call?.url).toBe('/v1/things?status=a&status=b')
    expect(call?.headers).toMatchObject({
      'api-key': 'svc_test_x',
      'pay-version': '2026-02-18',
      'idempotency-key': 'k1',
      'sdk-name': 'caipay',
      'sdk-platform': 'test',
      'content-type': 'application/json',
    })
    expect(JSON.parse(call!.body)).toEqual({ a: 1 })
  })

  it('sends App-Id and Client-Id for wallet authentication', async () => {
    handlers.push(json(200, { ok: true }))
    await createHttpClient({ baseUrl, auth: { appId: 'app_test_1', clientId: 'c1' } }).request({
      method: 'GET',
      path: '/',
      parse: ok,
      errorCodes: serviceErrorCodes,
    })
    expect(seen[0]?.headers).toMatchObject({ 'app-id': 'app_test_1', 'client-id': 'c1' })
    expect(seen[0]?.headers['api-key']).toBeUndefined()
  })

  it('turns an error body into a PayError with the service code, status and message', async () => {
    handlers.push(json(409, { code: 'already_refunded', message: 'Payment already refunded.' }))
    const error = await createHttpClient({ baseUrl })
      .request({ method: 'POST', path: '/v1/refunds', body: {}, parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(isPayError(error, 'already_refunded')).toBe(true)
    expect(error).toMatchObject({ status: 409, shortMessage: 'Payment already refunded.' })
  })

  it('keeps validation issues in the context', async () => {
    handlers.push(
      json(400, {
        code: 'params_validation',
        message: 'Invalid body.',
        issues: [{ path: 'amount.value', message: 'Expected' }],
      }),
    )
    const error = await createHttpClient({ baseUrl })
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(error.context.issues).toEqual([{ path: 'amount.value', message: 'Expected' }])
  })

  it('maps a malformed success body or an unknown error body to invalid_response, never a crash', async () => {
    handlers.push(json(200, { ok: 'yes' }))
    handlers.push((_req, res) => res.writeHead(200).end('not json'))
    handlers.push(json(418, { nope: true }))
    const http = createHttpClient({ baseUrl })
    for (let i = 0; i < 3; i++) {
      const error = await http
        .request({
          method: 'GET',
          path: '/',
          parse: ok,
          errorCodes: serviceErrorCodes,
          retry: undefined,
        } as never)
        .catch((e) => e)
      expect(isPayError(error, 'invalid_response')).toBe(true)
    }
  })

  it('retries 429 and 5xx on GET, honouring Retry-After', async () => {
    handlers.push(json(503, { code: 'internal_error', message: 'down' }))
    handlers.push(json(429, { code: 'rate_limited', message: 'slow down' }, { 'retry-after': '0' }))
    handlers.push(json(200, { ok: true }))
    const started = Date.now()
    expect(
      await createHttpClient({ baseUrl, retry: fastRetry }).request({
        method: 'GET',
        path: '/',
        parse: ok,
        errorCodes: serviceErrorCodes,
      }),
    ).toEqual({ ok: true })
    expect(seen).toHaveLength(3)
    expect(Date.now() - started).toBeLessThan(1000)
  })

  it('gives up after the bounded number of attempts with the last error', async () => {
    for (let i = 0; i < 3; i++) handlers.push(json(500, { code: 'internal_error', message: `fail ${i}` }))
    const error = await createHttpClient({ baseUrl, retry: fastRetry })
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(isPayError(error, 'internal_error')).toBe(true)
    expect(error.shortMessage).toBe('fail 2')
    expect(seen).toHaveLength(3)
  })

  it('never retries a POST without an idempotency key, and retries one with a key', async () => {
    handlers.push(json(503, { code: 'internal_error', message: 'down' }))
    const error = await createHttpClient({ baseUrl, retry: fastRetry })
      .request({ method: 'POST', path: '/', body: {}, parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(isPayError(error, 'internal_error')).toBe(true)
    expect(seen).toHaveLength(1)

    handlers.push(json(503, { code: 'internal_error', message: 'down' }))
    handlers.push(json(200, { ok: true }))
    await createHttpClient({ baseUrl, retry: fastRetry }).request({
      method: 'POST',
      path: '/',
      body: {},
      idempotencyKey: 'k',
      parse: ok,
      errorCodes: serviceErrorCodes,
    })
    expect(seen).toHaveLength(3)
    expect(seen[1]?.headers['idempotency-key']).toBe('k')
    expect(seen[2]?.headers['idempotency-key']).toBe('k')
  })

  it('does not retry 4xx other than 429', async () => {
    handlers.push(json(404, { code: 'payment_not_found', message: 'nope' }))
    await createHttpClient({ baseUrl, retry: fastRetry })
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch(() => {})
    expect(seen).toHaveLength(1)
  })

  it('retries network failures and reports network_error when they persist', async () => {
    const http = createHttpClient({ baseUrl: 'http://127.0.0.1:1', retry: fastRetry })
    const error = await http
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(isPayError(error, 'network_error')).toBe(true)
    expect(error.context.attempt).toBe(3)
  })

  it('aborts during a back-off wait', async () => {
    handlers.push(json(503, { code: 'internal_error', message: 'down' }, { 'retry-after': '30' }))
    const controller = new AbortController()
    const http = createHttpClient({ baseUrl, retry: { attempts: 3, baseDelayMs: 1, maxDelayMs: 60_000 } })
    const pending = http
      .request({
        method: 'GET',
        path: '/',
        parse: ok,
        errorCodes: serviceErrorCodes,
        signal: controller.signal,
      })
      .catch((e) => e)
    setTimeout(() => controller.abort(), 50)
    const error = await pending
    expect(isPayError(error, 'aborted')).toBe(true)
    expect(seen).toHaveLength(1)
  })

  it('gives up on a service that takes the request and never answers, retries, and says so', async () => {
    const silent: Handler = () => {}
    handlers.push(silent, silent)
    const http = createHttpClient({ baseUrl, retry: { ...fastRetry, attempts: 2, timeoutMs: 100 } })
    const error = await http
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(isPayError(error, 'network_error')).toBe(true)
    expect(error.message).toContain('did not answer in time')
    expect(seen).toHaveLength(2)
  })

  it('cuts an answer whose body stops half-way, as a silent service', async () => {
    handlers.push((_req, res) => {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.write('{"ok":')
    })
    const http = createHttpClient({ baseUrl, retry: { ...fastRetry, attempts: 1, timeoutMs: 150 } })
    const error = await http
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(isPayError(error, 'network_error')).toBe(true)
    expect(error.message).toContain('did not answer in time')
  })

  it('rejects at once when already aborted', async () => {
    const error = await createHttpClient({ baseUrl })
      .request({
        method: 'GET',
        path: '/',
        parse: ok,
        errorCodes: serviceErrorCodes,
        signal: AbortSignal.abort(),
      })
      .catch((e) => e)
    expect(isPayError(error, 'aborted')).toBe(true)
    expect(seen).toHaveLength(0)
  })

  it.each(serviceErrorCodes)('maps error code %s with its HTTP status', async (code) => {
    handlers.push(json(serviceErrorStatus[code], { code, message: `msg ${code}` }))
    const error = await createHttpClient({ baseUrl, retry: { attempts: 1 } })
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(error).toBeInstanceOf(PayError)
    expect(error).toMatchObject({ code, status: serviceErrorStatus[code] })
  })
})

describe('createGatewayClient', () => {
  it('checks responses against the generated contract schemas and drops undeclared keys', async () => {
    handlers.push(json(200, { status: 'processing', isFinal: false, pollInMs: 500, extra: 'x' }))
    const gateway = createGatewayClient({ baseUrl })
    expect(await gateway.getStatus('pay_1')).toEqual({ status: 'processing', isFinal: false, pollInMs: 500 })
    expect(seen[0]).toMatchObject({ method: 'GET', url: '/v1/gateway/payment/pay_1/status' })
  })

  it('asks for a held status read with Prefer: wait only when waitSeconds is given', async () => {
    handlers.push(json(200, { status: 'processing', isFinal: false, pollInMs: 0 }))
    handlers.push(json(200, { status: 'processing', isFinal: false, pollInMs: 1000 }))
    const gateway = createGatewayClient({ baseUrl })
    await gateway.getStatus('pay_1', { waitSeconds: 15 })
    await gateway.getStatus('pay_1')
    expect(seen[0]!.headers.prefer).toBe('wait=15')
    expect(seen[1]!.headers.prefer).toBeUndefined()
  })

  it('gives a held status read the time it asked the service to hold, on top of the time limit', async () => {
    const late: Handler = (_req, res) => {
      setTimeout(() => json(200, { status: 'processing', isFinal: false, pollInMs: 0 })(_req, res, ''), 400)
    }
    handlers.push(late, late)
    const gateway = createGatewayClient({ baseUrl, retry: { attempts: 1, timeoutMs: 200 } })
    expect(await gateway.getStatus('pay_1', { waitSeconds: 1 })).toMatchObject({ status: 'processing' })
    const error = await gateway.getStatus('pay_1').catch((e) => e)
    expect(isPayError(error, 'network_error')).toBe(true)
  })

  it("takes from an error body only the codes the gateway's operations can answer", async () => {
    handlers.push(json(410, { code: 'payment_expired', message: 'Expired.' }))
    handlers.push(json(409, { code: 'already_refunded', message: 'A merchant API code.' }))
    handlers.push(json(400, { code: 'user_rejected', message: 'A client-side code.' }))
    const gateway = createGatewayClient({ baseUrl, retry: { attempts: 1 } })
    const codes = []
    for (let i = 0; i < 3; i++) codes.push(await gateway.getPayment('pay_1').catch((e) => [e.code, e.status]))
    expect(codes).toEqual([
      ['payment_expired', 410],
      ['invalid_response', 409],
      ['invalid_response', 400],
    ])
  })

  it('maps an off-contract response to invalid_response with the issues', async () => {
    handlers.push(json(200, { status: 'paid', isFinal: false, pollInMs: 500 }))
    const error = await createGatewayClient({ baseUrl })
      .getStatus('pay_1')
      .catch((e) => e)
    expect(isPayError(error, 'invalid_response')).toBe(true)
    expect(error.context.issues).toEqual([{ path: 'status', message: expect.stringContaining('processing') }])
  })

  it('reports zod issues the same way for zod-checked clients', async () => {
    handlers.push(json(200, { ok: 'yes' }))
    const error = await createHttpClient({ baseUrl })
      .request({ method: 'GET', path: '/', parse: ok, errorCodes: serviceErrorCodes })
      .catch((e) => e)
    expect(error.context.issues).toEqual([{ path: 'ok', message: expect.any(String) }])
  })
})

describe('retry policy', () => {
  it('backs off exponentially with jitter inside the cap', () => {
    const policy = { attempts: 5, baseDelayMs: 100, maxDelayMs: 1000 }
    expect(retryDelay(policy, 1, undefined, () => 0)).toBe(50)
    expect(retryDelay(policy, 1, undefined, () => 1)).toBe(100)
    expect(retryDelay(policy, 3, undefined, () => 1)).toBe(400)
    expect(retryDelay(policy, 10, undefined, () => 1)).toBe(1000)
    expect(retryDelay(policy, 1, 5000)).toBe(1000)
  })
  it('parses Retry-After seconds and dates', () => {
    expect(parseRetryAfter('3')).toBe(3000)
    expect(parseRetryAfter(new Date(10_000).toUTCString(), 4000)).toBe(6000)
    expect(parseRetryAfter('soon')).toBeUndefined()
    expect(parseRetryAfter(null)).toBeUndefined()
  })
})
