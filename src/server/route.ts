import type { FastifyInstance, FastifyReply, FastifyRequest, RouteOptions } from 'fastify'
import type { ZodTypeProvider } from 'fastify-type-provider-zod'
import * as z from 'zod/mini'
import type { Endpoint } from '../contract/endpoints.js'
import type { ApiVersion } from '../contract/errors.js'
import { authenticate, checkAsciiHeaders, header, resolveMerchantHeader } from './auth.js'
import type { ServerConfig } from './config.js'
import type { AuthContext } from './context.js'
import { bodyValidationError, fail } from './errors.js'
import type { FastPath } from './fastPath.js'
import { checkIdempotencyKey, fingerprint, type IdempotentOutcome, runIdempotent } from './idempotency.js'
import { configuredSecretBox } from './secrets.js'
import type { Db } from './store/db.js'
import type { MerchantRow } from './store/schema.js'
import { resolveApiVersion } from './version.js'

type Out<S> = S extends z.ZodMiniType ? z.output<S> : undefined

/** What a route handler receives. */
export interface RouteContext<E extends Endpoint> {
  request: FastifyRequest
  reply: FastifyReply
  params: Out<E['params']>
  query: Out<E['query']>
  body: Out<E['body']>
  auth: AuthContext
  /** The `Merchant-Id` merchant on `merchant` endpoints; null on the others. */
  merchant: E['auth'] extends 'merchant' ? MerchantRow : null
  apiVersion: ApiVersion
  /**
   * Use this, not `app.db`: under an Idempotency-Key it is the transaction that also stores the
   * response. Open nested work with `inTransaction(ctx.db, fn)` (store/db.ts), never `db.transaction()`.
   */
  db: Db
  config: ServerConfig
  /** The app's shortcuts (fastPath.ts): each answers what it knows, or undefined to take the plain path. */
  fastPath: FastPath
  /** The request's time, from the app clock. */
  now: Date
  /**
   * Runs `fn` once the handler's writes are committed (or rolled back): under an Idempotency-Key that is
   * after the handler returns. For in-process caches that must not be refilled from the old row.
   */
  afterCommit(fn: () => void): void
}

export type RouteHandler<E extends Endpoint> = (ctx: RouteContext<E>) => Promise<z.output<E['response']>>

export interface DefineRouteOptions {
  /**
   * Body schemas that replace the endpoint's body for some versions (e.g. the preview payment
   * body with `checkout`). Those routes validate the body after the version is known.
   */
  bodyByVersion?: Partial<Record<ApiVersion, z.ZodMiniType>>
}

type Runner<E extends Endpoint> = (
  request: FastifyRequest,
  reply: FastifyReply,
  ctx: RouteContext<E>,
  key: string | undefined,
) => Promise<unknown>

/**
 * Registers one endpoint of the contract registry: path, method, schemas and success status come
 * from the descriptor; the pipeline is ASCII headers -> auth -> version -> merchant -> (rate limit)
 * -> validation -> idempotency -> handler. Errors thrown anywhere render through errors.ts.
 */
export function defineRoute<E extends Endpoint>(
  app: FastifyInstance,
  endpoint: E,
  handler: RouteHandler<E>,
  options: DefineRouteOptions = {},
): void {
  registerRoute(app, endpoint, options, async (request, reply, ctx, key) => {
    if (key === undefined) return reply.code(endpoint.status).send(await handler(ctx))
    const outcome = await runIdempotent({
      ...keyScope(app, endpoint, request, ctx, key),
      successStatus: endpoint.status,
      handler: (trx) => handler({ ...ctx, db: trx }),
    })
    return sendOutcome(reply, outcome)
  })
}

function keyScope<E extends Endpoint>(
  app: FastifyInstance,
  endpoint: E,
  request: FastifyRequest,
  ctx: RouteContext<E>,
  key: string,
) {
  return {
    db: app.db,
    auth: ctx.auth,
    key,
    fingerprint: fingerprint({
      route: `${endpoint.method} ${endpoint.path}`,
      merchantId: request.merchant?.id ?? null,
      params: request.params,
      body: request.body,
    }),
    now: ctx.now,
    ttlSeconds: app.config.idempotencyTtlSeconds,
    box: configuredSecretBox(app.config),
  }
}

function sendOutcome(reply: FastifyReply, outcome: IdempotentOutcome<unknown>) {
  if (outcome.replayed) {
    return reply
      .code(outcome.stored.status)
      .header('idempotent-replayed', 'true')
      .type('application/json; charset=utf-8')
      .send(outcome.stored.body)
  }
  return reply.code(outcome.status).send(outcome.result)
}

function registerRoute<E extends Endpoint>(
  app: FastifyInstance,
  endpoint: E,
  options: DefineRouteOptions,
  run: Runner<E>,
): void {
  const versionedBody = options.bodyByVersion !== undefined
  const idempotency = endpoint.idempotencyKey ?? (endpoint.method === 'GET' ? undefined : 'optional')

  const route: RouteOptions = {
    method: endpoint.method,
    url: endpoint.path,
    schema: {
      ...(endpoint.params ? { params: endpoint.params } : {}),
      ...(endpoint.query ? { querystring: endpoint.query } : {}),
      ...(endpoint.body && !versionedBody ? { body: endpoint.body } : {}),
      response: { [endpoint.status]: endpoint.response },
    },
    onRequest: async (request, reply) => {
      checkAsciiHeaders(request)
      const auth = await authenticate(app.db, request, endpoint.auth, app.fastPath.auth)
      request.auth = auth
      request.apiVersion = resolveApiVersion(header(request, 'pay-version'), auth.pinnedVersion)
      reply.header('pay-version', request.apiVersion)
      if (endpoint.deprecated) reply.header('deprecation', 'true')
      if (endpoint.auth === 'merchant')
        request.merchant = await resolveMerchantHeader(app.db, request, auth, app.fastPath.auth)
    },
    // Only routes with a body per version get this hook: the status reads run none they do not need.
    ...(versionedBody
      ? {
          preValidation: async (request: FastifyRequest) => {
            const schema = options.bodyByVersion?.[request.apiVersion!] ?? endpoint.body!
            const result = z.safeParse(schema, request.body)
            if (!result.success) throw bodyValidationError(result.error.issues)
            request.body = result.data
          },
        }
      : {}),
    handler: async (request, reply) => {
      const key = idempotency === undefined ? undefined : idempotencyKey(request, idempotency)
      const auth = request.auth!
      let afterCommit: (() => void)[] | undefined
      const ctx = {
        request,
        reply,
        params: request.params,
        query: request.query,
        body: request.body,
        auth,
        merchant: request.merchant,
        apiVersion: request.apiVersion!,
        db: app.db,
        config: app.config,
        fastPath: app.fastPath,
        now: app.now(),
        afterCommit: (fn: () => void) => {
          afterCommit ??= []
          afterCommit.push(fn)
        },
      } as RouteContext<E>
      try {
        return await run(request, reply, ctx, key)
      } finally {
        if (afterCommit) for (const fn of afterCommit) fn()
      }
    },
  }
  app.withTypeProvider<ZodTypeProvider>().route(route)
}

/** The request's Idempotency-Key, checked; undefined when absent and the endpoint allows that. */
function idempotencyKey(request: FastifyRequest, idempotency: 'optional' | 'required'): string | undefined {
  const key = header(request, 'idempotency-key')
  if (key === undefined) {
    if (idempotency === 'required') fail('invalid_params', 'The Idempotency-Key header is required.')
    return undefined
  }
  checkIdempotencyKey(key)
  return key
}
