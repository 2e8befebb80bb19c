import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance } from 'fastify'
import { PayError } from '../errors/PayError.js'
import type { ServerConfig } from './config.js'

/**
 * Per credential (API key or app id), after auth so the key is known. `burst` requests fit in a
 * window of `burst / perSecond` seconds: the long-run rate is `perSecond`, and a client may spend
 * the whole burst at once. Counters live in the process (each instance limits on its own).
 */
export async function registerRateLimit(app: FastifyInstance, config: ServerConfig): Promise<void> {
  if (config.rateLimit === false) return
  const { perSecond, burst } = config.rateLimit
  await app.register(rateLimit, {
    global: true,
    hook: 'preParsing',
    max: burst,
    timeWindow: Math.max(1, Math.round((burst / perSecond) * 1000)),
    keyGenerator: (request) => (request.auth ? `cred:${request.auth.credentialId}` : `ip:${request.ip}`),
    errorResponseBuilder: (_request, context) =>
      new PayError({
        code: 'rate_limited',
        message: `Too many requests; retry in ${context.after}.`,
        status: 429,
      }),
  })
}
