import { type RawBuilder, sql } from 'kysely'
import { canonicalCaip } from '../../caip/caip.js'
import type { PaymentStatus } from '../../contract/common.js'
import type { WebhookEventType } from '../../contract/webhooks.js'
import { fail } from '../errors.js'
import { type Fence, fenceHolds } from '../jobs/fence.js'
import { jobsChannel } from '../jobs/notify.js'
import { enqueueAlong, enqueueJob, type NewJob } from '../jobs/queue.js'
import { bookUnsettledCollections, type UnsettledCollection } from '../ledger/entries.js'
import { countPaymentChanges } from '../metrics/counters.js'
import { currentTraceparent } from '../metrics/tracing.js'
import { afterCommit, type Db, inTransaction } from '../store/db.js'
import { columnsText, namedStatement } from '../store/prepared.js'
import { type PaymentRow, type PaymentUpdate, paymentColumns } from '../store/schema.js'
import { addSettlementItem, addSettlementItems, type BatchedSettlement } from './settlementItems.js'

/**
 * The payments domain layer: the only code that changes a payment's state. Every change is one
 * statement that bumps `payment_state_version` and writes the change's `payment_events` row (the
 * outbox the webhook dispatcher reads), so an event exists if and only if its change committed.
 * Routes, the gateway and the chain executors call these functions; none writes `payments` itself.
 */

/** The legal moves of a payment. Final states have none. */
export const paymentTransitions: Readonly<Record<PaymentStatus, readonly PaymentStatus[]>> = {
  requires_action: ['processing', 'cancelled', 'expired'],
  processing: ['succeeded', 'failed'],
  succeeded: [],
  failed: [],
  expired: [],
  cancelled: [],
}

/** Every event a payment can emit (the webhook contract's, plus caipay's own `payment.refunded`). */
export type PaymentEventType = WebhookEventType

/** When each status was reached, stored with the payment (the stage objects of an event show them). */
const reachedAtColumn = {
  processing: 'processing_at',
  succeeded: 'succeeded_at',
  failed: 'failed_at',
  expired: 'expired_at',
  cancelled: 'cancelled_at',
} as const satisfies Partial<Record<PaymentStatus, keyof PaymentRow>>

export function canTransition(from: PaymentStatus, to: PaymentStatus): boolean {
  return paymentTransitions[from].includes(to)
}

/**
 * The snapshot an event keeps of its payment: the row as the statement left it (`alias`, a CTE of whole
 * payment rows), with the numeric columns as strings (JSON numbers would lose digits of a 78-digit amount).
 */
export function snapshotSql(alias: 'changed' | 'inserted'): string {
  const asText = numericColumns.map((column) => `'${column}', ${alias}.${column}::text`)
  return `to_jsonb(${alias}) || jsonb_build_object(${asText.join(', ')})`
}

/** The numeric columns, shown as text in snapshots. */
const numericColumns = [
  'amount_value',
  'settlement_value',
  'captured_value',
] as const satisfies readonly (keyof PaymentRow)[]

/** One condition of a state change's WHERE, as kysely's `where(column, operator, value)`. */
type Condition = readonly [
  column: keyof PaymentRow & string,
  operator: '=' | '>' | '<=' | 'in' | 'is',
  value: unknown,
]

/**
 * Writes a state change carries in its own statement, made only when the change is: a live confirm's
 * job and what its chain records (gateway/confirm.ts), so the confirm is one round trip, not a
 * transaction of several.
 */
export interface AlongWrites {
  /** Enqueued, and its runners woken at commit, with the change (jobs/queue.ts enqueueAlong). */
  job?: NewJob | undefined
  /** Inserts from the changed rows (the CTE named by the argument): no change, no row. */
  inserts?: readonly ((changed: string) => RawBuilder<unknown>)[] | undefined
  /**
   * An expression evaluated once per changed row, after the change, that may raise to roll the whole
   * statement back (a fee reservation that refuses: payments/relayGuards.ts reserveExecutorFeeOrRaise).
   * Not evaluated when nothing changed.
   */
  guard?: RawBuilder<unknown> | undefined
}

/**
 * One state change in one statement: `UPDATE payments ... RETURNING` as a CTE, the event row inserted
 * from it, the changed rows returned. `where` narrows the rows (the state they must be in); nobody
 * matched -> no row, no event (and none of `along`'s writes).
 */
