import { networkInterfaces } from 'node:os'
import type { FastifyBaseLogger, FastifyInstance } from 'fastify'
import { sql } from 'kysely'
import { createApiKey, createPartner } from './accounts/accounts.js'
import { buildApp } from './app.js'
import { listenForCredentialChanges } from './authCache.js'
import { reconcileEvmChain } from './chains/evm/ledger.js'
import { scanEvmPushPayments } from './chains/evm/push.js'
import { reconcileSolanaChain } from './chains/solana/ledger.js'
import { scanPushPayments } from './chains/solana/push.js'
import { resolveConfig, type ServerConfig } from './config.js'
import { tokenAmountFor } from './gateway/quote.js'
import { sweepIdempotencyKeys } from './idempotency.js'
import type { JobListener } from './jobs/notify.js'
import { type JobRunner, startJobRunner } from './jobs/runner.js'
import { startSweep } from './jobs/sweep.js'
import { startReconciliation } from './ledger/reconcile.js'
import { type MetricsServer, startMetricsServer } from './metrics/server.js'
import { flushTracing, startTracing } from './metrics/tracing.js'
import { listenForStatusChanges } from './payments/statusChanges.js'
import { type Db, newTransaction, openDatabase } from './store/db.js'
import { startWebhookDispatcher, type WebhookDispatcher } from './webhooks/dispatch.js'

export interface StartServerOptions {
  /** Default 8787; 0 picks a free port. */
  port?: number
  /** Default 127.0.0.1. */
  host?: string
  /** External PostgreSQL; without it an embedded one runs in `dataDir`. */
  databaseUrl?: string | undefined
  /** Default `.caipay`. */
  dataDir?: string | undefined
  config?: ServerConfig
  /** Set `config.publicBaseUrl` from the address actually listened on (no publicBaseUrl configured). */
  publicBaseUrlFromListen?: boolean
  /** On a database with no partner, create one and a test key (returned once as `bootstrap`). */
  bootstrapPartner?: boolean
  logger?: FastifyBaseLogger | false
  now?: () => Date
  /** The process handles signals (the CLI): embedded PostgreSQL leaves SIGINT/SIGTERM to us. */
  handleSignals?: boolean
  /** How often the job runner (live payments: broadcast, relay, settlement) polls when idle; default 500 ms. */
  jobIntervalMs?: number
  /** A job claim's lease, renewed while it runs; a dead instance's jobs resume after it (default 10 s). */
  jobLeaseMs?: number
  /**
   * What this process does: `all` (default) serves the API and runs jobs; `api` serves only (no job
   * runner); `worker` runs only jobs and listens on no port. Any number of each share one database.
   */
  role?: ServerRole
  /** How often the webhook dispatcher looks for events other instances created; default 250 ms. */
  webhookDispatchIntervalMs?: number
  /**
   * Serve `/metrics`, `/healthz` and `/readyz` on this port of their own (0 picks a free one): how a worker
   * is scraped, and how an API instance keeps `/metrics` off its public port (it then serves only the probes).
   */
  metricsPort?: number | undefined
  /** Default 127.0.0.1. */
  metricsHost?: string | undefined
}

export type ServerRole = 'all' | 'api' | 'worker'

/** How long a stop waits for in-flight requests before closing their connections. */
const shutdownGraceMs = 10_000

export interface RunningServer {
  app: FastifyInstance
  db: Db
  config: ServerConfig
  /** Where it listens, e.g. http://127.0.0.1:8787; empty for a worker (it listens nowhere). */
  url: string
  /** Where `/metrics` is served on a port of its own (`metricsPort`), else undefined. */
  metricsUrl: string | undefined
  embeddedDatabase: boolean
  /** Present when this start created the first partner: the only time its key is shown. */
  bootstrap: { partnerId: string; apiKey: string } | undefined
  /** Stops accepting, drains in-flight requests, closes the pool, stops embedded PostgreSQL. */
  stop(): Promise<void>
}

