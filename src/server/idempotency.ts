import { type Insertable, type RawBuilder, sql } from 'kysely'
import { PayError } from '../errors/PayError.js'
import type { AuthContext } from './context.js'
import { fail, renderError } from './errors.js'
import { sha256Hex } from './ids.js'
import type { Db } from './store/db.js'
import { identifier } from './store/identifiers.js'
import { executePrepared } from './store/prepared.js'
import type { Database } from './store/schema.js'

/**
 * Idempotency in PostgreSQL, scoped to (partner, mode, key).
 *
 * Most routes run in one transaction per request (runIdempotent): a non-blocking advisory lock on the
 * key (taken in the same statement that reads the stored record), the handler's writes, then the
 * record stored as `done` with the response. So:
 * - a second request while the first runs cannot take the lock: `409 idempotency_conflict`;
 * - the handler's writes and the stored response commit together, or neither does;
 * - a crashed request holds nothing (the lock and its writes die with its connection), so the next retry
 *   simply runs; an `in_flight` row (older versions committed one first) counts as no answer.
 * The read shares a snapshot taken just before the lock, so a request that finished in between is not
 * seen there; the final write only replaces a record that has no live answer, and when it finds one the
 * handler's work is rolled back and that answer is used instead.
 *
 * A route whose write is one statement it can decide before writing (payment creation's INSERT, test
 * mode's confirm) does all of that in a single statement instead (runIdempotentPlan with a
 * PlannedWrite), with the same answers.
 */

export interface StoredResponse {
  status: number
  body: string
}

export type IdempotentOutcome<T> =
  | { replayed: false; status: number; result: T }
  | { replayed: true; stored: StoredResponse }

export function checkIdempotencyKey(key: string): void {
  if (key.length < 1 || key.length > 255)
    fail('invalid_params', 'Idempotency-Key must be 1 to 255 characters.')
}

/** What makes two requests "the same": route, path parameters, merchant and body. */
export function fingerprint(parts: {
  route: string
  merchantId: string | null
  params: unknown
  body: unknown
}): string {
  return sha256Hex(JSON.stringify([parts.route, parts.merchantId, parts.params ?? null, parts.body ?? null]))
}

interface KeyScope {
  db: Db
  auth: AuthContext
  key: string
  fingerprint: string
  now: Date
  ttlSeconds: number
}

/** The stored-answer side of one (partner, mode, key), shared by both ways of running a request. */
function keyRecord(options: KeyScope) {
  const { db, auth, key, now } = options
  const expiresAt = new Date(now.getTime() + options.ttlSeconds * 1000)
  const answer = (status: number, body: string) => ({
    fingerprint: options.fingerprint,
    state: 'done' as const,
    response_status: status,
    response_body: body,
    response_headers: null,
    locked_until: expiresAt,
    created_at: now,
    expires_at: expiresAt,
  })

  /** Stores the answer unless a live one is already there; false when it was. */
  const store = async (executor: Db, status: number, body: string): Promise<boolean> => {
    const values = answer(status, body)
    // A unique-key upsert: fixed plan, run prepared (store/prepared.ts).
    const upsert = executor
      .insertInto('idempotency_keys')
      .values({ partner_id: auth.partnerId, mode: auth.mode, key, ...values })
      .onConflict((oc) =>
        oc
          .columns(['partner_id', 'mode', 'key'])
          .doUpdateSet(values)
          .where((eb) =>
            eb.or([eb('idempotency_keys.state', '<>', 'done'), eb('idempotency_keys.expires_at', '<=', now)]),
          ),
      )
      .returning('key')
    return (await executePrepared(executor, upsert.compile())).rows.length > 0
  }

  /** The live answer of the key, checked against this request, once another request stored it. */
  const storedAnswer = async (): Promise<IdempotentOutcome<never>> => {
    const record = await db
      .selectFrom('idempotency_keys')
      .select(['fingerprint', 'state', 'response_status', 'response_body', 'expires_at'])
      .where('partner_id', '=', auth.partnerId)
      .where('mode', '=', auth.mode)
      .where('key', '=', key)
      .executeTakeFirst()
    const outcome = record && answerOf(record, options.fingerprint, now)
    if (!outcome) inProgress()
    return outcome
  }

  /**
   * What the record read with the key's lock means: `409` when another request holds the lock, its
   * answer when that is live, undefined when there is none yet.
   */
  const settle = (read: RecordRead): IdempotentOutcome<never> | undefined => {
    if (!read.locked) inProgress()
    return read.fingerprint === null ? undefined : answerOf(read as StoredRecord, options.fingerprint, now)
  }

  // Partner ids and modes hold no colon, so this names one (partner, mode, key) only.
  const lockName = `caipay.idempotency:${auth.partnerId}:${auth.mode}:${key}`
  return { lockName, expiresAt, answer, store, storedAnswer, settle }
}