async function changePayments(
  db: Db,
  change: {
    type: PaymentEventType
    set: PaymentUpdate
    where: readonly Condition[]
    now: Date
    /** A job step's claim: the change is made only while it holds (jobs/fence.ts). */
    fence?: Fence | undefined
    along?: AlongWrites | undefined
  },
): Promise<PaymentRow[]> {
  const { type, where, now, fence, along } = change
  const set: PaymentUpdate = { ...change.set, updated_at: now }
  const job = along?.job && enqueueAlong('changed', along.job)
  const inserts = along?.inserts ?? []
  let creator = db
    .with('changed', (qb) => {
      let update = qb
        .updateTable('payments')
        .set(set)
        .set((eb) => ({ payment_state_version: eb('payment_state_version', '+', 1) }))
      for (const [column, operator, value] of where) update = update.where(column, operator, value as never)
      if (fence) update = update.where(fenceHolds(fence))
      return update.returning(paymentColumns)
    })
    .with('event', (qb) =>
      qb
        .insertInto('payment_events')
        .columns(['payment_id', 'type', 'payment_state_version', 'snapshot', 'created_at'])
        .expression((eb) =>
          eb
            .selectFrom('changed')
            .select([
              'changed.id',
              sql.lit(type).as('type'),
              'changed.payment_state_version',
              sql.raw<string>(snapshotSql('changed')).as('snapshot'),
              sql<Date>`${now}::timestamptz`.as('created_at'),
            ]),
        ),
    )
  // The writes along (none on most changes) as more CTEs; their names are never read, only run.
  const alongCtes = [...(job ? [job.insert] : []), ...inserts.map((insert) => insert('changed'))]
  for (const [k, cte] of alongCtes.entries())
    creator = creator.with(`along_${k}`, () => sql`(${cte})` as never) as unknown as typeof creator
  const guard = along?.guard
  const rows = await creator
    .selectFrom('changed')
    .selectAll()
    .$if(job !== undefined, (qb) => qb.select(job!.wake.as('woke')))
    .$if(guard !== undefined, (qb) => qb.select(guard!.as('guarded')))
    .execute()
  for (const row of rows) {
    delete (row as { woke?: unknown }).woke
    delete (row as { guarded?: unknown }).guarded
  }
  countCommitted(db, type, rows as PaymentRow[])
  return rows as PaymentRow[]
}

/**
 * Counts changes once they are committed (the counter says "committed"): a change made in a transaction
 * that rolls back later (a guard that raises, a job step that throws, an idempotent request refused)
 * is not counted. No statement: the count waits on the transaction's after-commit list.
 */
function countCommitted(
  db: Db,
  type: string,
  rows: readonly { mode: string; option_amount: { unit: string } | null }[],
): void {
  if (rows.length > 0) afterCommit(db, () => countPaymentChanges(type, rows))
}

export interface TransitionPaymentParameters {
  paymentId: string
  /** The state(s) the payment must be in now; each must have a legal move to `to`. */
  from: PaymentStatus | readonly PaymentStatus[]
  to: PaymentStatus
  /** Other columns written in the same UPDATE (tx_id, failure_code, cancelled_at, ...). */
  set?: Omit<PaymentUpdate, 'status' | 'id' | 'payment_state_version'>
  /** Only for a payment still unexpired at this time (e.g. a buyer confirming). */
  notExpiredAt?: Date
  now?: Date
  /** Writes made in the same statement, only if the move is. */
  along?: AlongWrites
}

/**
 * Moves a payment with ONE conditional `UPDATE ... WHERE status IN (from)` (which also writes its
 * event), so two racing callers cannot both win. When nothing matched: `404 payment_not_found` if the
 * payment does not exist, else `409 invalid_state` (with the state it was actually in).
 */
export async function transitionPayment(db: Db, params: TransitionPaymentParameters): Promise<PaymentRow> {
  const from = typeof params.from === 'string' ? [params.from] : [...params.from]
  for (const state of from) {
    if (!canTransition(state, params.to)) {
      throw new Error(`Illegal payment transition ${state} -> ${params.to} in code.`)
    }
  }
  const now = params.now ?? new Date()
  const to = params.to as keyof typeof reachedAtColumn
  const [row] = await changePayments(db, {
    type: `payment.${to}`,
    set: { [reachedAtColumn[to]]: now, ...params.set, status: params.to },
    where: [
      ['id', '=', params.paymentId],
      ['status', 'in', from],
      ...(params.notExpiredAt ? [['expires_at', '>', params.notExpiredAt] as const] : []),
    ],
    now,
    along: params.along,
  })
  if (row) return row
  return refuseTransition(db, params.paymentId, params.to)
}

/** What a confirm writes with its move to processing (gateway/confirm.ts). */
export interface ConfirmedColumns {
  selected_option_id: string
  buyer: string
  /** The option's amount, JSON. */
  option_amount: string
}

/**
 * transitionPayment `requires_action -> processing` of a payment unexpired at `now`, with `confirmed`
 * and, along, `job` enqueued and its runners woken at commit (AlongWrites with a job and nothing else),
 * as ONE named statement: the same text every time, so PostgreSQL parses it once per connection and
 * kysely builds nothing (building and compiling this statement's CTEs cost the server about 0.4 ms per
 * live confirm: docs/performance.md, "Fifth round"). The same rows, event, job and wake-up as
 * transitionPayment; nothing matched: 404 or 409 as transitionPayment. A FastPath (fastPath.ts): the
 * one-statement live confirm of a driver whose plan is a job alone (EVM gasless).
 */
