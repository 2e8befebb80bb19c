import { sql } from 'kysely'
import type { Db } from '../store/db.js'
import { migrations } from '../store/migrations/index.js'
import type { ChainProbe } from './chains.js'

export interface ReadinessCheck {
  /** `database`, `migrations`, or a chain's CAIP-2 id. */
  name: string
  ok: boolean
  /** Why not, in words that name no host, URL or credential. */
  detail?: string
}

export interface Readiness {
  ready: boolean
  checks: ReadinessCheck[]
}

/**
 * Whether this instance can do its work: the database answers, its schema has every migration this code
 * knows (an instance of older code on a newer schema is ready too: migrations only add), and each
 * configured chain has a node that answers with a head within the chain's lag allowance of the newest
 * head seen (a node behind the others cannot decide money: docs/live-mode.md, "Chain reads").
 */
export async function checkReadiness(db: Db, probes: readonly ChainProbe[]): Promise<Readiness> {
  const [database, chains] = await Promise.all([checkDatabase(db), Promise.all(probes.map(checkChain))])
  const checks = [...database, ...chains]
  return { ready: checks.every((check) => check.ok), checks }
}

async function checkDatabase(db: Db): Promise<ReadinessCheck[]> {
  let applied: Set<string>
  try {
    const rows = await sql<{ name: string }>`SELECT name FROM kysely_migration`.execute(db)
    applied = new Set(rows.rows.map((row) => row.name))
  } catch {
    return [
      { name: 'database', ok: false, detail: 'The database did not answer.' },
      { name: 'migrations', ok: false, detail: 'Unknown: the database did not answer.' },
    ]
  }
  const missing = Object.keys(migrations).filter((name) => !applied.has(name))
  return [
    { name: 'database', ok: true },
    missing.length === 0
      ? { name: 'migrations', ok: true }
      : { name: 'migrations', ok: false, detail: `Not applied: ${missing.join(', ')}.` },
  ]
}

async function checkChain(probe: ChainProbe): Promise<ReadinessCheck> {
  const heads = await probe.heads()
  const answered = heads.flatMap((n) => (n.head === undefined ? [] : [n.head]))
  if (answered.length === 0) {
    const reasons = heads.map((n) => `node ${n.node}: ${n.error ?? 'no answer'}`).join('; ')
    return { name: probe.caip2, ok: false, detail: `No node answered (${reasons}).` }
  }
  const newest = Math.max(probe.highestSeen(), ...answered)
  const best = Math.max(...answered)
  if (newest - best > probe.maxLag)
    return {
      name: probe.caip2,
      ok: false,
      detail: `Every node is more than ${probe.maxLag} ${probe.unit}s behind ${newest} (best ${best}).`,
    }
  return { name: probe.caip2, ok: true }
}
