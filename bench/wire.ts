/**
 * HTTP/1.1 keep-alive on raw sockets for the load generators that pace their own requests (the paced
 * run of load.ts, the mixed workload): pre-built request heads, answers framed by Content-Length (the
 * server always sends one). node:http costs several times more CPU per request, which on a small
 * machine would take the server's share and measure the generator.
 */
import net from 'node:net'

export interface Answer {
  status: number
  body: Buffer
}

/** `name: value\r\n` lines: the fixed part of every request head on one target. */
export function headLines(url: URL, headers: Record<string, string> = {}): string {
  return Object.entries({ host: url.host, connection: 'keep-alive', ...headers })
    .map(([name, value]) => `${name}: ${value}\r\n`)
    .join('')
}

/** One request's bytes; `lines` from `headLines` plus any per-request header lines. */
export function requestBytes(method: string, path: string, lines: string, body?: Buffer): Buffer {
  const framing = body ? `content-type: application/json\r\ncontent-length: ${body.length}\r\n` : ''
  const head = Buffer.from(`${method} ${path} HTTP/1.1\r\n${lines}${framing}\r\n`)
  return body ? Buffer.concat([head, body]) : head
}

/**
 * One keep-alive socket, one request at a time. The server never closes a keep-alive socket mid-run:
 * a closed one means it failed, so the answer awaited (and every later one) rejects.
 */
export class Connection {
  readonly ready: Promise<void>
  private readonly socket: net.Socket
  private buffer: Buffer = Buffer.alloc(0)
  private waiting: { resolve: (answer: Answer) => void; reject: (error: Error) => void } | undefined
  private failure: Error | undefined
  private closing = false

  constructor(url: URL) {
    this.socket = net.connect({ host: url.hostname, port: Number(url.port), noDelay: true })
    this.ready = new Promise((resolve, reject) => {
      this.socket.once('connect', resolve)
      this.socket.once('error', reject)
    })
    this.socket.on('data', (chunk) => this.onData(chunk))
    this.socket.on('error', (error) => this.fail(`connection lost (${error.message})`))
    this.socket.on('close', () => this.fail('connection closed by the server'))
  }

  send(bytes: Buffer): Promise<Answer> {
    if (this.failure) return Promise.reject(this.failure)
    if (this.waiting) return Promise.reject(new Error('one request at a time per connection'))
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject }
      this.socket.write(bytes)
    })
  }

  close(): void {
    this.closing = true
    this.socket.destroy()
  }

  private fail(message: string): void {
    if (this.closing || this.failure) return
    this.failure = new Error(message)
    const waiting = this.waiting
    this.waiting = undefined
    waiting?.reject(this.failure)
  }

  private onData(chunk: Buffer): void {
    this.buffer = this.buffer.length ? Buffer.concat([this.buffer, chunk]) : chunk
    const headEnd = this.buffer.indexOf('\r\n\r\n')
    if (headEnd === -1) return
    const head = this.buffer.subarray(0, headEnd).toString('latin1')
    const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? Number.NaN)
    if (Number.isNaN(length)) {
      this.fail(`an answer without Content-Length: ${head}`)
      return
    }
    const end = headEnd + 4 + length
    if (this.buffer.length < end) return
    const body = this.buffer.subarray(headEnd + 4, end)
    this.buffer = this.buffer.subarray(end)
    const waiting = this.waiting
    this.waiting = undefined
    waiting?.resolve({ status: Number(head.slice(9, 12)), body })
  }
}

/** `size` connections to one target; a request waits for a free one (first come, first served). */
export class ConnectionPool {
  private readonly idle: Connection[] = []
  private readonly queue: ((connection: Connection) => void)[] = []
  private readonly all: Connection[]

  constructor(url: URL, size: number) {
    this.all = Array.from({ length: size }, () => new Connection(url))
    this.idle.push(...this.all)
  }

  async open(): Promise<void> {
    await Promise.all(this.all.map((c) => c.ready))
  }

  async send(bytes: Buffer): Promise<Answer> {
    const connection =
      this.idle.pop() ?? (await new Promise<Connection>((resolve) => this.queue.push(resolve)))
    try {
      return await connection.send(bytes)
    } finally {
      const next = this.queue.shift()
      if (next) next(connection)
      else this.idle.push(connection)
    }
  }

  close(): void {
    for (const c of this.all) c.close()
  }
}
