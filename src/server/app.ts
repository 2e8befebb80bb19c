import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify'
import { serializerCompiler, validatorCompiler } from 'fastify-type-provider-zod'
import * as z from 'zod/mini'
import { createLiveRuntime, type LiveRuntime } from './chains/live.js'
import './context.js'
import { PayError } from '../errors/PayError.js'
import { resolveConfig, type ServerConfig } from './config.js'
import { createCorsPolicy } from './cors.js'
import { answerUnparsableRequest, registerErrorHandling, sendError } from './errors.js'
import { FastPath } from './fastPath.js'
import { newId } from './ids.js'
import { serverJobHandlers } from './jobRegistry.js'
import { createChainProbes } from './metrics/chains.js'
import { registerProbeRoutes, registerRequestMetrics } from './metrics/http.js'
import { createInstanceMetrics } from './metrics/scrape.js'
import { registerRequestTracing } from './metrics/tracing.js'
import { StatusChanges } from './payments/statusChanges.js'
import { registerRateLimit } from './rateLimit.js'
import { OneLineRequestLog } from './requestLog.js'
import { routeModules } from './routes/index.js'
import type { Db } from './store/db.js'

// zod/mini ships without messages; the server wants readable ones (the wallet core stays small).
z.config(z.locales.en())

export interface BuildAppOptions {
  /** A migrated database (see openDatabase / migrate). The app does not close it. */
  db: Db
  /** A full config (loadConfig) or a partial one in config-file form; defaults fill the rest. */
  config?: ServerConfig | Record<string, unknown>
  /** The clock for expiry and timestamps (tests move it). */
  now?: () => Date
  /** A pino logger, or false (default) for none. */
  logger?: FastifyBaseLogger | false
  /** Overrides `config.fastPaths`: false takes the plain path everywhere (fastPath.ts). */
  fastPaths?: boolean
  /** Live-mode drivers and job handlers; built from `config.chains` when omitted. */
  live?: LiveRuntime
  /** x402 facilitator tuning (how long a settle waits for its transaction before answering pending). */
  x402?: FastifyInstance['x402Options']
  /** Serve `/metrics` on this app (default true; false when a metrics port of its own serves it). */
  metricsRoute?: boolean
  /**
   * The per-request metrics and tracing hooks (default true). False only to measure what they cost
   * (bench/observability.ts): the app then times and traces no request.
   */
  requestHooks?: boolean
}

/** The whole HTTP app, ready for `inject` or `listen`. */
export async function buildApp(options: BuildAppOptions): Promise<FastifyInstance> {
  const resolved = isResolved(options.config) ? options.config : resolveConfig(options.config ?? {})
  // One switch for every shortcut: the option lands in the config, which the chain runtimes are built from.
  const config = options.fastPaths === undefined ? resolved : { ...resolved, fastPaths: options.fastPaths }
  const cors = createCorsPolicy(config.cors)
  const app = Fastify({
    ...(options.logger
      ? { loggerInstance: options.logger, logController: new OneLineRequestLog() }
      : { logger: false }),
    bodyLimit: config.bodyLimitBytes,
    // The client address the failed-authentication limit and App-Id quotas count by (docs/security-model.md).
    trustProxy: config.trustProxy,
    genReqId: nextRequestId,
    // Bad percent-encoding and over-long path parameters get the same {code, message} as the rest.
    frameworkErrors: (error, request, reply) => {
      cors.addHeaders(request, reply)
      sendError(error, request, reply)
    },
    // `/v1/merchants/` is `/v1/merchants`. A path parameter may be as long as the longest the contract
    // takes (a percent-encoded payment link at /wcp, 2048 characters decoded).
    routerOptions: { ignoreTrailingSlash: true, maxParamLength: 8192 },
    clientErrorHandler: answerUnparsableRequest,
  }) as unknown as FastifyInstance
  app.setValidatorCompiler(validatorCompiler)
  app.setSerializerCompiler(serializerCompiler)

  app.decorate('db', options.db)
  app.decorate('config', config)
  const fastPath = new FastPath({
    enabled: config.fastPaths,
    authCacheMs: config.authCacheMs,
  })
  app.decorate('fastPath', fastPath)
  const unregisterFastPath = fastPath.register()
  app.addHook('onClose', async () => unregisterFastPath())
  const now = options.now ?? (() => new Date())
  app.decorate('now', now)
  // Waiting is offered once server.ts connects the change feed (setListening); held reads answer at close.
  const statusChanges = new StatusChanges(config.statusWaitMaxMs)
  app.decorate('statusChanges', statusChanges)
  app.addHook('preClose', async () => statusChanges.close())
  const live =
    options.live ??
    createLiveRuntime({
      config,
      db: options.db,
      finals: fastPath.finalStatuses,
      ...(options.logger ? { log: options.logger } : {}),
    })
  app.decorate('chainDrivers', live.drivers)
  app.decorate('liveChains', live.chains ?? { evm: [], solana: [] })
  app.decorate('x402Options', options.x402 ?? {})
  app.decorate('jobHandlers', serverJobHandlers(config, live))
  const probes = createChainProbes(config, app.liveChains)
  const metrics = createInstanceMetrics({
    db: options.db,
    probes,
    jobKinds: Object.keys(app.jobHandlers),
    now,
  })
  app.decorate('operations', { metrics, probes })
  app.decorateRequest('auth', null)
  app.decorateRequest('merchant', null)
  app.decorateRequest('apiVersion', null)

  // JSON only. Empty bodies are fine (cancel sends none even with a JSON content type). PostgreSQL
  // text cannot hold NUL, so it is refused here rather than failing in the database.
  const jsonParser = app.getDefaultJsonParser('error', 'error')
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string
    if (text.trim() === '') return done(null, undefined)
    if (/\\u0000/i.test(text))
      return done(
        new PayError({ code: 'invalid_params', message: 'NUL characters are not allowed.' }),
        undefined,
      )
    jsonParser(request, text, done)
  })

  // A callback hook: every request runs it, and an async one costs a promise and a microtask turn each.
  app.addHook('onRequest', (request, reply, done) => {
    reply.header('request-id', request.id)
    if (!request.url.includes('%00')) return done()
    done(new PayError({ code: 'invalid_params', message: 'NUL characters are not allowed in the URL.' }))
  })
  if (options.requestHooks !== false) {
    registerRequestMetrics(app)
    registerRequestTracing(app)
  }
  cors.register(app)
  registerErrorHandling(app)
  await registerRateLimit(app, config)
  for (const register of routeModules) await register(app)
  registerProbeRoutes(app, { metrics, probes, exposeMetrics: options.metricsRoute ?? true })
  return app
}

// Request ids only need to be unique, not unguessable: a random process prefix plus a counter costs no
// entropy per request.
const requestIdPrefix = newId('request', 10)
let requestCounter = 0
function nextRequestId(): string {
  requestCounter = (requestCounter + 1) % Number.MAX_SAFE_INTEGER
  return `${requestIdPrefix}${requestCounter.toString(36).padStart(6, '0')}`
}

function isResolved(config: BuildAppOptions['config']): config is ServerConfig {
  return (
    config !== undefined &&
    typeof (config as ServerConfig).publicBaseUrl === 'string' &&
    typeof (config as ServerConfig).idempotencyTtlSeconds === 'number' &&
    typeof (config as ServerConfig).chains === 'object' &&
    Array.isArray((config as ServerConfig).sanctioned)
  )
}
