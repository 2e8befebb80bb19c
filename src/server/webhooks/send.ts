import http from 'node:http'
import https from 'node:https'
import type { LookupFunction } from 'node:net'
import type { ResolvedAddress } from './urlPolicy.js'

/** What one attempt learned: a status code (any), or why there was none. */
export type AttemptResult = { statusCode: number; error: string | null } | { statusCode: null; error: string }

/** How much of a receiver's answer is read (for the delivery's `lastError`); the rest is dropped. */
const responseBytesKept = 512

/**
 * One POST of a signed body to `url`, connecting only to `address` (the one the URL policy checked).
 * Redirects are not followed (a 3xx is a failed attempt); the whole attempt, connection to last byte
 * read, is bounded by `timeoutMs`; at most `responseBytesKept` bytes of the answer are read.
 */
export function postWebhook(input: {
  url: URL
  address: ResolvedAddress
  headers: Record<string, string>
  body: string
  timeoutMs: number
}): Promise<AttemptResult> {
  const { url, address, body } = input
  const pinned: LookupFunction = (_host, options, callback) => {
    if (options.all)
      (callback as (e: null, a: { address: string; family: number }[]) => void)(null, [address])
    else callback(null, address.address, address.family)
  }
  const transport = url.protocol === 'https:' ? https : http
  return new Promise((resolve) => {
    let settled = false
    const finish = (result: AttemptResult) => {
      if (settled) return
      settled = true
      clearTimeout(timer)
      request.destroy()
      resolve(result)
    }
    const request = transport.request(url, {
      method: 'POST',
      lookup: pinned,
      agent: false,
      headers: {
        ...input.headers,
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'user-agent': 'caipay-webhooks/1',
      },
    })
    const timer = setTimeout(
      () => finish({ statusCode: null, error: `No answer within ${input.timeoutMs} ms.` }),
      input.timeoutMs,
    )
    request.on('error', (error: NodeJS.ErrnoException) =>
      finish({ statusCode: null, error: `${error.code ?? 'error'}: ${error.message}` }),
    )
    request.on('response', (response) => {
      const statusCode = response.statusCode ?? 0
      const ok = statusCode >= 200 && statusCode < 300
      let kept = ''
      response.setEncoding('utf8')
      response.on('data', (chunk: string) => {
        kept += chunk
        if (kept.length >= responseBytesKept) done()
      })
      response.on('end', () => done())
      response.on('error', () => done())
      function done() {
        const error = ok ? null : `HTTP ${statusCode}${kept ? `: ${kept.slice(0, responseBytesKept)}` : ''}`
        finish({ statusCode, error })
      }
    })
    request.end(body)
  })
}
