import { type FastifyReply, type FastifyRequest, LogController } from 'fastify'

/**
 * One line per request, written when it is answered: method, URL, status and milliseconds, with the
 * request id the request's logger carries. Fastify's default writes two lines (`incoming request`,
 * `request completed`) and serialises the request and the reply for them. The CLI writes through
 * pino's asynchronous destination.
 */
export class OneLineRequestLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
  ): void {
    if (error) {
      reply.log.error(
        { method: request.method, url: request.url, status: reply.statusCode, err: error },
        'request errored',
      )
    } else {
      const ms = Math.round(reply.elapsedTime * 100) / 100
      reply.log.info({ method: request.method, url: request.url, status: reply.statusCode, ms }, 'request')
    }
  }
}
