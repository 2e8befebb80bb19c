import { sql } from 'kysely'
import type { Db } from '../store/db.js'

/**
 * A job step's fencing token: the job and the claim (its `attempts` when claimed) the step runs under.
 * A claim taken over by another runner (the lease ran out while this one was paused: a long GC, a frozen
 * VM, SIGSTOP) counts `attempts` up, so every write that moves money is made conditional on the token in
 * the statement (or the database transaction) that makes it: a runner that lost its claim can no longer
 * record a transaction, and one not recorded is never broadcast (docs/live-mode.md, "Fences").
 */
export interface Fence {
  jobId: string
  generation: number
}

/** A write refused because its step's claim was taken over: the step stops; the new holder decides. */
export class FenceLost extends Error {
  override name = 'FenceLost'
  constructor(readonly fence: Fence) {
    super(
      `Job ${fence.jobId} was claimed again since claim ${fence.generation}; this step no longer holds it.`,
    )
  }
}

/**
 * The fences among `fences` that still hold, each job row share-locked until `trx` ends: a claim by
 * another runner (an UPDATE of the row) waits for the commit, so what `trx` records under a fence that
 * held is there for the next holder to find before it decides anything.
 */
export async function holdFences(trx: Db, fences: readonly Fence[]): Promise<Set<string>> {
  if (fences.length === 0) return new Set()
  const result = await sql<{ id: string }>`
    SELECT jobs.id FROM jobs
    JOIN unnest(${fences.map((f) => f.jobId)}::bigint[], ${fences.map((f) => f.generation)}::int[])
      AS held(id, generation) ON jobs.id = held.id AND jobs.attempts = held.generation
    WHERE jobs.state = 'running'
    FOR SHARE OF jobs`.execute(trx)
  return new Set(result.rows.map((row) => String(row.id)))
}

/** The SQL condition "this fence holds" for a single statement's WHERE (share-locks the job row). */
export function fenceHolds(fence: Fence) {
  return sql<boolean>`EXISTS (SELECT 1 FROM jobs WHERE jobs.id = ${fence.jobId}::bigint
    AND jobs.attempts = ${fence.generation} AND jobs.state = 'running' FOR SHARE)`
}