export async function confirmWithJob(
  db: Db,
  params: {
    paymentId: string
    confirmed: ConfirmedColumns
    job: NewJob
    now: Date
    /**
     * The arguments of `caipay_relay_guard_or_raise` (relayGuards.ts relayGuardOrRaise): evaluated with
     * the move, after it, as AlongWrites.guard; a refusal raises and rolls everything back.
     */
    relayGuard?: readonly unknown[] | undefined
  },
): Promise<PaymentRow> {
  const { paymentId, confirmed, job, now, relayGuard } = params
  const rows = (
    await (relayGuard ? moveToProcessingWithJobGuarded : moveToProcessingWithJob)(
      db,
      paymentId,
      now,
      confirmed.selected_option_id,
      confirmed.buyer,
      confirmed.option_amount,
      job.kind,
      JSON.stringify(job.payload ?? {}),
      currentTraceparent(),
      job.now,
      jobsChannel,
      ...(relayGuard ?? []),
    )
  ).rows
  for (const row of rows) {
    delete (row as { woke?: unknown }).woke
    delete (row as { guarded?: unknown }).guarded
  }
  countCommitted(db, 'payment.processing', rows)
  const [row] = rows
  if (row) return row
  return refuseTransition(db, paymentId, 'processing')
}

/** changePayments' statement for confirmWithJob's move, written out ($2: now, also the expiry bound). */
const moveToProcessingWithJobText = (guarded: boolean) => `WITH changed AS (
    UPDATE payments SET status = 'processing', processing_at = $2, selected_option_id = $3, buyer = $4,
      option_amount = $5, updated_at = $2, payment_state_version = payment_state_version + 1
    WHERE id = $1 AND status = 'requires_action' AND expires_at > $2
    RETURNING ${columnsText(paymentColumns)}
  ), event AS (
    INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
    SELECT changed.id, 'payment.processing', changed.payment_state_version, ${snapshotSql('changed')},
      $2::timestamptz
    FROM changed
  ), job AS (
    INSERT INTO jobs (kind, payment_id, run_at, locked_until, payload, result, last_error, trace_parent, created_at, updated_at)
    SELECT $6::text, changed.id, $9::timestamptz, NULL, $7::jsonb, NULL, NULL, $8::text, $9::timestamptz, $9::timestamptz
    FROM changed
    ON CONFLICT (kind, payment_id) WHERE delivery_id IS NULL AND refund_id IS NULL DO NOTHING
  )
  SELECT changed.*, pg_notify($10::text, $6::text) AS woke${
    guarded
      ? `,
    caipay_relay_guard_or_raise($11::text, $12::text, $13::text, $14::text[], $15::numeric, $16::numeric,
      $17::timestamptz, $18::timestamptz) AS guarded`
      : ''
  } FROM changed`
const moveToProcessingWithJob = namedStatement<PaymentRow>(moveToProcessingWithJobText(false))
const moveToProcessingWithJobGuarded = namedStatement<PaymentRow>(moveToProcessingWithJobText(true))

/** Nothing matched a move to `to`: `404 payment_not_found`, or `409 invalid_state` with the state it is in. */
async function refuseTransition(db: Db, paymentId: string, to: PaymentStatus): Promise<never> {
  const current = await db
    .selectFrom('payments')
    .select(['status', 'expires_at'])
    .where('id', '=', paymentId)
    .executeTakeFirst()
  if (!current) fail('payment_not_found', 'Payment not found.', { paymentId })
  fail('invalid_state', `The payment is ${current.status}; it cannot become ${to}.`, {
    paymentId,
    status: current.status,
    to,
  })
}

export interface PaymentStep {
  type: PaymentEventType
  set: PaymentUpdate
}

export interface PaymentStepsParams {
  paymentId: string
  from: PaymentStatus
  notExpiredAt?: Date
  steps: readonly PaymentStep[]
  now: Date
}

/**
 * Consecutive state changes of one payment in ONE statement, each with its own event, as if made one
 * after another: the row, locked in state `from` (and unexpired at `notExpiredAt`), is updated once to
 * the last step's values, and step k's event has version v + k and, as snapshot, the final row with every
 * column a later step sets shown as it was at step k. Test mode's confirm goes requires_action ->
 * processing -> succeeded (-> settled) this way: one round trip and one new row version instead of three.
 * A column set by more than one step must be text (status, settlement_status). Nothing matched: as
 * transitionPayment (404 or 409).
 */
