import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { ServerConfig } from './config.js'

/**
 * CORS for browser wallets (web wallets, extensions, WebViews). Two surfaces:
 * - the wallet gateway (`/v1/gateway/...`, and the compatibility mount `/wcp/v1/gateway/...`), open to
 *   any origin by default: its credentials (`Api-Key`, `App-Id` + `Client-Id`) are headers a page must
 *   already hold, never cookies, so no `Access-Control-Allow-Credentials` is ever sent;
 * - the merchant API (every other `/v1/` path), closed by default: partner keys never belong in a
 *   browser, so only origins listed in the config are answered, and never `*`.
 * Hosted pages, `/docs` and `/openapi.json` are same-origin and get nothing.
 *
 * Preflights are answered before auth and the rate limit (they carry no credentials). Every other
 * response to an allowed origin, errors and 404s included, carries the headers (onSend, and the app's
 * `frameworkErrors` for malformed URLs, which skip the hooks), so a wallet reads a 401 or a 429 as the
 * API's `{code, message}` rather than as an opaque network failure.
 */

type Surface = 'gateway' | 'merchant'

// Solana Pay transaction requests are fetched by wallets, some of them in a browser (routes/solanaPay.ts).
const gatewayPrefixes = ['/v1/gateway/', '/wcp/v1/gateway/', '/v1/solana-pay/']

/** The request headers the API reads; a preflight asking for others is still answered with this list. */
const allowHeaders: Record<Surface, string> = {
  // WCP-Version and Api-Version: the WalletConnect Pay SDK's version headers (the /wcp mount reads them).
  gateway:
    'Content-Type, Api-Key, App-Id, Client-Id, Pay-Version, WCP-Version, Api-Version, Sdk-Name, Sdk-Version, Sdk-Platform, Idempotency-Key, Prefer',
  merchant:
    'Content-Type, Api-Key, Merchant-Id, Pay-Version, Sdk-Name, Sdk-Version, Sdk-Platform, Idempotency-Key, Prefer',
}

const allowMethods: Record<Surface, string> = {
  gateway: 'GET, POST',
  merchant: 'GET, POST, PUT, PATCH, DELETE',
}

/** Response headers a client may read beyond the CORS-safelisted ones. */
const exposeHeaders: Record<Surface, string> = {
  gateway:
    'Pay-Version, WCP-Version, Request-Id, Retry-After, Idempotent-Replayed, Preference-Applied, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset',
  merchant:
    'Pay-Version, Request-Id, Retry-After, Idempotent-Replayed, Deprecation, Preference-Applied, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset',
}

/** Chromium caps a cached preflight at 2 h; the answer only changes with the config, i.e. on restart. */
const maxAgeSeconds = '7200'

export interface CorsPolicy {
  /** Adds the headers of an actual (non-preflight) response; nothing when the request has no Origin. */
  addHeaders(request: FastifyRequest, reply: FastifyReply): void
  /** Answers preflights (onRequest) and adds the headers to every other response (onSend). */
  register(app: FastifyInstance): void
}

export function createCorsPolicy(cors: ServerConfig['cors']): CorsPolicy {
  const allowed: Record<Surface, '*' | ReadonlySet<string>> = {
    gateway: cors.gateway === '*' ? '*' : new Set(cors.gateway),
    merchant: new Set(cors.merchant),
  }

  /** The value of `Access-Control-Allow-Origin` for this origin, or undefined when it gets none. */
  function allowOrigin(surface: Surface, origin: string): string | undefined {
    const origins = allowed[surface]
    if (origins === '*') return '*'
    return origins.has(origin) ? origin : undefined
  }

  function addHeaders(request: FastifyRequest, reply: FastifyReply): void {
    const origin = request.headers.origin
    if (origin === undefined || isPreflight(request)) return
    const surface = surfaceOf(request.url)
    if (!surface) return
    if (allowed[surface] !== '*') addVary(reply, 'Origin')
    const value = allowOrigin(surface, origin)
    if (value === undefined) return
    reply
      .header('access-control-allow-origin', value)
      .header('access-control-expose-headers', exposeHeaders[surface])
  }

  function answerPreflight(request: FastifyRequest, reply: FastifyReply, done: () => void): void {
    const origin = request.headers.origin
    const surface = origin === undefined || !isPreflight(request) ? undefined : surfaceOf(request.url)
    if (origin === undefined || !surface) {
      done()
      return
    }
    if (allowed[surface] !== '*') addVary(reply, 'Origin')
    const value = allowOrigin(surface, origin)
    if (value === undefined) {
      reply.code(403).send({
        code: 'forbidden',
        message: `Origin ${origin.slice(0, 200)} may not call this API from a browser (see the cors config key).`,
      })
      return
    }
    reply
      .code(204)
      .header('access-control-allow-origin', value)
      .header('access-control-allow-methods', allowMethods[surface])
      .header('access-control-allow-headers', allowHeaders[surface])
      .header('access-control-max-age', maxAgeSeconds)
      .send()
  }

  return {
    addHeaders,
    register(app) {
      app.addHook('onRequest', answerPreflight)
      app.addHook('onSend', (request, reply, payload, done) => {
        addHeaders(request, reply)
        done(null, payload)
      })
    },
  }
}

function isPreflight(request: FastifyRequest): boolean {
  return request.method === 'OPTIONS' && request.headers['access-control-request-method'] !== undefined
}

function surfaceOf(url: string): Surface | undefined {
  if (gatewayPrefixes.some((prefix) => url.startsWith(prefix))) return 'gateway'
  return url.startsWith('/v1/') ? 'merchant' : undefined
}

/** Adds `name` to the response's `Vary` (other parts of the pipeline add theirs). */
export function addVary(reply: FastifyReply, name: string): void {
  const current = reply.getHeader('vary')
  const names = typeof current === 'string' && current !== '' ? current.split(/\s*,\s*/) : []
  if (!names.some((n) => n.toLowerCase() === name.toLowerCase())) names.push(name)
  reply.header('vary', names.join(', '))
}
