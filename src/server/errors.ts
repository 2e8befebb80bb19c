import type { Socket } from 'node:net'
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod'
import { isServiceErrorCode, type ServiceErrorCode, serviceErrorStatus } from '../contract/errors.js'
import { PayError } from '../errors/PayError.js'
import { isDatabaseUnavailable } from './store/db.js'

export interface ValidationIssue {
  path: string
  message: string
}

/** Throw this from anywhere on the server: `fail('merchant_not_found', 'No such merchant.')`. */
export function fail(code: ServiceErrorCode, message: string, context?: Record<string, unknown>): never {
  throw new PayError({ code, message, status: serviceErrorStatus[code], ...(context ? { context } : {}) })
}

/** `400 params_validation` with one issue per offending field. */
export function validationError(issues: ValidationIssue[]): PayError {
  const summary = issues
    .slice(0, 3)
    .map((i) => `${i.path}: ${i.message}`)
    .join('; ')
  return new PayError({
    code: 'params_validation',
    message: `Invalid request: ${summary}`,
    status: 400,
    context: { issues },
  })
}

/** `400 params_validation` pointing at one request field, rendered like a schema failure. */
export function paramsError(path: string, message: string): PayError {
  return validationError([{ path, message }])
}

/** `400 params_validation` for a body a schema refused (zod issues, paths relative to the body). */
export function bodyValidationError(
  issues: readonly { path: readonly PropertyKey[]; message: string }[],
): PayError {
  return validationError(
    issues.map((i) => ({ path: ['body', ...i.path.map(String)].join('.'), message: i.message })),
  )
}

interface Rendered {
  status: number
  body: { code: ServiceErrorCode; message: string; issues?: ValidationIssue[] }
  headers?: Record<string, string>
}

/** Seconds a client waits before retrying while the database is unreachable. */
export const databaseRetryAfterSeconds = 2

const locations: Record<string, string> = {
  querystring: 'query',
  params: 'path',
  body: 'body',
  headers: 'header',
}

/** Maps any error to the wire: known ones to their code and table status, the rest to a bare 500. */
export function renderError(error: unknown): Rendered | undefined {
  if (error instanceof PayError && isServiceErrorCode(error.code)) {
    const issues =
      error.code === 'params_validation' ? (error.context.issues as ValidationIssue[]) : undefined
    return {
      status: serviceErrorStatus[error.code],
      body: { code: error.code, message: error.shortMessage, ...(issues ? { issues } : {}) },
    }
  }
  if (hasZodFastifySchemaValidationErrors(error)) {
    const location = locations[(error as FastifyError).validationContext ?? 'body'] ?? 'body'
    const issues = error.validation.map((v) => ({
      path: [location, ...v.instancePath.split('/').filter(Boolean)].join('.'),
      message: v.message ?? 'Invalid value.',
    }))
    return renderError(validationError(issues))
  }
  if (isDataException(error)) {
    return {
      status: 400,
      body: { code: 'invalid_params', message: 'A value in the request cannot be stored.' },
    }
  }
  if (isDatabaseUnavailable(error)) {
    // The spec's codes are fixed and none says "unavailable": internal_error is the one a client
    // already treats as the service's fault, and 503 + Retry-After says "retry, nothing was done"
    // (a transaction that lost its connection is rolled back, an Idempotency-Key is not kept).
    return {
      status: 503,
      body: { code: 'internal_error', message: 'The database is unavailable; retry shortly.' },
      headers: { 'retry-after': String(databaseRetryAfterSeconds) },
    }
  }
  const fastifyError = error as Partial<FastifyError>
  const status = fastifyError.statusCode
  if (typeof status === 'number' && status >= 400 && status < 500) {
    return { status: 400, body: { code: 'invalid_params', message: clientErrorMessage(fastifyError) } }
  }
  return undefined
}

/**
 * PostgreSQL refusing a value the schemas let through (an unpaired surrogate, a number past numeric
 * range, an over-long index key): the client's data, so a 400, never a 500.
 */
const dataExceptions = new Set(['22001', '22003', '22021', '22P05', '54000'])
function isDataException(error: unknown): boolean {
  const e = error as { code?: unknown; severity?: unknown }
  return typeof e?.code === 'string' && typeof e.severity === 'string' && dataExceptions.has(e.code)
}