export async function changePaymentInSteps(db: Db, params: PaymentStepsParams): Promise<PaymentRow> {
  const { steps, now } = params
  let status = params.from
  for (const step of steps) {
    const to = step.set.status
    if (to === undefined) continue
    if (!canTransition(status, to)) throw new Error(`Illegal payment transition ${status} -> ${to} in code.`)
    status = to
  }
  const merged: PaymentUpdate = Object.assign({}, ...steps.map((step) => step.set))
  const columns = (Object.keys(merged) as (keyof PaymentUpdate & string)[]).filter(
    (column) => merged[column] !== undefined,
  )
  const setAt = (column: keyof PaymentUpdate, upTo: number) => {
    let at = -1
    for (let k = 0; k <= upTo; k++) if (steps[k]!.set[column] !== undefined) at = k
    return at
  }
  const events = steps.map((step, k) => {
    const overrides = columns
      .filter((column) => setAt(column, steps.length - 1) > k)
      .flatMap((column) => {
        const at = setAt(column, k)
        if (at === -1) {
          const old = sql.ref(`old.${column}`)
          return [
            sql.lit(column),
            (numericColumns as readonly string[]).includes(column) ? sql`${old}::text` : old,
          ]
        }
        const value = steps[at]!.set[column]
        if (typeof value !== 'string') throw new Error(`Step column ${column} set twice must be text.`)
        return [sql.lit(column), sql`${value}::text`]
      })
    const version = sql`old.payment_state_version + ${sql.lit(k + 1)}`
    const snapshot =
      k === steps.length - 1
        ? sql`snapshot.document`
        : sql`snapshot.document || jsonb_build_object(${sql.join([...overrides, sql.lit('payment_state_version'), version])})`
    return sql`SELECT changed.id, ${sql.lit(step.type)}, ${version}, ${snapshot}, ${now}::timestamptz
      FROM changed CROSS JOIN old CROSS JOIN snapshot`
  })
  const statement = sql<PaymentRow>`WITH old AS (
      SELECT ${sql.raw(columnsText(paymentColumns))} FROM payments
      WHERE id = ${params.paymentId} AND status = ${params.from}
      ${params.notExpiredAt ? sql`AND expires_at > ${params.notExpiredAt}` : sql``}
      FOR UPDATE
    ), changed AS (
      UPDATE payments SET ${sql.join(columns.map((column) => sql`${sql.ref(column)} = ${merged[column]}`))},
        updated_at = ${now}, payment_state_version = old.payment_state_version + ${sql.lit(steps.length)}
      FROM old WHERE payments.id = old.id
      RETURNING ${sql.raw(columnsText(paymentColumns, 'payments'))}
    ), snapshot AS (
      SELECT ${sql.raw(snapshotSql('changed'))} AS document FROM changed
    ), event AS (
      INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
      ${sql.join(events, sql` UNION ALL `)}
    )
    SELECT * FROM changed`
  const [row] = (await statement.execute(db)).rows
  if (row) {
    for (const step of steps) countCommitted(db, step.type, [row])
    return row
  }
  return refuseTransition(db, params.paymentId, steps.find((step) => step.set.status)?.set.status ?? status)
}

/**
 * The one success path of every executor (test mode, live EVM, live Solana): `processing -> succeeded`
 * with the chain's transaction id and, when the merchant gets a settlement step, `settlement_status`
 * pending and the settlement job queued in the same transaction. Undefined when the payment was no
 * longer processing (a job that ran again after its step was done elsewhere).
 */
export async function succeedPayment(
  db: Db,
  params: {
    paymentId: string
    txId: string
    now?: Date
    /**
     * The merchant gets a settlement step: pending now, done by `job`, or by the batch `batched` joins
     * (absent both: the caller settles).
     */
    settlement?: { job?: { kind: string; payload: unknown }; batched?: BatchedSettlement } | undefined
  },
): Promise<PaymentRow | undefined> {
  const now = params.now ?? new Date()
  const { settlement } = params
  return inTransaction(db, async (trx) => {
    const [row] = await changePayments(trx, {
      type: 'payment.succeeded',
      set: {
        status: 'succeeded',
        succeeded_at: now,
        tx_id: params.txId,
        ...(settlement ? { settlement_status: unlessHeld(sql<string>`'pending'`) } : {}),
      },
      where: [
        ['id', '=', params.paymentId],
        ['status', '=', 'processing'],
      ],
      now,
    })
    if (row?.capture_method === 'manual') {
      const plan = livePlan({ settlement: settlement?.batched })
      const [held] = await authorizeHeldPayments(trx, [{ paymentId: row.id, plan }], now)
      return held ?? row
    }
    if (row && settlement?.job) {
      await enqueueJob(trx, { ...settlement.job, paymentId: params.paymentId, now })
    }
    if (row && settlement?.batched)
      await addSettlementItem(trx, { ...settlement.batched, paymentId: row.id, now })
    return row
  })
}

/**
 * succeedPayment for several payments (a block's): `processing -> succeeded` with each one's transaction
 * in ONE statement (each its own event), and the settlements of those given one added to their batches,
 * in one database transaction (the caller's, when it is one). Returns the payments it changed; one no
 * longer processing is left as it is.
 */
