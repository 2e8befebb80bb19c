import rateLimit from '@fastify/rate-limit'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { PayError } from '../errors/PayError.js'
import { header } from './auth.js'
import type { AuthCache } from './authCache.js'
import type { ServerConfig } from './config.js'
import { sha256Hex } from './ids.js'

/**
 * Two limits, both counted in the process (each instance limits on its own):
 *
 * - Per credential, after authentication so the credential is known (every mount authenticates in
 *   `onRequest`, this counts in `preParsing`): one key's flood never throttles another key, whatever
 *   address they share. An App-Id is public (it ships in wallets), so its quota is counted per App-Id and
 *   client address: whoever copies it spends only their own address's share. `burst` requests fit in a
 *   window of `burst / perSecond` seconds.
 * - Failed authentication, per client address: past `failedAuthPerMinute` 401s in a minute, the
 *   address's requests are answered `429` with `Retry-After` before any lookup, except those carrying a
 *   credential this process has just seen valid (an honest caller behind the same address keeps going).
 *
 * The client address is the socket's peer unless `trustProxy` names the proxies whose
 * `X-Forwarded-For` to believe (docs/security-model.md).
 */
export async function registerRateLimit(app: FastifyInstance, config: ServerConfig): Promise<void> {
  if (config.rateLimit === false) return
  const { perSecond, burst, failedAuthPerMinute } = config.rateLimit
  const failures = new FailureCounter(failedAuthPerMinute, 60_000)
  const cache = app.fastPath.auth

  app.addHook('onRequest', (request, reply, done) => {
    if (request.routeOptions.config?.rateLimit === false) return done()
    const waitSeconds = failures.blockedFor(request.ip, Date.now())
    if (waitSeconds === 0 || carriesKnownCredential(request, cache)) return done()
    reply.header('retry-after', String(waitSeconds))
    done(
      new PayError({
        code: 'rate_limited',
        message: `Too many failed authentications from this address; retry in ${waitSeconds} seconds.`,
        status: 429,
      }),
    )
  })
  app.addHook('onResponse', (request, reply, done) => {
    if (reply.statusCode === 401) failures.count(request.ip, Date.now())
    done()
  })

  await app.register(rateLimit, {
    global: true,
    hook: 'preParsing',
    max: burst,
    timeWindow: Math.max(1, Math.round((burst / perSecond) * 1000)),
    keyGenerator: (request) => {
      const auth = request.auth
      if (!auth) return `ip:${request.ip}`
      return auth.role === 'app' ? `app:${auth.credentialId}:${request.ip}` : `cred:${auth.credentialId}`
    },
    errorResponseBuilder: (_request, context) =>
      new PayError({
        code: 'rate_limited',
        message: `Too many requests; retry in ${context.after}.`,
        status: 429,
      }),
  })
}

/** Whether the request's Api-Key, Bearer key or App-Id is one the auth cache holds as valid right now. */
function carriesKnownCredential(request: FastifyRequest, cache: AuthCache): boolean {
  const bearer = /^Bearer\s+(\S+)\s*$/i.exec(header(request, 'authorization') ?? '')?.[1]
  const apiKey = header(request, 'api-key') || bearer
  if (apiKey) return cache.knows({ keyHash: sha256Hex(apiKey) })
  const appId = header(request, 'app-id')
  return appId ? cache.knows({ appId }) : false
}

/** Fixed one-window counters per client address, bounded in size (the oldest address goes first). */
class FailureCounter {
  readonly #windows = new Map<string, { count: number; resetAt: number }>()
  constructor(
    private readonly limit: number,
    private readonly windowMs: number,
    private readonly maxAddresses = 100_000,
  ) {}

  count(address: string, now: number): void {
    const window = this.#windows.get(address)
    if (window && window.resetAt > now) {
      window.count++
      return
    }
    this.#windows.delete(address)
    if (this.#windows.size >= this.maxAddresses) {
      const oldest = this.#windows.keys().next()
      if (!oldest.done) this.#windows.delete(oldest.value)
    }
    this.#windows.set(address, { count: 1, resetAt: now + this.windowMs })
  }

  /** Seconds until the address may try again; 0 when it may now. */
  blockedFor(address: string, now: number): number {
    const window = this.#windows.get(address)
    if (!window) return 0
    if (window.resetAt <= now) {
      this.#windows.delete(address)
      return 0
    }
    return window.count >= this.limit ? Math.ceil((window.resetAt - now) / 1000) : 0
  }
}