function inProgress(): never {
  fail('idempotency_conflict', 'A request with this Idempotency-Key is still in progress.')
}

/**
 * Stores a refusal as the key's answer, under the key's lock, and throws it; when the key already has a
 * live answer (or another request holds it), that answer (or `409`) instead.
 */
async function keepRefusal(
  options: KeyScope,
  record: ReturnType<typeof keyRecord>,
  error: unknown,
): Promise<IdempotentOutcome<never>> {
  const refusal = refusalOf(error)
  const read = await storeUnderLock(options, record, refusal.status, refusal.body)
  if (read.stored) throw error
  return record.settle(read) ?? record.storedAnswer()
}

/**
 * A refusal is the outcome of the key too: the `{status, body}` to store for a client error; anything
 * else (a bug, the database gone) is rethrown and stores nothing.
 */
function refusalOf(error: unknown): StoredResponse {
  const rendered = error instanceof PayError ? renderError(error) : undefined
  if (!rendered || rendered.status >= 500) throw error
  return { status: rendered.status, body: JSON.stringify(rendered.body) }
}

export async function runIdempotent<T>(
  options: KeyScope & { successStatus: number; handler: (trx: Db) => Promise<T> },
): Promise<IdempotentOutcome<T>> {
  const { db, auth, key } = options
  const record = keyRecord(options)

  const trx = await db.startTransaction().execute()
  let open = true
  const rollback = async () => {
    open = false
    await trx.rollback().execute()
  }
  try {
    const lockAndRead = sql<RecordRead>`
      SELECT l.locked, k.fingerprint, k.state, k.response_status, k.response_body, k.expires_at
      FROM (SELECT pg_try_advisory_xact_lock(hashtextextended(${record.lockName}, 0)) AS locked) l
      LEFT JOIN idempotency_keys k ON k.partner_id = ${auth.partnerId} AND k.mode = ${auth.mode} AND k.key = ${key}
    `
    const { rows } = await executePrepared(trx, lockAndRead.compile(trx))
    const known = record.settle(rows[0]!)
    if (known) {
      await rollback()
      return known
    }

    let result: T
    try {
      result = await options.handler(trx)
    } catch (error) {
      // Undo the handler's writes, keep the answer (unless another request's answer is there already).
      await rollback()
      return keepRefusal(options, record, error)
    }
    if (!(await record.store(trx, options.successStatus, JSON.stringify(result)))) {
      // Another request with this key finished between our read and our lock: its answer stands.
      await rollback()
      return record.storedAnswer()
    }
    await trx.commit().execute()
    open = false
    return { replayed: false, status: options.successStatus, result }
  } finally {
    if (open)
      await trx
        .rollback()
        .execute()
        .catch(() => {})
  }
}

/**
 * A write that is one INSERT known in full before it runs, with the response it yields: run as a planned
 * write (plannedInsertWrite), so with or without an Idempotency-Key it is a single statement.
 */
export type PlannedInsert<T> = {
  [K in keyof Database]: {
    table: K
    row: Insertable<Database[K]>
    /**
     * A condition on the database the insert needs (say, the merchant still exists), checked by the
     * same statement; when it does not hold, nothing is written and `refuse` throws the answer.
     */
    guard?: { holds: RawBuilder<boolean>; refuse: () => never }
    /**
     * A further `INSERT ... SELECT ... FROM inserted` run by the same statement, so it writes exactly
     * when the row is written (payment creation's event: the outbox row commits with its payment).
     * `inserted` is the CTE holding the inserted row, every column.
     */
    follow?: RawBuilder<unknown>
    /** A condition the statement reads back once it wrote (from `inserted`, `followed`), for afterInsert. */
    report?: RawBuilder<boolean>
    /** Called once the row is committed (not on a replay or a refusal). */
    afterInsert?: (reported: boolean) => void
    result: T
  }
}[keyof Database]

/** The planned insert as the CTE `inserted` (a row only when `gate` has one), then its follow-up insert. */
function insertCtes(plan: PlannedInsert<unknown>, gate: RawBuilder<unknown>) {
  const columns = sql.join(Object.keys(plan.row).map((column) => identifier(column)))
  const insert = sql`INSERT INTO ${sql.table(plan.table)} (${columns})
    SELECT ${sql.join(Object.values(plan.row))} FROM ${gate}${plan.follow ? sql` RETURNING *` : sql``}`
  return sql`inserted AS (${insert})${plan.follow ? sql`, followed AS (${plan.follow})` : sql``}`
}