export async function succeedPayments(
  db: Db,
  payments: readonly {
    paymentId: string
    txId: string
    settlement?: BatchedSettlement | undefined
    /** Collected with no settlement step: the ledger books it as its partner's float. */
    unsettled?: UnsettledCollection | undefined
  }[],
  now: Date,
): Promise<PaymentRow[]> {
  if (payments.length === 0) return []
  const txIds = JSON.stringify(payments.map((p) => ({ id: p.paymentId, tx_id: p.txId })))
  const settling = payments.filter((p) => p.settlement).map((p) => p.paymentId)
  return inTransaction(db, async (trx) => {
    const rows = await changePayments(trx, {
      type: 'payment.succeeded',
      set: {
        status: 'succeeded',
        succeeded_at: now,
        tx_id: sql<string>`(SELECT v.tx_id FROM jsonb_to_recordset(${txIds}::jsonb) AS v(id text, tx_id text)
          WHERE v.id = payments.id)` as never,
        settlement_status:
          unlessHeld(sql<string>`CASE WHEN payments.id = ANY(${settling}::text[]) THEN 'pending'
          ELSE payments.settlement_status END`),
      },
      where: [
        ['id', 'in', payments.map((p) => p.paymentId)],
        ['status', '=', 'processing'],
      ],
      now,
    })
    // Manual capture: held (authorized) instead of settled; the capture adds the settlement item.
    const manual = new Set(rows.filter((row) => row.capture_method === 'manual').map((row) => row.id))
    const held = await authorizeHeldPayments(
      trx,
      payments.flatMap((p) => {
        if (!manual.has(p.paymentId)) return []
        return [
          { paymentId: p.paymentId, plan: livePlan({ settlement: p.settlement, unsettled: p.unsettled }) },
        ]
      }),
      now,
    )
    const heldRows = new Map(held.map((row) => [row.id, row]))
    const changed = new Set(rows.filter((row) => !manual.has(row.id)).map((row) => row.id))
    await addSettlementItems(
      trx,
      payments.flatMap((p) =>
        p.settlement && changed.has(p.paymentId) ? [{ ...p.settlement, paymentId: p.paymentId }] : [],
      ),
      now,
    )
    await bookUnsettledCollections(
      trx,
      payments.flatMap((p) =>
        p.unsettled && !p.settlement && changed.has(p.paymentId)
          ? [{ ...p.unsettled, paymentId: p.paymentId }]
          : [],
      ),
      now,
    )
    return rows.map((row) => heldRows.get(row.id) ?? row)
  })
}

/** A settlement status set on success, except on a manual-capture payment (its capture settles it). */
function unlessHeld(value: ReturnType<typeof sql<string>>): never {
  return sql<string>`CASE WHEN payments.capture_method = 'manual' THEN payments.settlement_status
    ELSE ${value} END` as never
}

/** `processing -> failed`, unless the payment is no longer processing (then undefined). */
export async function failPayment(
  db: Db,
  params: {
    paymentId: string
    failureCode: string
    now?: Date
    /**
     * The job step's claim. A step that resumes after its claim was taken over may hold a verdict the
     * chain has since overtaken (an authorization "already used" by the new holder's relay): it must
     * not fail a payment that is landing.
     */
    fence?: Fence | undefined
  },
): Promise<PaymentRow | undefined> {
  const now = params.now ?? new Date()
  const [row] = await changePayments(db, {
    type: 'payment.failed',
    set: { status: 'failed', failed_at: now, failure_code: params.failureCode },
    where: [
      ['id', '=', params.paymentId],
      ['status', '=', 'processing'],
    ],
    now,
    fence: params.fence,
  })
  return row
}

/**
 * Records a landed settlement on its payment (`payment.settled`); a settlement that is not pending
 * (already settled, or none) is left as it is and yields undefined.
 */
export async function settlePayment(
  db: Db,
  /** `txId` null: nothing was left to send (refunds took all of it before the settlement). */
  params: { paymentId: string; txId: string | null; assetId: string; value: string | bigint; now?: Date },
): Promise<PaymentRow | undefined> {
  const now = params.now ?? new Date()
  const [row] = await changePayments(db, {
    type: 'payment.settled',
    set: {
      settlement_status: 'succeeded',
      settlement_tx_id: params.txId,
      settlement_unit: `caip19/${params.assetId}`,
      settlement_value: params.value,
      settled_at: now,
    },
    where: [
      ['id', '=', params.paymentId],
      ['settlement_status', '=', 'pending'],
    ],
    now,
  })
  return row
}

/**
 * Records one landed settlement batch on its payments (`payment.settled` each, in one statement): every
 * payment of `paymentIds` still pending settles with `txId` (null: nothing was left to send) and the
 * amount fixed for it (settlement_amounts). Returns the payments it settled.
 */
export async function settlePayments(
  db: Db,
  params: { paymentIds: readonly string[]; txId: string | null; assetId: string; now: Date },
): Promise<PaymentRow[]> {
  if (params.paymentIds.length === 0) return []
  return changePayments(db, {
    type: 'payment.settled',
    set: {
      settlement_status: 'succeeded',
      settlement_tx_id: params.txId,
      settlement_unit: `caip19/${params.assetId}`,
      settlement_value:
        sql<string>`(SELECT value FROM settlement_amounts WHERE settlement_amounts.payment_id = payments.id)` as never,
      settled_at: params.now,
    },
    where: [
      ['id', 'in', params.paymentIds],
      ['settlement_status', '=', 'pending'],
    ],
    now: params.now,
  })
}

