import { sql } from 'kysely'
import { namespaceOf } from '../../caip/caip.js'
import { jobsChannel } from '../jobs/notify.js'
import type { Db } from '../store/db.js'
import type { RefundRow } from './schema.js'

/** Job kinds that execute a refund: the sandbox's simulated transfer, and one per live chain family. */
export const refundJobKinds = {
  test: 'refund.test',
  evm: 'evm.refund',
  solana: 'solana.refund',
} as const

export function refundJobKind(refund: Pick<RefundRow, 'mode' | 'asset'>): string {
  if (refund.mode === 'test') return refundJobKinds.test
  const namespace = refund.asset ? namespaceOf(refund.asset) : ''
  if (namespace === 'eip155') return refundJobKinds.evm
  if (namespace === 'solana') return refundJobKinds.solana
  throw new Error(`No live refund executor for asset ${refund.asset}.`)
}

/** The refund's one job (jobs.refund_id is unique), due at `runAt`; enqueueing again is a no-op. */
export async function enqueueRefundJob(db: Db, refund: RefundRow, runAt: Date, now: Date): Promise<void> {
  const kind = refundJobKind(refund)
  await db
    .insertInto('jobs')
    .values({
      kind,
      payment_id: refund.payment_id,
      refund_id: refund.id,
      run_at: runAt,
      locked_until: null,
      payload: '{}',
      result: null,
      last_error: null,
      created_at: now,
      updated_at: now,
    })
    .onConflict((oc) => oc.column('refund_id').where('refund_id', 'is not', null).doNothing())
    .execute()
  await sql`SELECT pg_notify(${jobsChannel}, ${kind})`.execute(db)
}
