/** A minimal keep-alive JSON client on node:http (lighter than fetch, so the client costs little CPU). */
import http from 'node:http'

export interface JsonResponse<T = unknown> {
  status: number
  body: T
}

export interface JsonClient {
  request<T = unknown>(
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
    headers?: Record<string, string>,
  ): Promise<JsonResponse<T>>
  close(): void
}

/** One client = one keep-alive pool of `sockets` connections to `baseUrl`. */
export function jsonClient(baseUrl: string, defaults: Record<string, string>, sockets = 1): JsonClient {
  const target = new URL(baseUrl)
  const agent = new http.Agent({ keepAlive: true, maxSockets: sockets })
  return {
    request<T>(method: 'GET' | 'POST', path: string, body?: unknown, headers: Record<string, string> = {}) {
      const payload = body === undefined ? undefined : JSON.stringify(body)
      return new Promise<JsonResponse<T>>((resolve, reject) => {
        const req = http.request(
          {
            agent,
            host: target.hostname,
            port: target.port,
            method,
            path,
            headers: {
              ...defaults,
              ...headers,
              ...(payload !== undefined
                ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }
                : {}),
            },
          },
          (res) => {
            const chunks: Buffer[] = []
            res.on('data', (c: Buffer) => chunks.push(c))
            res.once('end', () => {
              const text = Buffer.concat(chunks).toString('utf8')
              try {
                resolve({ status: res.statusCode ?? 0, body: (text ? JSON.parse(text) : undefined) as T })
              } catch (error) {
                reject(error)
              }
            })
          },
        )
        req.once('error', reject)
        req.end(payload)
      })
    },
    close: () => agent.destroy(),
  }
}