/** Fastify's own request errors, worded for API callers. */
function clientErrorMessage(error: Partial<FastifyError>): string {
  switch (error.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return 'Unsupported Content-Type: send application/json.'
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return 'Request body is too large.'
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return 'Request body is not valid JSON.'
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return 'Content-Length does not match the body.'
    case 'FST_ERR_BAD_URL':
    case 'FST_ERR_MAX_PARAM_LENGTH':
      return 'Malformed or over-long URL.'
    default:
      return error.name === 'SyntaxError' ? 'Request body is not valid JSON.' : 'Invalid request.'
  }
}

export function registerErrorHandling(app: FastifyInstance): void {
  const routes = routeMethods(app)
  app.setErrorHandler((error, request, reply) => sendError(error, request, reply))
  // Before any body parsing: a method a path lacks (QUERY with no Content-Type included) is 405 + Allow.
  // A path a static route owns is that route's (PATCH /v1/merchants/payments is not a merchant's).
  app.addHook('onRequest', (request, reply, done) => {
    const path = request.url.split('?')[0]!
    const owned = routes.staticMethods(path)
    const allow = owned
      ? owned.includes(request.method)
        ? undefined
        : owned.join(', ')
      : request.is404
        ? routes.methods(path)
        : undefined
    if (allow === undefined) return done()
    reply
      .code(405)
      .header('allow', allow)
      .send({ code: 'invalid_params', message: `${request.method} is not allowed here; use ${allow}.` })
  })
  app.setNotFoundHandler((request, reply) => {
    // No spec code means "no such route"; invalid_params is the closest, with the honest status.
    reply
      .code(404)
      .send({ code: 'invalid_params', message: `No route ${request.method} ${request.url.split('?')[0]}.` })
  })
}

/**
 * The methods the app answers on a concrete path (for `405` + `Allow`), from every route registered
 * after this call: any route's whose pattern matches, or only the static route's of exactly that path.
 */
function routeMethods(app: FastifyInstance) {
  const routes: { pattern: RegExp; methods: Set<string> }[] = []
  const staticRoutes = new Map<string, Set<string>>()
  app.addHook('onRoute', (route) => {
    const source = route.url
      .split('/')
      .map((part) => (part.startsWith(':') ? '[^/]+' : part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')))
      .join('/')
    const pattern = new RegExp(`^${source}/?$`)
    let entry = routes.find((r) => r.pattern.source === pattern.source)
    if (!entry) {
      entry = { pattern, methods: new Set() }
      routes.push(entry)
    }
    for (const method of [route.method].flat()) entry.methods.add(method)
    if (!route.url.includes(':')) staticRoutes.set(route.url.replace(/\/$/, ''), entry.methods)
  })
  const sorted = (methods: Set<string>) => [...methods].sort()
  return {
    methods(path: string): string | undefined {
      const methods = new Set<string>()
      for (const route of routes) if (route.pattern.test(path)) for (const m of route.methods) methods.add(m)
      return methods.size === 0 ? undefined : sorted(methods).join(', ')
    },
    staticMethods(path: string): string[] | undefined {
      const methods = staticRoutes.get(path.replace(/\/$/, ''))
      return methods && sorted(methods)
    },
  }
}

/** Renders any error (also Fastify's router errors via its `frameworkErrors` option). */
export function sendError(error: unknown, request: FastifyRequest, reply: FastifyReply): void {
  reply.header('request-id', request.id)
  const rendered = renderError(error)
  if (rendered) {
    if (rendered.status >= 500) request.log.error({ err: error }, 'request failed')
    if (rendered.headers) reply.headers(rendered.headers)
    reply.code(rendered.status).send(rendered.body)
    return
  }
  request.log.error({ err: error, reqId: request.id }, 'unhandled error')
  reply.code(500).send({ code: 'internal_error', message: `Internal error (request ${request.id}).` })
}

/**
 * A request Node's HTTP parser refused before any route saw it (a control character in a header, a
 * malformed request line, headers past the size limit): answered in the contract's `{code, message}`
 * like every other refusal, then the connection is closed, as the parser cannot find the next request.
 */
export function answerUnparsableRequest(error: NodeJS.ErrnoException, socket: Socket) {
  if (error.code === 'ECONNRESET' || socket.destroyed) return
  const [status, reason, message] =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? [431, 'Request Header Fields Too Large', 'The request headers are too large.']
      : error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
        ? [408, 'Request Timeout', 'The request did not arrive in time.']
        : [
            400,
            'Bad Request',
            'The request is not valid HTTP/1.1: a header or the request line holds a character HTTP does not allow.',
          ]
  const body = JSON.stringify({ code: 'invalid_params', message })
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${reason}\r\nContent-Type: application/json; charset=utf-8\r\n` +
        `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    )
  }
  socket.destroy()
}
