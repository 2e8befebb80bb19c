import { sql } from 'kysely'
import { Gauge, Registry } from 'prom-client'
import type { Db } from '../store/db.js'
import { poolUsage } from '../store/db.js'
import { webhookJobKind } from '../webhooks/deliver.js'
import { type ChainProbe, sharedWhileRunning } from './chains.js'
import { processRegistry } from './counters.js'
import { type LedgerReadings, readLedger } from './ledger.js'

/**
 * What an instance reads when it is scraped: the jobs table, the webhook outbox, the transactions in
 * flight, the chains' nodes and the executors' balances, and its own connection pool. Nothing here runs
 * per request. The database reads use the partial indexes the job runner and the dispatcher use
 * (jobs_ready, payment_events_pending, evm_transactions_sender_nonce); chain reads are cached
 * (chains.ts) so a scrape every few seconds asks each node once.
 */
export interface InstanceMetrics {
  /** The whole exposition (this process's counters and this instance's readings), Prometheus text format. */
  exposition(): Promise<string>
  readonly contentType: string
  /** The readings alone, as the CLI's status shows them (same queries as a scrape). */
  read(): Promise<Readings>
}

export interface Readings {
  jobs: { kind: string; queued: number; running: number; oldestDueSeconds: number }[]
  transactionsInFlight: { chain: string; executor: string; count: number }[]
  webhooks: {
    oldestUndispatchedEventSeconds: number
    oldestPendingDeliverySeconds: number
    /** Endpoints whose deliveries are being retried after a failed attempt, longest failing first. */
    failingEndpoints: { endpointId: string; failingSeconds: number; pendingDeliveries: number }[]
  }
  /** Live mode's ledger: pending refunds, float, unallocated top-ups, open differences (ledger.ts). */
  ledger: LedgerReadings
  chains: {
    chain: string
    unit: 'block' | 'slot'
    highestSeen: number
    nodes: { node: string; head: number | undefined; error?: string }[]
    balances:
      | { address: string; native: number; collection: { asset: string; symbol: string; value: number }[] }
      | { error: string }
  }[]
}

export interface InstanceMetricsOptions {
  db: Db
  probes: readonly ChainProbe[]
  /** Job kinds this deployment runs: reported as 0 when none is queued, so an alert resolves. */
  jobKinds: readonly string[]
  now?: () => Date
}

