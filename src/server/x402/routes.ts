import type { FastifyInstance, FastifyRequest } from 'fastify'
import * as z from 'zod/mini'
import { authenticateKey, checkAsciiHeaders, header } from '../auth.js'
import type { AuthContext } from '../context.js'
import { bodyValidationError, fail } from '../errors.js'
import { evmExactScheme } from './evm.js'
import { createX402Facilitator, type X402FacilitatorOptions } from './facilitator.js'
import { solanaExactScheme } from './solana.js'
import { FacilitatorRequest } from './wire.js'

/**
 * The x402 facilitator at `/x402` (a resource server sets `facilitator: { url: "<caipay>/x402" }` and
 * sends its live key as `Authorization: Bearer <key>` through `createAuthHeaders`). Verdicts answer in
 * x402's shapes with 200; a request caipay cannot take (no key, a test key, a malformed body) answers
 * caipay's `{code, message}` with its 4xx, and nothing is verified or moved.
 */
export async function x402Routes(app: FastifyInstance): Promise<void> {
  const facilitator = createX402Facilitator({
    db: app.db,
    config: app.config,
    schemes: [
      ...app.liveChains.evm.map((chain) => evmExactScheme(chain)),
      ...app.liveChains.solana.map((chain) => solanaExactScheme(chain)),
    ],
    ...app.x402Options,
  })

  app.get('/x402/supported', async () => facilitator.supported())

  // Authenticated in onRequest, like every other mount, so the rate limit counts per key, not per address.
  const authenticated = {
    onRequest: async (request: FastifyRequest) => {
      request.auth = await liveKey(app, request)
    },
  }

  app.post('/x402/verify', authenticated, async (request) => {
    const auth = request.auth!
    return facilitator.verify(auth, facilitatorRequest(request), callContext(app, request))
  })

  app.post('/x402/settle', authenticated, async (request, reply) => {
    const auth = request.auth!
    const context = callContext(app, request)
    // A resource server that gives up waiting closes the request: stop waiting too (the job lands it).
    const aborted = new AbortController()
    // The response closing before it was written means the caller left (the request's own 'close' fires
    // as soon as its body has been read, so it says nothing about the caller).
    reply.raw.once('close', () => {
      if (!reply.raw.writableEnded) aborted.abort()
    })
    return facilitator.settle(auth, facilitatorRequest(request), { ...context, signal: aborted.signal })
  })
}

/** Only a live partner key moves money: a test key or a wallet key is 403, none or an unknown one 401. */
async function liveKey(app: FastifyInstance, request: FastifyRequest): Promise<AuthContext> {
  checkAsciiHeaders(request)
  const authorization = header(request, 'authorization')
  const match = authorization && /^Bearer\s+(\S+)\s*$/i.exec(authorization)
  if (!match) fail('missing_api_key', 'Send the live API key as Authorization: Bearer <key>.')
  const auth = await authenticateKey(app.db, match[1]!, app.fastPath.auth)
  if (auth.mode !== 'live') fail('forbidden', 'x402 settles real payments: use a live API key.')
  if (auth.role !== 'partner') fail('forbidden', 'This key cannot facilitate payments.')
  return auth
}

function facilitatorRequest(request: FastifyRequest): FacilitatorRequest {
  const parsed = z.safeParse(FacilitatorRequest, request.body)
  if (!parsed.success) throw bodyValidationError(parsed.error.issues)
  return parsed.data
}

function callContext(app: FastifyInstance, request: FastifyRequest) {
  const merchantId = header(request, 'merchant-id')
  return { now: app.now(), merchantId: merchantId && merchantId.length <= 64 ? merchantId : undefined }
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Facilitator tuning from buildApp (tests shorten the settle wait). */
    x402Options: Partial<Pick<X402FacilitatorOptions, 'settleWaitMs' | 'pollMs'>>
  }
}