export async function startServer(options: StartServerOptions = {}): Promise<RunningServer> {
  const config: ServerConfig = { ...(options.config ?? resolveConfig({})) }
  const log = options.logger || undefined
  const role = options.role ?? 'all'
  // Before the app is built: its request hooks exist only when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT).
  await startTracing()
  const database = await openDatabase({
    databaseUrl: options.databaseUrl,
    poolSize: poolSizeFor(role, config.jobSlots),
    dataDir: options.dataDir,
    ...(options.handleSignals ? { handleSignals: true } : {}),
    ...(log ? { log: (message: string) => log.debug({ postgres: message }) } : {}),
  })
  let app: FastifyInstance | undefined
  let sweeper: NodeJS.Timeout | undefined
  let jobs: JobRunner | undefined
  let credentials: JobListener | undefined
  let statusChanges: JobListener | undefined
  let webhooks: WebhookDispatcher | undefined
  let reconciliation: { stop(): Promise<void> } | undefined
  let pushScans: { stop(): Promise<void> } | undefined
  let metricsServer: MetricsServer | undefined
  try {
    const bootstrap = options.bootstrapPartner ? await bootstrapPartner(database.db) : undefined
    app = await buildApp({
      db: database.db,
      config,
      ...(options.now ? { now: options.now } : {}),
      logger: options.logger ?? false,
      metricsRoute: options.metricsPort === undefined,
    })
    if (options.metricsPort !== undefined)
      metricsServer = await startMetricsServer({
        port: options.metricsPort,
        ...(options.metricsHost !== undefined ? { host: options.metricsHost } : {}),
        db: database.db,
        ...app.operations,
      })
    if (config.secretsKey === null)
      log?.warn(
        'No secretsKey configured: webhook signing secrets are stored in plain text (docs/security-model.md)',
      )
    let url = ''
    if (role !== 'worker') {
      credentials = listenForCredentialChanges({
        connectionString: database.url,
        cache: app.fastPath.auth,
        ...(log
          ? { onError: (error) => log.warn({ error: String(error) }, 'Credential notifications interrupted') }
          : {}),
      })
      statusChanges = listenForStatusChanges({
        connectionString: database.url,
        changes: app.statusChanges,
        ...(log
          ? {
              onError: (error) =>
                log.warn({ error: String(error) }, 'Payment status notifications interrupted'),
            }
          : {}),
      })
      const host = options.host ?? '127.0.0.1'
      const port = options.port ?? 8787
      const address = await app.listen({ port, host }).catch((error: NodeJS.ErrnoException) => {
        if (error.code === 'EADDRINUSE')
          throw new Error(
            `Port ${port} on ${host} is already in use; choose another with --port (0 picks a free one).`,
          )
        if (error.code === 'EADDRNOTAVAIL' || error.code === 'ENOTFOUND')
          throw new Error(`Cannot listen on ${host}: no such address on this machine.`)
        if (error.code === 'EACCES')
          throw new Error(`Not allowed to listen on port ${port} (ports below 1024 need privileges).`)
        throw error
      })
      url = address.replace('://[::1]', '://localhost')
      if (options.publicBaseUrlFromListen) config.publicBaseUrl = linkBase(host, url)
    }
    if (role !== 'api') {
      jobs = startJobRunner({
        db: database.db,
        handlers: app.jobHandlers,
        listenUrl: database.url,
        concurrency: config.jobSlots,
        ...(options.jobIntervalMs !== undefined ? { intervalMs: options.jobIntervalMs } : {}),
        ...((options.jobLeaseMs ?? config.jobLeaseMs) !== undefined
          ? { leaseMs: options.jobLeaseMs ?? config.jobLeaseMs }
          : {}),
        ...(options.now ? { now: options.now } : {}),
        ...(log ? { log } : {}),
      })
      webhooks = startWebhookDispatcher({
        db: database.db,
        listenUrl: database.url,
        ...(options.webhookDispatchIntervalMs !== undefined
          ? { intervalMs: options.webhookDispatchIntervalMs }
          : {}),
        ...(options.now ? { now: options.now } : {}),
        ...(log ? { log } : {}),
      })
      const db = database.db
      reconciliation = startReconciliation({
        chains: [
          ...app.liveChains.evm.map((chain) => ({
            id: chain.caip2,
            reconcile: () => reconcileEvmChain(db, chain, log),
          })),
          ...app.liveChains.solana.map((chain) => ({
            id: chain.caip2,
            reconcile: () =>
              reconcileSolanaChain(db, chain, log, {
                beforeRead: () => scanPushPayments(db, chain, config, tokenAmountFor),
              }),
          })),
        ],
        ...(config.reconcileIntervalMs !== undefined ? { intervalMs: config.reconcileIntervalMs } : {}),
        ...(log ? { log } : {}),
      })
      // Push payments: each chain's open references are read every `push.pollMs` (docs/push-payments.md).
      const solanaPush = app.liveChains.solana
      const evmPush = app.liveChains.evm
      if (solanaPush.length + evmPush.length > 0)
        pushScans = startSweep({
          async run() {
            const scans = [
              ...solanaPush.map((chain) => ({
                chain,
                scan: () => scanPushPayments(db, chain, config, tokenAmountFor),
              })),
              ...evmPush.map((chain) => ({ chain, scan: () => scanEvmPushPayments(db, chain, config) })),
            ]
            for (const { chain, scan } of scans)
              await scan().catch((error: unknown) =>
                log?.warn({ chain: chain.caip2, error: String(error) }, 'Push payment scan could not read'),
              )
          },
          intervalMs: config.push.pollMs,
        })
    }
    sweeper = setInterval(
      () => void sweepIdempotencyKeys(database.db, new Date()).catch(() => {}),
      10 * 60 * 1000,
    ).unref()
    const running = app
    let stopping: Promise<void> | undefined
    return {
      app: running,
      db: database.db,
      config,
      url,
      metricsUrl: metricsServer?.url,
      embeddedDatabase: database.embedded,
      bootstrap,
      stop() {
        stopping ??= (async () => {
          clearInterval(sweeper)
          await webhooks?.stop()
          await reconciliation?.stop()
          await pushScans?.stop()
          await jobs?.stop()
          await credentials?.close()
          // In-flight requests drain, and each connection goes as soon as its answer is out (Fastify keeps an
          // idle keep-alive connection 72 s, and the close waits for it); one still busy after the grace (a
          // peer gone without closing it, e.g. a phone off the network mid-read) is cut.
          const idle = setInterval(() => running.server.closeIdleConnections(), 100).unref()
          const cut = setTimeout(() => running.server.closeAllConnections(), shutdownGraceMs).unref()
          await running.close()
          clearInterval(idle)
          clearTimeout(cut)
          await statusChanges?.close()
          await metricsServer?.close()
          await database.close()
          await flushTracing().catch(() => {})
        })()
        return stopping
      },
    }
  } catch (error) {
    clearInterval(sweeper)
    await webhooks?.stop().catch(() => {})
    await jobs?.stop().catch(() => {})
    await credentials?.close().catch(() => {})
    await statusChanges?.close().catch(() => {})
    await metricsServer?.close().catch(() => {})
    await app?.close().catch(() => {})
    await database.close().catch(() => {})
    throw error
  }
}