/**
 * A write of one statement, decided before it runs, with the response it yields: a planned insert, or
 * any other write whose guard the statement itself can check (say, a payment's row locked in the state
 * a change needs). Under an Idempotency-Key it runs in the statement that stores the key's answer
 * (storeUnderLock), so the write and its answer commit together or not at all, with no transaction.
 */
export interface PlannedWrite<T> {
  /** CTEs the guard reads, `name AS (...)`, run first (a row lock taken here is held to the end). */
  before?: RawBuilder<unknown>
  /** Whether the write may run, as the statement sees it; when false nothing is written and `refuse` answers. */
  holds: RawBuilder<boolean>
  /** The write's CTEs, which write nothing unless the CTE `gate` holds a row. */
  write: (gate: RawBuilder<unknown>) => RawBuilder<unknown>
  /** Throws the answer for a guard that did not hold. */
  refuse: () => Promise<never>
  /** Called once the write is committed (not on a replay or a refusal). */
  afterWrite?: (reported: boolean) => void
  /** A condition the statement reads back once it wrote (from the write's CTEs), for afterWrite. */
  report?: RawBuilder<boolean>
  result: T
}

/** A planned insert as a planned write: its row and its follow-up insert, run when `gate` holds a row. */
export function plannedInsertWrite<T>(plan: PlannedInsert<T>): PlannedWrite<T> {
  return {
    holds: plan.guard ? plan.guard.holds : sql<boolean>`true`,
    write: (gate) => insertCtes(plan, gate),
    refuse: async () => plan.guard!.refuse(),
    ...(plan.afterInsert ? { afterWrite: plan.afterInsert } : {}),
    ...(plan.report ? { report: plan.report } : {}),
    result: plan.result,
  }
}

/**
 * What a planned write's `refuse` throws when its plan was made on what an earlier request read and the
 * statement found the database no longer so: nothing was written and nothing stored under the key (it is
 * not a refusal of the request), and the route plans again on fresh reads (definePlannedRoute).
 */
export class StalePlan extends Error {
  constructor() {
    super('The plan was made on a read the database no longer matches.')
    this.name = 'StalePlan'
  }
}

/** Runs a planned write without an Idempotency-Key: one statement, or the guard's refusal. */
export async function writePlanned<T>(db: Db, plan: PlannedWrite<T>): Promise<T> {
  const statement = sql<{
    written: boolean
    reported: boolean
  }>`WITH ${plan.before ? sql`${plan.before}, ` : sql``}permitted AS (
      SELECT 1 WHERE ${plan.holds}
    ), ${plan.write(sql`permitted`)}
    SELECT EXISTS (SELECT 1 FROM permitted) AS written, ${plan.report ?? sql`false`} AS reported`
  const { written, reported } = (await executePrepared(db, statement.compile(db))).rows[0]!
  if (!written) await plan.refuse()
  plan.afterWrite?.(reported)
  return plan.result
}

/**
 * What a route decides once it has read what it needs: one planned write, or work that needs a
 * transaction (`run`, given the transaction that also stores the key's answer; see runIdempotent).
 */
export type RoutePlan<T> = { write: PlannedWrite<T> } | { run: (trx: Db) => Promise<T> }

/** Runs a route's plan without an Idempotency-Key. */
export function runRoutePlan<T>(db: Db, plan: RoutePlan<T>): Promise<T> {
  return 'write' in plan ? writePlanned(db, plan.write) : plan.run(db)
}

/**
 * Runs a route's plan under an Idempotency-Key. A planned write is one statement with the key's answer;
 * a refusal, whether planning throws it or the write's guard finds it, is stored the same way, so every
 * answer is given under the key's lock, and a request that repeats a finished one gets that one's
 * answer even though its own checks would now refuse it.
 */