/** Marks a succeeded, not yet refunded payment of this merchant refunded; undefined otherwise. */
export async function refundPayment(
  db: Db,
  params: { paymentId: string; merchantId: string; now: Date },
): Promise<PaymentRow | undefined> {
  const [row] = await changePayments(db, {
    type: 'payment.refunded',
    set: { refunded_at: params.now },
    where: [
      ['id', '=', params.paymentId],
      ['merchant_id', '=', params.merchantId],
      ['status', '=', 'succeeded'],
      ['refunded_at', 'is', null],
    ],
    now: params.now,
  })
  return row
}

/**
 * Marks every payment still waiting past its `expiresAt` as expired (the sweep of a background job,
 * and list reads). Returns the ids it expired. Narrow with a partner/merchant scope.
 */
export async function expireDuePayments(
  db: Db,
  options: { now: Date; partnerId?: string; mode?: 'test' | 'live'; merchantId?: string; paymentId?: string },
): Promise<string[]> {
  const rows = await changePayments(db, {
    type: 'payment.expired',
    set: { status: 'expired', expired_at: options.now },
    where: [
      ['status', '=', 'requires_action'],
      ['expires_at', '<=', options.now],
      ...(options.partnerId ? [['partner_id', '=', options.partnerId] as const] : []),
      ...(options.mode ? [['mode', '=', options.mode] as const] : []),
      ...(options.merchantId ? [['merchant_id', '=', options.merchantId] as const] : []),
      ...(options.paymentId ? [['id', '=', options.paymentId] as const] : []),
    ],
    now: options.now,
  })
  return rows.map((r) => r.id)
}

/** A read that shows the truth: a waiting payment past its expiry is expired first. */
export async function withExpiryApplied<R extends Pick<PaymentRow, 'id' | 'status' | 'expires_at'>>(
  db: Db,
  row: R,
  now: Date,
): Promise<R | PaymentRow> {
  if (row.status !== 'requires_action' || row.expires_at.getTime() > now.getTime()) return row
  const [updated] = await changePayments(db, {
    type: 'payment.expired',
    set: { status: 'expired', expired_at: now },
    where: [
      ['id', '=', row.id],
      ['status', '=', 'requires_action'],
      ['expires_at', '<=', now],
    ],
    now,
  })
  if (updated) return updated
  // Someone else moved it meanwhile (expired, confirmed just in time): read what it is now.
  return loadPayment(db, row.id)
}

/** A payment known to exist (a job references its payment; a row just read). */
export async function loadPayment(db: Db, paymentId: string): Promise<PaymentRow> {
  return db
    .selectFrom('payments')
    .select(paymentColumns)
    .where('id', '=', paymentId)
    .executeTakeFirstOrThrow() as Promise<PaymentRow>
}

/**
 * What a manual-capture payment's capture settles, fixed when it succeeded (docs/capture.md). Live: where
 * its money is held (`holder`, `asset`, `value` in token minor units) and the settlement item the capture
 * adds (amounts in it are the whole payment's; a capture takes its share), or none when the merchant has
 * no destination for the asset (the captured part then becomes its partner's float, as an unsettled
 * automatic payment's). Test: the asset it settles at once, if any.
 */
export type CapturePlan =
  | {
      mode: 'live'
      asset: string
      holder: string | null
      value: string
      settlement: (Omit<BatchedSettlement, 'amount' | 'fee' | 'holder'> & { fee: string }) | null
    }
  | { mode: 'test'; settlementAsset: string | null; value: string }

/** A manual-capture payment that just succeeded: what is held for it. */
export interface HeldPayment {
  paymentId: string
  plan: CapturePlan
}

/** The plan of a live payment that succeeded with this settlement (or none) at `holder`. */
export function livePlan(params: {
  settlement?: BatchedSettlement | undefined
  unsettled?: UnsettledCollection | undefined
}): CapturePlan {
  const { settlement, unsettled } = params
  if (settlement) {
    const { amount, fee, holder, ...rest } = settlement
    return {
      mode: 'live',
      asset: settlement.asset,
      holder: holder ?? null,
      value: (amount + (fee ?? 0n)).toString(),
      settlement: { ...rest, fee: (fee ?? 0n).toString() },
    }
  }
  if (unsettled)
    return {
      mode: 'live',
      asset: unsettled.asset,
      holder: unsettled.holder,
      value: unsettled.value.toString(),
      settlement: null,
    }
  // Nothing reached an address of the service (never so for the paths a manual payment is offered).
  return { mode: 'live', asset: '', holder: null, value: '0', settlement: null }
}

