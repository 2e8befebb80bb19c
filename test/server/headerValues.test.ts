import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { openApiDocument } from '../../src/server/openapi.js'
import { createTestServer, type TestServer } from './harness.js'

// Header values as they travel: what the published pattern admits must be what the server takes, over a
// real socket (Node's parser strips the spaces and tabs around a value and refuses control characters
// before any route runs; app.inject would skip both).

let t: TestServer
let key: string
let port: number
beforeAll(async () => {
  t = await createTestServer()
  key = (await t.createKey('test')).apiKey
  await t.app.listen({ host: '127.0.0.1', port: 0 })
  port = (t.app.server.address() as AddressInfo).port
})
afterAll(() => t.close())

/** One raw HTTP/1.1 request; the status and the parsed body. */
function send(headerLines: Buffer): Promise<{ status: number; body: { code?: string } }> {
  const body = Buffer.from('{"merchantName":"Header Shop","merchantEmail":"h@example.com"}')
  const head = Buffer.concat([
    Buffer.from(`POST /v1/merchants HTTP/1.1\r\nHost: 127.0.0.1\r\nApi-Key: ${key}\r\n`),
    headerLines,
    Buffer.from(
      `Content-Type: application/json\r\nContent-Length: ${body.length}\r\nConnection: close\r\n\r\n`,
    ),
  ])
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1')
    const chunks: Buffer[] = []
    socket.on('data', (chunk) => chunks.push(chunk))
    socket.on('error', reject)
    socket.on('close', () => {
      const text = Buffer.concat(chunks).toString('latin1')
      const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(text)?.[1])
      const payload = text.slice(text.indexOf('\r\n\r\n') + 4)
      resolve({ status, body: payload ? (JSON.parse(payload) as { code?: string }) : {} })
    })
    socket.write(Buffer.concat([head, body]))
  })
}

describe('a header value as published and as served', () => {
  const published = new RegExp(
    (openApiDocument('http://127.0.0.1').paths as Record<string, any>)['/v1/merchants'].post.parameters.find(
      (p: { name: string }) => p.name === 'Idempotency-Key',
    ).schema.pattern,
  )

  it('the Idempotency-Key pattern admits exactly the values the server takes (seeded, over a socket)', async () => {
    let seed = 33
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
      return seed % n
    }
    const alphabet = ['\t', ' ', 'a', 'Z', '~', '!', '\x7f', '\x01', '\xe9']
    const draw = () => {
      const edge = () => ['', ' ', '\t', ' \t '][next(4)]!
      const core =
        next(5) === 0
          ? 'k'.repeat(253 + next(5))
          : Array.from({ length: next(5) }, () => alphabet[next(alphabet.length)]).join('')
      return `${edge()}${core}${edge()}`
    }
    const disagreements: string[] = []
    let taken = 0
    for (let i = 0; i < 160; i++) {
      const value = `${draw()}`
      const answer = await send(Buffer.from(`Idempotency-Key: ${value}\r\n`, 'latin1'))
      const served = answer.status === 201 || answer.status === 200
      taken += Number(served)
      if (!served) expect([value, answer.status, answer.body.code]).toEqual([value, 400, expect.any(String)])
      if (served !== published.test(value)) disagreements.push(`${JSON.stringify(value)} -> ${answer.status}`)
    }
    expect(disagreements).toEqual([])
    expect(taken).toBeGreaterThan(20)
  })

  it('a request the HTTP parser refuses is answered in the contract shape', async () => {
    const answer = await send(Buffer.from('Idempotency-Key: a\x01b\r\n', 'latin1'))
    expect(answer).toEqual({ status: 400, body: { code: 'invalid_params', message: expect.any(String) } })
    // Headers past Node's 16 KiB: 431, in the same shape.
    const oversized = await send(Buffer.from(`X-Padding: ${'p'.repeat(20_000)}\r\n`, 'latin1'))
    expect(oversized).toEqual({ status: 431, body: { code: 'invalid_params', message: expect.any(String) } })
  })
})
