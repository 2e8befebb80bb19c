import type { FastifyInstance, FastifyReply } from 'fastify'
import type { ChainProbe } from './chains.js'
import { observeHttpRequest } from './counters.js'
import { checkReadiness } from './readiness.js'
import type { InstanceMetrics } from './scrape.js'

/**
 * Times every answered request into the process's histogram: one callback hook (an async hook costs a
 * promise and a microtask turn per request) and one observe on a memoised label set.
 */
export function registerRequestMetrics(app: FastifyInstance): void {
  app.addHook('onResponse', (request, reply, done) => {
    observeHttpRequest(request.routeOptions.url, request.method, reply.statusCode, reply.elapsedTime / 1000)
    done()
  })
}

export interface ProbeRoutesOptions {
  metrics: InstanceMetrics
  probes: readonly ChainProbe[]
  /** Serve `/metrics` here too (false when a separate metrics port serves it: keep it off the public port). */
  exposeMetrics: boolean
}

/**
 * `/readyz` (and `/metrics` unless it has its own port): outside the API's auth and rate limits, like
 * `/healthz`. Neither says anything about a customer: counts, ages, heads and the service's own balances.
 */
export function registerProbeRoutes(app: FastifyInstance, options: ProbeRoutesOptions): void {
  app.get('/readyz', { config: { rateLimit: false } }, async (_request, reply) =>
    answerReadiness(reply, await checkReadiness(app.db, options.probes)),
  )
  if (!options.exposeMetrics) return
  app.get('/metrics', { config: { rateLimit: false } }, async (_request, reply) =>
    reply.type(options.metrics.contentType).send(await options.metrics.exposition()),
  )
}

function answerReadiness(reply: FastifyReply, readiness: Awaited<ReturnType<typeof checkReadiness>>) {
  if (readiness.ready) return reply.send(readiness)
  return reply.code(503).send({ code: 'internal_error', message: notReadyMessage(readiness), ...readiness })
}

export function notReadyMessage(readiness: Awaited<ReturnType<typeof checkReadiness>>): string {
  const failed = readiness.checks.filter((check) => !check.ok)
  return `Not ready: ${failed.map((check) => `${check.name}: ${check.detail ?? 'failed'}`).join(' ')}`
}
