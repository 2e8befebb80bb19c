import pg from 'pg'

/** The PostgreSQL channel `enqueueJob` notifies on commit; the payload is the job kind. */
export const jobsChannel = 'caipay_jobs'

export interface JobListener {
  close(): Promise<void>
}

/**
 * LISTENs for new jobs on a dedicated connection, so a runner starts a job as soon as the transaction
 * that enqueued it commits (on any instance) instead of at its next poll. Polling stays the safety net:
 * a lost connection only costs latency; it reconnects after `retryMs`.
 */
export function listenForJobs(options: {
  connectionString: string
  onJob: (kind: string) => void
  onError?: (error: unknown) => void
  retryMs?: number
}): JobListener {
  const { onJob, ...rest } = options
  return listenOn({ ...rest, channel: jobsChannel, onMessage: onJob })
}

/**
 * LISTENs on `channel` on a dedicated connection that reconnects after `retryMs` when lost.
 * `onListening` runs on every (re)connect: messages sent while disconnected are lost, so a listener
 * that keeps state derived from them resets it there.
 */
export function listenOn(options: {
  connectionString: string
  channel: string
  onMessage: (payload: string) => void
  onListening?: () => void
  onError?: (error: unknown) => void
  retryMs?: number
}): JobListener {
  let client: pg.Client | undefined
  let closed = false
  let retry: NodeJS.Timeout | undefined

  const connect = async () => {
    // TCP keep-alive: a connection the network dropped without a word is noticed (an error, a reconnect)
    // instead of listening to nothing for good.
    const next = new pg.Client({ connectionString: options.connectionString, keepAlive: true })
    next.on('notification', (message) => options.onMessage(message.payload ?? ''))
    next.on('error', (error) => {
      options.onError?.(error)
      reconnect()
    })
    try {
      await next.connect()
      await next.query(`LISTEN ${options.channel}`)
      if (closed) await next.end()
      else {
        client = next
        options.onListening?.()
      }
    } catch (error) {
      options.onError?.(error)
      await next.end().catch(() => {})
      reconnect()
    }
  }

  const reconnect = () => {
    if (closed || retry) return
    const broken = client
    client = undefined
    void broken?.end().catch(() => {})
    retry = setTimeout(() => {
      retry = undefined
      void connect()
    }, options.retryMs ?? 1000)
    retry.unref()
  }

  void connect()
  return {
    async close() {
      closed = true
      clearTimeout(retry)
      await client?.end().catch(() => {})
    },
  }
}
