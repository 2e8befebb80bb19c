import { createServer, type Server } from 'node:http'
import type { Db } from '../store/db.js'
import type { ChainProbe } from './chains.js'
import { notReadyMessage } from './http.js'
import { checkReadiness } from './readiness.js'
import type { InstanceMetrics } from './scrape.js'

export interface MetricsServerOptions {
  port: number
  /** Default 127.0.0.1: a scraper on the same host or network namespace (a sidecar, a node agent). */
  host?: string
  db: Db
  metrics: InstanceMetrics
  probes: readonly ChainProbe[]
}

export interface MetricsServer {
  /** e.g. http://127.0.0.1:9464 */
  url: string
  close(): Promise<void>
}

/**
 * `/metrics`, `/healthz` and `/readyz` on a port of their own (`--metrics-port`): how a worker, which
 * serves no API, is scraped and probed, and how an API instance keeps its metrics off the public port.
 * Plain node:http: three fixed answers need no framework.
 */
export async function startMetricsServer(options: MetricsServerOptions): Promise<MetricsServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '/').split('?')[0]
    const send = (status: number, type: string, body: string) => {
      response.writeHead(status, { 'content-type': type, 'cache-control': 'no-store' })
      response.end(request.method === 'HEAD' ? undefined : body)
    }
    const json = (status: number, body: unknown) =>
      send(status, 'application/json; charset=utf-8', JSON.stringify(body))
    if (request.method !== 'GET' && request.method !== 'HEAD') {
      response.setHeader('allow', 'GET, HEAD')
      return json(405, { code: 'invalid_params', message: `${request.method} is not allowed here; use GET.` })
    }
    const answer = async () => {
      if (path === '/metrics')
        return send(200, options.metrics.contentType, await options.metrics.exposition())
      if (path === '/healthz') return json(200, { ok: true })
      if (path === '/readyz') {
        const readiness = await checkReadiness(options.db, options.probes)
        return readiness.ready
          ? json(200, readiness)
          : json(503, { code: 'internal_error', message: notReadyMessage(readiness), ...readiness })
      }
      return json(404, { code: 'invalid_params', message: `No route ${request.method} ${path}.` })
    }
    answer().catch(() => json(500, { code: 'internal_error', message: 'The metrics could not be read.' }))
  })
  const host = options.host ?? '127.0.0.1'
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error: NodeJS.ErrnoException) =>
      reject(
        error.code === 'EADDRINUSE'
          ? new Error(
              `Metrics port ${options.port} on ${host} is already in use; choose another with --metrics-port.`,
            )
          : error,
      ),
    )
    server.listen(options.port, host, () => resolve())
  })
  const address = server.address()
  const port = typeof address === 'object' && address ? address.port : options.port
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections()
        server.close(() => resolve())
      }),
  }
}