export async function runIdempotentPlan<T>(
  options: KeyScope & { successStatus: number; plan: () => Promise<RoutePlan<T>> },
): Promise<IdempotentOutcome<T>> {
  const record = keyRecord(options)
  const refuse = (error: unknown) => keepRefusal(options, record, error)

  let plan: RoutePlan<T>
  try {
    plan = await options.plan()
  } catch (error) {
    return refuse(error)
  }
  if ('run' in plan) return runIdempotent({ ...options, handler: plan.run })
  const { write } = plan
  const read = await storeUnderLock(
    options,
    record,
    options.successStatus,
    JSON.stringify(write.result),
    write,
  )
  if (read.stored) {
    write.afterWrite?.(read.reported)
    return { replayed: false, status: options.successStatus, result: write.result }
  }
  // The record as it was when the statement began: a live answer there is this request's answer.
  const known = record.settle(read)
  if (known) return known
  if (!read.allowed) {
    try {
      await write.refuse()
    } catch (error) {
      return refuse(error)
    }
  }
  // Another request with this key stored its answer after this statement began: that answer stands.
  return record.storedAnswer()
}

type LockedStore = RecordRead & { allowed: boolean; stored: boolean; reported: boolean }

/**
 * One statement: takes the key's advisory lock, reads the stored record, stores this answer (only over
 * a record with no live answer: expired, or left `in_flight` by this same request), and, given a plan,
 * writes only when its guard held and the answer was stored, so the write and its answer commit together
 * or not at all. The lock is held for the statement, so a request holding the key elsewhere makes it store
 * nothing (`locked` false). The read shows the record as it was when the statement began; a record
 * committed after that is still seen by ON CONFLICT, which then stores nothing.
 */
async function storeUnderLock(
  options: KeyScope,
  record: ReturnType<typeof keyRecord>,
  status: number,
  body: string,
  plan?: PlannedWrite<unknown>,
): Promise<LockedStore> {
  const { db, auth, key, now } = options
  const answer = record.answer(status, body)
  const statement = sql<LockedStore>`
    WITH ${plan?.before ? sql`${plan.before}, ` : sql``}attempt AS (
      SELECT pg_try_advisory_xact_lock(hashtextextended(${record.lockName}, 0)) AS locked,
        ${plan ? plan.holds : sql`true`} AS allowed
    ), stored AS (
      INSERT INTO idempotency_keys (partner_id, mode, key, fingerprint, state, response_status, response_body,
        locked_until, created_at, expires_at)
      SELECT ${auth.partnerId}, ${auth.mode}, ${key}, ${answer.fingerprint}, ${answer.state},
        ${answer.response_status}, ${answer.response_body}, ${answer.locked_until}, ${answer.created_at},
        ${answer.expires_at}
      FROM attempt WHERE locked AND allowed
      ON CONFLICT (partner_id, mode, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
        state = EXCLUDED.state, response_status = EXCLUDED.response_status,
        response_body = EXCLUDED.response_body, response_headers = NULL,
        locked_until = EXCLUDED.locked_until, created_at = EXCLUDED.created_at,
        expires_at = EXCLUDED.expires_at
      WHERE idempotency_keys.expires_at <= ${now}
        OR (idempotency_keys.state <> 'done' AND idempotency_keys.fingerprint = EXCLUDED.fingerprint)
      RETURNING 1
    )${plan ? sql`, ${plan.write(sql`stored`)}` : sql``}
    SELECT a.locked, a.allowed, EXISTS (SELECT 1 FROM stored) AS stored, ${plan?.report ?? sql`false`} AS reported,
      k.fingerprint, k.state, k.response_status, k.response_body, k.expires_at
    FROM attempt a
    LEFT JOIN idempotency_keys k ON k.partner_id = ${auth.partnerId} AND k.mode = ${auth.mode} AND k.key = ${key}
  `
  const { rows } = await executePrepared(db, statement.compile(db))
  return rows[0]!
}

interface StoredRecord {
  fingerprint: string
  state: 'in_flight' | 'done'
  response_status: number | null
  response_body: string | null
  expires_at: Date
}

type RecordRead = { locked: boolean } & { [K in keyof StoredRecord]: StoredRecord[K] | null }

/**
 * What a stored record means for this request: a replay, `409` for another request's key, or undefined
 * when it holds no live answer (expired, or an `in_flight` row of the same request).
 */
function answerOf(
  record: StoredRecord,
  fingerprint: string,
  now: Date,
): IdempotentOutcome<never> | undefined {
  if (record.expires_at.getTime() <= now.getTime()) return undefined
  if (record.fingerprint !== fingerprint) {
    fail('idempotency_conflict', 'This Idempotency-Key was used with a different request.')
  }
  if (record.state !== 'done') return undefined
  return { replayed: true, stored: { status: record.response_status!, body: record.response_body! } }
}

/** Deletes expired records; safe to call from any instance at any time. */
export async function sweepIdempotencyKeys(db: Db, now: Date): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<', now).executeTakeFirst()
  return Number(result.numDeletedRows)
}