/**
 * `payment.authorized` for manual-capture payments that just succeeded (in the transaction that succeeded
 * them): capture status `authorized` with its plan, and the money they brought booked world -> the
 * merchant's `authorized` at the holding address, in ONE statement. No settlement item: nothing settles
 * before a capture.
 */
export async function authorizeHeldPayments(
  db: Db,
  payments: readonly HeldPayment[],
  now: Date,
): Promise<PaymentRow[]> {
  if (payments.length === 0) return []
  const values = JSON.stringify(
    payments.map((p) => ({
      payment_id: p.paymentId,
      plan: p.plan,
      asset: p.plan.mode === 'live' ? canonicalCaip(p.plan.asset) : null,
      holder: p.plan.mode === 'live' ? p.plan.holder : null,
      value: p.plan.value,
    })),
  )
  const { rows } = await sql<PaymentRow>`WITH v AS (
      SELECT * FROM jsonb_to_recordset(${values}::jsonb)
        AS v(payment_id text, plan jsonb, asset text, holder text, value text)
    ), changed AS (
      UPDATE payments SET capture_status = 'authorized', capture_plan = v.plan, updated_at = ${now},
        payment_state_version = payments.payment_state_version + 1
      FROM v WHERE payments.id = v.payment_id AND payments.capture_method = 'manual'
        AND payments.status = 'succeeded' AND payments.capture_status IS NULL
      RETURNING ${sql.raw(columnsText(paymentColumns, 'payments'))}
    ), event AS (
      INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
      SELECT changed.id, 'payment.authorized', changed.payment_state_version, ${sql.raw(snapshotSql('changed'))},
        ${now}::timestamptz
      FROM changed
    ), ledger AS (
      INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
        amount, flow, payment_id, created_at)
      SELECT changed.mode, v.asset, v.holder, 'world', '', 'authorized', changed.merchant_id, v.value::numeric,
        'payment.authorized', changed.id, ${now}::timestamptz
      FROM changed JOIN v ON v.payment_id = changed.id
      WHERE changed.mode = 'live' AND v.holder IS NOT NULL AND v.value::numeric > 0
      ON CONFLICT DO NOTHING
    )
    SELECT * FROM changed`.execute(db)
  countCommitted(db, 'payment.authorized', rows)
  return rows
}

/** The job that voids a payment still authorized at its `captureBy` (queued with the payment). */
export const captureExpiryJobKind = 'capture.expire'

/** A refund recorded with a capture or a void, in its statement (refunds/create.ts newRefundRow). */
export type RefundValues = Record<string, unknown> & { id: string }

/** What a capture moves in the ledger: the captured share of the held money, at the holding address. */
export interface CapturedEntry {
  asset: string
  holder: string
  /** Token minor units captured (the merchant's and the fee). */
  value: bigint
  /** `collected` (a settlement item follows) or the partner's `float` (no destination for the asset). */
  to: 'collected' | 'float'
}

/**
 * `authorized -> captured | partially_captured` (`payment.captured`) in ONE statement with what it moves:
 * the captured share authorized -> collected (or float), and the refund of the rest inserted (whose
 * trigger moves authorized -> refunds). Only while authorized and before `capture_by`: of racing
 * captures, voids and the expiry exactly one changes the row; undefined for the others.
 */
export async function captureHeldPayment(
  db: Db,
  params: {
    paymentId: string
    status: 'captured' | 'partially_captured'
    /** In the payment's unit. */
    capturedValue: bigint
    /** The capture adds a settlement item (or settles at once in test mode). */
    settles: boolean
    entry?: CapturedEntry | undefined
    refund?: RefundValues | undefined
    now: Date
  },
): Promise<PaymentRow | undefined> {
  const { now, entry } = params
  const ledger = entry
    ? sql`INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner,
          amount, flow, payment_id, created_at)
        SELECT changed.mode, ${canonicalCaip(entry.asset)}, ${entry.holder}, 'authorized', changed.merchant_id,
          ${entry.to}, CASE WHEN ${entry.to} = 'collected' THEN changed.merchant_id ELSE changed.partner_id END,
          ${entry.value.toString()}::numeric, 'payment.collected', changed.id, ${now}::timestamptz
        FROM changed WHERE changed.mode = 'live' AND ${entry.value.toString()}::numeric > 0
        ON CONFLICT DO NOTHING`
    : sql`SELECT 1`
  const [row] = (
    await sql<PaymentRow>`WITH changed AS (
      UPDATE payments SET capture_status = ${params.status}, captured_value = ${params.capturedValue.toString()},
        captured_at = ${now}, capture_failure_code = NULL, updated_at = ${now},
        payment_state_version = payment_state_version + 1
        ${params.settles ? sql`, settlement_status = 'pending'` : sql``}
      WHERE id = ${params.paymentId} AND capture_status = 'authorized' AND capture_by > ${now}
      RETURNING ${sql.raw(columnsText(paymentColumns))}
    ), event AS (
      INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
      SELECT changed.id, 'payment.captured', changed.payment_state_version, ${sql.raw(snapshotSql('changed'))},
        ${now}::timestamptz
      FROM changed
    ), ledger AS (${ledger}), refund AS (${refundInsert(params.refund)})
    SELECT * FROM changed`.execute(db)
  ).rows
  if (row) countCommitted(db, 'payment.captured', [row])
  return row
}

