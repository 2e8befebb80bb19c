import http from 'node:http'
import net, { type AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { Connection, ConnectionPool, headLines, requestBytes } from '../../bench/wire.js'

const closers: (() => Promise<void>)[] = []
afterEach(async () => {
  for (const close of closers.splice(0)) await close()
})

async function listen(server: net.Server): Promise<URL> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  closers.push(
    () =>
      new Promise((resolve) => {
        if (server instanceof http.Server) server.closeAllConnections()
        server.close(() => resolve())
      }),
  )
  return new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`)
}

/** Echoes method, path, a header and the body as JSON, and counts the sockets it was given. */
async function echoServer() {
  const seen = { sockets: 0 }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const body = JSON.stringify({
        method: req.method,
        path: req.url,
        key: req.headers['api-key'],
        body: Buffer.concat(chunks).toString(),
      })
      res.writeHead(req.url === '/missing' ? 404 : 200, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
      })
      res.end(body)
    })
  })
  server.on('connection', () => seen.sockets++)
  return { url: await listen(server), seen }
}

describe('bench wire client', () => {
  it('sends requests one after another on one keep-alive socket and frames each answer', async () => {
    const { url, seen } = await echoServer()
    const connection = new Connection(url)
    await connection.ready
    const lines = headLines(url, { 'api-key': 'k1' })
    const first = await connection.send(requestBytes('GET', '/a', lines))
    const second = await connection.send(requestBytes('POST', '/b', lines, Buffer.from('{"x":1}')))
    const missing = await connection.send(requestBytes('GET', '/missing', lines))
    connection.close()
    expect(first.status).toBe(200)
    expect(JSON.parse(first.body.toString())).toEqual({ method: 'GET', path: '/a', key: 'k1', body: '' })
    expect(JSON.parse(second.body.toString())).toEqual({
      method: 'POST',
      path: '/b',
      key: 'k1',
      body: '{"x":1}',
    })
    expect(missing.status).toBe(404)
    expect(seen.sockets).toBe(1)
  })

  it('assembles an answer that arrives in pieces', async () => {
    const server = net.createServer((socket) => {
      socket.once('data', async () => {
        const pause = () => new Promise((resolve) => setTimeout(resolve, 20))
        socket.write('HTTP/1.1 201 Created\r\nContent-Len')
        await pause()
        socket.write('gth: 11\r\n\r\n{"ok":')
        await pause()
        socket.write('true}')
      })
    })
    const url = await listen(server)
    const connection = new Connection(url)
    await connection.ready
    const answer = await connection.send(requestBytes('GET', '/', headLines(url)))
    connection.close()
    expect(answer.status).toBe(201)
    expect(answer.body.toString()).toBe('{"ok":true}')
  })

  it('rejects the request awaited, and every later one, when the server closes the socket', async () => {
    const server = net.createServer((socket) => socket.once('data', () => socket.destroy()))
    const url = await listen(server)
    const connection = new Connection(url)
    await connection.ready
    await expect(connection.send(requestBytes('GET', '/', headLines(url)))).rejects.toThrow(/closed/)
    await expect(connection.send(requestBytes('GET', '/', headLines(url)))).rejects.toThrow(/closed/)
  })

  it('refuses an answer without Content-Length', async () => {
    const server = net.createServer((socket) =>
      socket.once('data', () => socket.write('HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n')),
    )
    const url = await listen(server)
    const connection = new Connection(url)
    await connection.ready
    await expect(connection.send(requestBytes('GET', '/', headLines(url)))).rejects.toThrow(
      /without Content-Length/,
    )
    connection.close()
  })

  it('a pool of two answers more concurrent requests than sockets, on two sockets', async () => {
    const { url, seen } = await echoServer()
    const pool = new ConnectionPool(url, 2)
    await pool.open()
    const lines = headLines(url)
    const answers = await Promise.all(
      Array.from({ length: 7 }, (_, i) => pool.send(requestBytes('GET', `/r${i}`, lines))),
    )
    pool.close()
    expect(answers.map((a) => JSON.parse(a.body.toString()).path)).toEqual(
      Array.from({ length: 7 }, (_, i) => `/r${i}`),
    )
    expect(seen.sockets).toBe(2)
  })
})
