/**
 * A hostile wallet gateway served over real HTTP on 127.0.0.1: every answer (options, fetch, confirm,
 * status) is what the test scripts, byte for byte. The wallet library talks to it through its own
 * HTTP client, as it would to a compromised service.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createGatewayClient } from '../../src/client/gateway.js'
import type { GatewayApi } from '../../src/client/gatewayApi.js'
import type { RetryPolicy } from '../../src/client/retry.js'

export interface Scripted {
  status?: number
  body: unknown
}

/** An answer may be awaited: a gateway that acts on chain (relays what it was given) before it answers. */
export type Script = Partial<
  Record<
    'options' | 'fetch' | 'confirm' | 'status' | 'cancel',
    (body: unknown, n: number) => Scripted | Promise<Scripted>
  >
>

export interface HostileGateway {
  api: GatewayApi
  /** Requests received, by route. */
  calls: Record<string, unknown[]>
  close(): Promise<void>
}

const routes = /^\/v1\/gateway\/payment\/([^/]+)(?:\/(options|fetch|confirm|status|cancel))?$/

export async function startHostileGateway(
  script: Script,
  retry: Partial<RetryPolicy> = { attempts: 1 },
): Promise<HostileGateway> {
  const calls: Record<string, unknown[]> = {}
  const server: Server = createServer(async (req, res) => {
    const match = routes.exec(new URL(req.url ?? '/', 'http://127.0.0.1').pathname)
    const route = (match?.[2] ?? 'payment') as keyof Script
    const body = await readJson(req)
    const seen = calls[route] ?? []
    calls[route] = seen
    seen.push(body)
    const answer = (await script[route]?.(body, seen.length)) ?? {
      status: 404,
      body: { code: 'not_found', message: 'No such route.' },
    }
    res.writeHead(answer.status ?? 200, { 'content-type': 'application/json' })
    res.end(JSON.stringify(answer.body))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    api: createGatewayClient({
      baseUrl: `http://127.0.0.1:${port}`,
      auth: { apiKey: 'wallet-key' },
      retry,
    }),
    calls,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  const text = Buffer.concat(chunks).toString()
  return text ? JSON.parse(text) : undefined
}

/** A gateway error answer in the service's wire shape. */
export function gatewayError(status: number, code: string, message = code): Scripted {
  return { status, body: { code, message } }
}
