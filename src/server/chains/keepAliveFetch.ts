import http from 'node:http'
import https from 'node:https'

/**
 * `fetch` for the JSON-RPC requests to a chain's nodes, over node:http with kept-alive connections,
 * answering a web `Response` as fetch does (viem's http transport and nodes.ts read only its status,
 * headers and body). Node's fetch builds a Request, streams the request body and runs its own connection
 * pool for every call: about 0.4 ms of CPU per request on this project's machines where this path costs
 * 0.15 ms, and a live payment makes several (docs/performance.md, "Fifth round"). A FastPath
 * (fastPath.ts): with fast paths off, the nodes are asked through fetch. What it cannot send as given (a
 * `Request` object, a streamed body) it leaves to fetch.
 */
export function keepAliveFetch(): typeof fetch {
  const agents = {
    'http:': new http.Agent({ keepAlive: true }),
    'https:': new https.Agent({ keepAlive: true }),
  }
  return (input, init = {}) => {
    const url = typeof input === 'string' ? new URL(input) : input instanceof URL ? input : undefined
    const body = init.body ?? undefined
    const protocol = url?.protocol as keyof typeof agents | undefined
    if (
      !url ||
      (protocol !== 'http:' && protocol !== 'https:') ||
      (body !== undefined && typeof body !== 'string' && !(body instanceof Uint8Array))
    )
      return fetch(input, init)
    const request = protocol === 'https:' ? https.request : http.request
    return new Promise<Response>((resolve, reject) => {
      const sent = request(
        url,
        {
          method: init.method ?? 'GET',
          headers: plainHeaders(init.headers),
          agent: agents[protocol],
          ...(init.signal ? { signal: init.signal } : {}),
        },
        (answer) => {
          const chunks: Buffer[] = []
          answer.on('data', (chunk: Buffer) => chunks.push(chunk))
          answer.on('error', reject)
          answer.on('end', () => {
            const status = answer.statusCode ?? 0
            const headers: [string, string][] = []
            for (const [name, value] of Object.entries(answer.headers)) {
              if (value !== undefined) headers.push([name, Array.isArray(value) ? value.join(', ') : value])
            }
            // A null-body status (204, 304) takes no body, not even an empty one.
            const content = status === 204 || status === 304 ? null : Buffer.concat(chunks)
            // A status Response cannot carry (below 200, past 599) from a node is its failure, never a
            // throw out of this callback, which nothing would catch.
            try {
              resolve(new Response(content, { status, statusText: answer.statusMessage ?? '', headers }))
            } catch (error) {
              reject(error)
            }
          })
        },
      )
      sent.on('error', reject)
      sent.end(body)
    })
  }
}

function plainHeaders(headers: RequestInit['headers']): Record<string, string> {
  if (headers === undefined) return {}
  if (headers instanceof Headers || Array.isArray(headers)) return Object.fromEntries(new Headers(headers))
  return headers as Record<string, string>
}
