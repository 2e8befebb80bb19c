import { createLiveRuntime } from '../chains/live.js'
import type { ServerConfig } from '../config.js'
import { serverJobHandlers } from '../jobRegistry.js'
import type { Db } from '../store/db.js'
import { createChainProbes } from './chains.js'
import { createInstanceMetrics, type Readings } from './scrape.js'

/** `caipay status`: the readings a scrape takes, read once, for a person (or `--json` for a script). */
export type OperatorStatus = Omit<Readings, 'chains'> & {
  chains: Omit<Readings['chains'][number], 'highestSeen'>[]
}

export async function operatorStatus(db: Db, config: ServerConfig): Promise<OperatorStatus> {
  const live = createLiveRuntime({ config, db })
  const probes = createChainProbes(config, live.chains ?? { evm: [], solana: [] })
  const metrics = createInstanceMetrics({
    db,
    probes,
    // The server's own registry: every kind its runner claims, none listed by hand.
    jobKinds: Object.keys(serverJobHandlers(config, live)),
  })
  const readings = await metrics.read()
  // What one short-lived process has seen of the chain is nothing: the nodes' heads say it.
  return { ...readings, chains: readings.chains.map(({ highestSeen: _, ...chain }) => chain) }
}

export function formatStatus(status: OperatorStatus): string {
  const lines: string[] = []
  const seconds = (s: number) =>
    s >= 3600 ? `${(s / 3600).toFixed(1)} h` : s >= 60 ? `${Math.round(s / 60)} min` : `${Math.round(s)} s`
  lines.push('Chains')
  if (status.chains.length === 0) lines.push('  (none configured; pass --config)')
  for (const chain of status.chains) {
    const nodes = chain.nodes
      .map(
        (n) =>
          `node ${n.node} ${n.head === undefined ? `down (${n.error ?? 'no answer'})` : `${chain.unit} ${n.head}`}`,
      )
      .join(', ')
    lines.push(`  ${chain.chain}: ${nodes}`)
    if ('error' in chain.balances) lines.push(`    balances: ${chain.balances.error}`)
    else {
      lines.push(`    executor ${chain.balances.address}: ${chain.balances.native} native`)
      for (const token of chain.balances.collection)
        lines.push(`    collected ${token.symbol}: ${token.value} (${token.asset})`)
    }
  }
  lines.push('Jobs (queued / running / oldest due)')
  for (const job of status.jobs)
    lines.push(
      `  ${job.kind}: ${job.queued} / ${job.running} / ${job.oldestDueSeconds > 0 ? seconds(job.oldestDueSeconds) : '-'}`,
    )
  const inFlight = status.transactionsInFlight.filter((t) => t.count > 0)
  lines.push('Transactions in flight')
  if (inFlight.length === 0) lines.push('  none')
  for (const t of inFlight) lines.push(`  ${t.chain} ${t.executor}: ${t.count}`)
  lines.push('Webhooks')
  const { webhooks } = status
  lines.push(
    `  oldest undispatched event: ${webhooks.oldestUndispatchedEventSeconds > 0 ? seconds(webhooks.oldestUndispatchedEventSeconds) : 'none'}`,
  )
  if (webhooks.failingEndpoints.length === 0) lines.push('  failing endpoints: none')
  for (const endpoint of webhooks.failingEndpoints)
    lines.push(
      `  failing: ${endpoint.endpointId} for ${seconds(endpoint.failingSeconds)} (${endpoint.pendingDeliveries} deliveries waiting)`,
    )
  return `${lines.join('\n')}\n`
}