/**
 * Connections for the API and for `jobSlots` jobs. A job holds a connection only for one statement or
 * one short transaction, never while it waits on the chain or on another connection, so any size makes
 * progress; this one keeps a busy runner from queueing the API's reads behind its own.
 */
export function poolSizeFor(role: ServerRole, jobSlots: number): number {
  return role === 'api' ? 10 : 10 + Math.ceil(jobSlots / 4)
}

export const wildcardHosts = new Set(['0.0.0.0', '::', '[::]'])

/**
 * The base of payment links when no publicBaseUrl is configured: the address listened on, or, bound
 * to every interface, this machine's first network address (never 0.0.0.0, which no browser reaches).
 */
export function linkBase(host: string, listenedUrl: string, interfaces = networkInterfaces()): string {
  if (!wildcardHosts.has(host)) return listenedUrl
  return `http://${reachableAddress(interfaces) ?? '127.0.0.1'}:${new URL(listenedUrl).port}`
}

function reachableAddress(interfaces: ReturnType<typeof networkInterfaces>): string | undefined {
  for (const addresses of Object.values(interfaces)) {
    for (const address of addresses ?? []) {
      if (address.family === 'IPv4' && !address.internal) return address.address
    }
  }
  return undefined
}

/** First start on an empty database: one partner and a test key. Serialised across instances. */
async function bootstrapPartner(db: Db): Promise<{ partnerId: string; apiKey: string } | undefined> {
  return newTransaction(db, async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('caipay.bootstrap'))`.execute(trx)
    const existing = await trx.selectFrom('partners').select('id').limit(1).executeTakeFirst()
    if (existing) return undefined
    const partnerId = await createPartner(trx)
    const { apiKey } = await createApiKey(trx, { partnerId, mode: 'test', role: 'partner' })
    return { partnerId, apiKey }
  })
}
