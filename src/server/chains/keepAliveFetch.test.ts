import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { keepAliveFetch } from './keepAliveFetch.js'

/** A JSON-RPC-shaped server on loopback: echoes the request, or answers `/slow` after a second, `/error` 500. */
let server: http.Server
let url: string
let connections = 0
beforeAll(async () => {
  server = http.createServer((request, response) => {
    let body = ''
    request.on('data', (chunk) => {
      body += chunk
    })
    request.on('end', () => {
      if (request.url === '/slow') {
        setTimeout(() => response.end('late'), 1_000)
        return
      }
      if (request.url === '/odd') {
        // A status outside what a Response can carry (200-599), as a misbehaving node could send.
        response.writeHead(600)
        response.end('{}')
        return
      }
      const status = request.url === '/error' ? 500 : 200
      response.writeHead(status, { 'content-type': 'application/json', 'x-seen': 'a' })
      response.end(
        JSON.stringify({
          method: request.method,
          contentType: request.headers['content-type'],
          body: JSON.parse(body || 'null'),
        }),
      )
    })
  })
  server.on('connection', () => connections++)
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise((resolve) => server.close(resolve)))

const rpc = { jsonrpc: '2.0', id: 0, method: 'eth_blockNumber', params: [] }
const init = (extra: RequestInit = {}): RequestInit => ({
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify(rpc),
  ...extra,
})

/** What a reader of a Response sees of it. */
async function seen(response: Response) {
  return {
    ok: response.ok,
    status: response.status,
    contentType: response.headers.get('content-type'),
    custom: response.headers.get('x-seen'),
    body: await response.json(),
  }
}

describe('keepAliveFetch (the nodes asked over kept-alive connections)', () => {
  it('answers what fetch answers: status, headers, body; a 500 too', async () => {
    const ours = keepAliveFetch()
    for (const path of ['/', '/error']) {
      expect(await seen(await ours(`${url}${path}`, init()))).toEqual(
        await seen(await fetch(`${url}${path}`, init())),
      )
    }
    const answer = await seen(
      await ours(new URL(url), init({ headers: new Headers({ 'content-type': 'text/plain' }) })),
    )
    expect(answer.body).toEqual({ method: 'POST', contentType: 'text/plain', body: rpc })
  })

  it('keeps one connection for requests one after another', async () => {
    const ours = keepAliveFetch()
    const before = connections
    for (let i = 0; i < 5; i++) expect((await ours(url, init())).status).toBe(200)
    expect(connections - before).toBe(1)
  })

  it('gives up when its signal aborts, and rejects when nobody listens', async () => {
    const ours = keepAliveFetch()
    await expect(ours(`${url}/slow`, init({ signal: AbortSignal.timeout(50) }))).rejects.toMatchObject({
      name: 'AbortError',
    })
    const closed = http.createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    await expect(ours(`http://127.0.0.1:${port}`, init())).rejects.toMatchObject({ code: 'ECONNREFUSED' })
  })

  it('rejects a status a Response cannot carry, never throwing out of its callback', async () => {
    await expect(keepAliveFetch()(`${url}/odd`, init())).rejects.toBeInstanceOf(RangeError)
  })
})