export function createInstanceMetrics(options: InstanceMetricsOptions): InstanceMetrics {
  const { db, probes } = options
  const now = options.now ?? (() => new Date())
  const registry = new Registry()
  const gauges: Gauge[] = []
  const gauge = <L extends string>(name: string, help: string, labelNames: readonly L[] = []) => {
    const made = new Gauge<L>({ name, help, labelNames, registers: [registry] })
    gauges.push(made as unknown as Gauge)
    return made
  }

  const jobsQueued = gauge('caipay_jobs_queued', 'Jobs waiting to run (due now or later), by kind.', ['kind'])
  const jobsRunning = gauge(
    'caipay_jobs_running',
    'Jobs claimed by a worker whose lease is current, by kind.',
    ['kind'],
  )
  const jobsOldest = gauge(
    'caipay_jobs_oldest_due_seconds',
    'How long the oldest job that is due (and not running under a live lease) has waited, by kind; 0 when none.',
    ['kind'],
  )
  const inFlight = gauge(
    'caipay_transactions_in_flight',
    'Transactions the executor key signed and sent that are not final yet, by chain and executor address.',
    ['chain', 'executor'],
  )
  const undispatched = gauge(
    'caipay_webhook_oldest_undispatched_event_seconds',
    'Age of the oldest payment event not yet turned into webhook deliveries; 0 when none.',
  )
  const pendingDelivery = gauge(
    'caipay_webhook_oldest_pending_delivery_seconds',
    'Age of the oldest webhook delivery not yet delivered (first attempt or retries); 0 when none.',
  )
  const failingEndpoints = gauge(
    'caipay_webhook_failing_endpoints',
    'Webhook endpoints with a delivery being retried after a failed attempt.',
  )
  const failingLongest = gauge(
    'caipay_webhook_failing_endpoint_longest_seconds',
    'How long the longest-failing endpoint has had a failed delivery waiting (age of that delivery); 0 when none.',
  )
  const nodeUp = gauge('caipay_chain_node_up', '1 when the chain node answered its head read, else 0.', [
    'chain',
    'node',
  ])
  const nodeHead = gauge('caipay_chain_node_head', "A node's newest block (EVM) or slot (Solana).", [
    'chain',
    'node',
  ])
  const nodeLag = gauge(
    'caipay_chain_node_lag',
    "Blocks or slots a node is behind the newest head any of the chain's nodes (or this process) has seen.",
    ['chain', 'node'],
  )
  const highestSeen = gauge(
    'caipay_chain_highest_seen',
    "The newest block or slot this process's chain reads have seen (what money decisions are pinned at).",
    ['chain'],
  )
  const nativeBalance = gauge(
    'caipay_executor_native_balance',
    "The executor's native balance in whole coins (ETH, SOL): what pays gas and fees.",
    ['chain', 'executor'],
  )
  const collectionBalance = gauge(
    'caipay_collection_balance',
    'Tokens held at the collection address in whole tokens, by chain and CAIP-19 asset.',
    ['chain', 'asset', 'symbol', 'executor'],
  )
  const balanceUp = gauge(
    'caipay_executor_balance_read_up',
    '1 when the last balance read of the chain answered.',
    ['chain'],
  )
  const poolConnections = gauge(
    'caipay_db_pool_connections',
    'PostgreSQL pool connections, by state (in_use, idle).',
    ['state'],
  )
  const poolWaiting = gauge(
    'caipay_db_pool_waiting',
    'Queries waiting for a free PostgreSQL pool connection.',
  )
  const poolMax = gauge('caipay_db_pool_max', 'The PostgreSQL pool size.')
  const refundsPending = gauge(
    'caipay_refunds_pending_amount',
    'Live refunds waiting to be sent (asked, not yet mined), whole tokens, by chain and asset.',
    ['chain', 'asset', 'symbol'],
  )
  const floatAmount = gauge(
    'caipay_ledger_float_amount',
    "Partners' float for refunds after settlement (summed over partners), whole tokens, by chain and asset.",
    ['chain', 'asset', 'symbol'],
  )
  const floatPartners = gauge(
    'caipay_ledger_float_partners',
    'Partners holding any float, by chain and asset.',
    ['chain', 'asset', 'symbol'],
  )
  const unallocated = gauge(
    'caipay_ledger_unallocated_amount',
    "The operator's top-ups not given to any partner (they cover refunds a float cannot), whole tokens.",
    ['chain', 'asset', 'symbol'],
  )
  const reconciliation = gauge(
    'caipay_ledger_reconciliation_difference',
    'An open (unacknowledged) reconciliation difference at a holding address: chain minus ledger, whole ' +
      'tokens (negative: the chain holds less); sends from the address are stopped until acknowledged.',
    ['chain', 'asset', 'symbol', 'address'],
  )
  const collectorUp = gauge(
    'caipay_scrape_collector_up',
    '1 when the collector (database, chains) answered during this scrape, else 0 (its gauges are then absent).',
    ['collector'],
  )

  async function readDatabase(
    at: Date,
  ): Promise<Pick<Readings, 'jobs' | 'transactionsInFlight' | 'webhooks' | 'ledger'>> {
    const [ledger, jobs, evm, solana, events, deliveries] = await Promise.all([
      readLedger(db, probes),
      sql<{ kind: string; queued: string; running: string; oldest_due: Date | null }>`
        SELECT kind,
          count(*) FILTER (WHERE state = 'pending') AS queued,
          count(*) FILTER (WHERE state = 'running' AND locked_until >= ${at}) AS running,
          min(run_at) FILTER (WHERE run_at <= ${at} AND (state = 'pending' OR locked_until < ${at})) AS oldest_due
        FROM jobs WHERE state IN ('pending', 'running') GROUP BY kind`.execute(db),
      Promise.all(
        probes
          .filter((p) => p.unit === 'block')
          .map(async (p) => {
            const row = await sql<{ count: string }>`SELECT count(*) AS count FROM evm_transactions
              WHERE chain_id = ${p.caip2} AND sender = ${p.executor.toLowerCase()} AND status = 'sent'`.execute(
              db,
            )
            return { chain: p.caip2, executor: p.executor, count: Number(row.rows[0]?.count ?? 0) }
          }),
      ),
      Promise.all(
        probes
          .filter((p) => p.unit === 'slot')
          .map(async (p) => {
            const row = await sql<{ count: string }>`SELECT count(*) AS count FROM solana_transactions
              WHERE chain_id = ${p.caip2} AND state = 'pending'`.execute(db)
            return { chain: p.caip2, executor: p.executor, count: Number(row.rows[0]?.count ?? 0) }
          }),
      ),
      sql<{
        oldest: Date | null
      }>`SELECT min(created_at) AS oldest FROM payment_events WHERE dispatched_at IS NULL`.execute(db),
      // Deliveries through their jobs (jobs_ready covers pending ones): one per delivery, attempts so far.
      sql<{ endpoint_id: string; oldest: Date; failing_since: Date | null; pending: string }>`
        SELECT d.endpoint_id, min(d.created_at) AS oldest,
          min(d.created_at) FILTER (WHERE d.attempts > 0) AS failing_since, count(*) AS pending
        FROM jobs j JOIN webhook_deliveries d ON d.id = j.delivery_id
        WHERE j.state IN ('pending', 'running') AND j.kind = ${webhookJobKind} AND d.state = 'pending'
        GROUP BY d.endpoint_id`.execute(db),
    ])
    const age = (since: Date | null | undefined) =>
      since ? Math.max(0, (at.getTime() - since.getTime()) / 1000) : 0
    const byKind = new Map(
      options.jobKinds.map((kind) => [kind, { kind, queued: 0, running: 0, oldestDueSeconds: 0 }]),
    )
    for (const row of jobs.rows)
      byKind.set(row.kind, {
        kind: row.kind,
        queued: Number(row.queued),
        running: Number(row.running),
        oldestDueSeconds: age(row.oldest_due),
      })
    const failing = deliveries.rows
      .filter((row) => row.failing_since !== null)
      .map((row) => ({
        endpointId: row.endpoint_id,
        failingSeconds: age(row.failing_since),
        pendingDeliveries: Number(row.pending),
      }))
      .sort((a, b) => b.failingSeconds - a.failingSeconds)
    return {
      ledger,
      jobs: [...byKind.values()].sort((a, b) => a.kind.localeCompare(b.kind)),
      transactionsInFlight: [...evm, ...solana],
      webhooks: {
        oldestUndispatchedEventSeconds: age(events.rows[0]?.oldest),
        oldestPendingDeliverySeconds: Math.max(0, ...deliveries.rows.map((row) => age(row.oldest))),
        failingEndpoints: failing,
      },
    }
  }

  async function readChains(): Promise<Readings['chains']> {
    return Promise.all(
      probes.map(async (probe) => {
        const [nodes, balances] = await Promise.all([
          probe.heads(),
          probe.balances().catch(() => ({ error: 'no node answered the balance reads' })),
        ])
        return { chain: probe.caip2, unit: probe.unit, highestSeen: probe.highestSeen(), nodes, balances }
      }),
    )
  }

  async function read(): Promise<Readings> {
    const at = now()
    const [database, chains] = await Promise.all([readDatabase(at), readChains()])
    return { ...database, chains }
  }

  async function refresh(): Promise<void> {
    const at = now()
    const [database, chains] = await Promise.allSettled([readDatabase(at), readChains()])
    for (const g of gauges) g.reset()
    collectorUp.set({ collector: 'database' }, database.status === 'fulfilled' ? 1 : 0)
    collectorUp.set({ collector: 'chains' }, chains.status === 'fulfilled' ? 1 : 0)
    const pool = poolUsage(db)
    if (pool) {
      poolConnections.set({ state: 'in_use' }, pool.total - pool.idle)
      poolConnections.set({ state: 'idle' }, pool.idle)
      poolWaiting.set(pool.waiting)
      poolMax.set(pool.max)
    }
    if (database.status === 'fulfilled') {
      const { jobs, transactionsInFlight, webhooks, ledger } = database.value
      const byAsset = ({ chain, asset, symbol }: { chain: string; asset: string; symbol: string }) => ({
        chain,
        asset,
        symbol,
      })
      for (const row of ledger.refundsPending) refundsPending.set(byAsset(row), row.amount)
      for (const row of ledger.float) {
        floatAmount.set(byAsset(row), row.amount)
        floatPartners.set(byAsset(row), row.partners)
      }
      for (const row of ledger.unallocated) unallocated.set(byAsset(row), row.amount)
      for (const row of ledger.differences)
        reconciliation.set({ ...byAsset(row), address: row.address }, row.amount)
      for (const job of jobs) {
        jobsQueued.set({ kind: job.kind }, job.queued)
        jobsRunning.set({ kind: job.kind }, job.running)
        jobsOldest.set({ kind: job.kind }, job.oldestDueSeconds)
      }
      for (const row of transactionsInFlight)
        inFlight.set({ chain: row.chain, executor: row.executor }, row.count)
      undispatched.set(webhooks.oldestUndispatchedEventSeconds)
      pendingDelivery.set(webhooks.oldestPendingDeliverySeconds)
      failingEndpoints.set(webhooks.failingEndpoints.length)
      failingLongest.set(webhooks.failingEndpoints[0]?.failingSeconds ?? 0)
    }
    if (chains.status === 'fulfilled') {
      for (const chain of chains.value) {
        const newest = Math.max(chain.highestSeen, ...chain.nodes.map((n) => n.head ?? 0))
        highestSeen.set({ chain: chain.chain }, chain.highestSeen)
        for (const node of chain.nodes) {
          const labels = { chain: chain.chain, node: node.node }
          nodeUp.set(labels, node.head === undefined ? 0 : 1)
          if (node.head === undefined) continue
          nodeHead.set(labels, node.head)
          nodeLag.set(labels, newest - node.head)
        }
        balanceUp.set({ chain: chain.chain }, 'error' in chain.balances ? 0 : 1)
        if ('error' in chain.balances) continue
        const executor = chain.balances.address
        nativeBalance.set({ chain: chain.chain, executor }, chain.balances.native)
        for (const token of chain.balances.collection)
          collectionBalance.set(
            { chain: chain.chain, asset: token.asset, symbol: token.symbol, executor },
            token.value,
          )
      }
    }
  }

  // Two scrapers at once (Prometheus and an operator's curl) share one round of reads.
  const refreshShared = sharedWhileRunning(refresh)

  return {
    contentType: registry.contentType,
    read,
    async exposition() {
      await refreshShared()
      return (await processRegistry.metrics()) + (await registry.metrics())
    },
  }
}