/**
 * `authorized -> voided | expired` (`payment.voided`) in ONE statement with the refund of everything
 * inserted (its trigger moves authorized -> refunds). `expired` only once `capture_by` has passed. Of
 * racing captures, voids and the expiry exactly one changes the row; undefined for the others.
 * `rest`: a partial capture's rest that could not go back (capture_failure_code), given back again; the
 * capture status stays `partially_captured`.
 */
export async function voidHeldPayment(
  db: Db,
  params: {
    paymentId: string
    status: 'voided' | 'expired'
    rest?: boolean | undefined
    refund?: RefundValues | undefined
    now: Date
  },
): Promise<PaymentRow | undefined> {
  const { now } = params
  const held = params.rest
    ? sql`capture_status = 'partially_captured' AND capture_failure_code IS NOT NULL`
    : sql`capture_status = 'authorized'`
  const [row] = (
    await sql<PaymentRow>`WITH changed AS (
      UPDATE payments SET ${params.rest ? sql`` : sql`capture_status = ${params.status}, `}voided_at = ${now},
        capture_failure_code = NULL, updated_at = ${now}, payment_state_version = payment_state_version + 1
      WHERE id = ${params.paymentId} AND ${held}
        ${params.status === 'expired' ? sql`AND capture_by <= ${now}` : sql``}
      RETURNING ${sql.raw(columnsText(paymentColumns))}
    ), event AS (
      INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
      SELECT changed.id, 'payment.voided', changed.payment_state_version, ${sql.raw(snapshotSql('changed'))},
        ${now}::timestamptz
      FROM changed
    ), refund AS (${refundInsert(params.refund)})
    SELECT * FROM changed`.execute(db)
  ).rows
  if (row) countCommitted(db, 'payment.voided', [row])
  return row
}

/**
 * A refund of held money failed for good (nothing was sent; its trigger moved refunds -> authorized in
 * the same transaction): the payment says the money is held again, in ONE statement with its
 * `payment.authorized` event. A void or an expiry goes back to `authorized` (the merchant may void again,
 * or capture before `capture_by`); a partial capture stays `partially_captured` with its rest held.
 * Either way `capture_failure_code` is `transfer_failed` until the next void or capture. The expiry job
 * is due again at `capture_by` when that is still ahead (a hold whose own expiry failed is voided by the
 * merchant or operator once the cause is fixed, not retried in a loop).
 */
export async function holdAgainAfterFailedReturn(
  db: Db,
  params: { paymentId: string; now: Date },
): Promise<PaymentRow | undefined> {
  const { now } = params
  const [row] = (
    await sql<PaymentRow>`WITH changed AS (
      UPDATE payments SET
        capture_status = CASE WHEN capture_status = 'partially_captured' THEN capture_status ELSE 'authorized' END,
        voided_at = CASE WHEN capture_status = 'partially_captured' THEN voided_at ELSE NULL END,
        capture_failure_code = 'transfer_failed', updated_at = ${now},
        payment_state_version = payment_state_version + 1
      WHERE id = ${params.paymentId} AND capture_method = 'manual'
        AND capture_status IN ('voided', 'expired', 'partially_captured')
      RETURNING ${sql.raw(columnsText(paymentColumns))}
    ), event AS (
      INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
      SELECT changed.id, 'payment.authorized', changed.payment_state_version, ${sql.raw(snapshotSql('changed'))},
        ${now}::timestamptz
      FROM changed
    ), expiry AS (
      -- attempts stays: it is the job's fencing generation, which never goes back.
      UPDATE jobs SET state = 'pending', run_at = changed.capture_by, locked_until = NULL,
        last_error = NULL, result = NULL, armed_attempts = jobs.attempts, updated_at = ${now}
      FROM changed
      WHERE jobs.kind = ${captureExpiryJobKind} AND jobs.payment_id = changed.id
        AND changed.capture_status = 'authorized' AND changed.capture_by > ${now}
        AND jobs.state IN ('succeeded', 'failed')
    )
    SELECT * FROM changed`.execute(db)
  ).rows
  if (row) countCommitted(db, 'payment.authorized', [row])
  return row
}

/** The refund's row, inserted only when the statement's change happened (`changed` has its row). */
function refundInsert(refund: RefundValues | undefined) {
  if (!refund) return sql`SELECT 1`
  const columns = sql.join(Object.keys(refund).map((column) => sql.ref(column)))
  return sql`INSERT INTO refunds (${columns})
    SELECT ${columns} FROM jsonb_populate_record(NULL::refunds, ${JSON.stringify(refund)}::jsonb)
    WHERE EXISTS (SELECT 1 FROM changed)`
}
