import { sql } from 'kysely'
import { PayError } from '../errors/PayError.js'
import type { AuthContext } from './context.js'
import { fail, renderError } from './errors.js'
import { sha256Hex } from './ids.js'
import type { Db } from './store/db.js'

/**
 * Idempotency in PostgreSQL, scoped to (partner, mode, key).
 *
 * One transaction per request: a non-blocking advisory lock on the key (taken in the same statement that
 * reads the stored record), the handler's writes, then the record stored as `done` with the response.
 * So:
 * - a second request while the first runs cannot take the lock: `409 idempotency_conflict`;
 * - the handler's writes and the stored response commit together, or neither does;
 * - a crashed request holds nothing (the lock and its writes die with its connection), so the next retry
 *   simply runs; an `in_flight` row (older versions committed one first) counts as no answer.
 * The read shares a snapshot taken just before the lock, so a request that finished in between is not
 * seen there; the final write only replaces a record that has no live answer, and when it finds one the
 * handler's work is rolled back and that answer is used instead.
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

export async function runIdempotent<T>(options: {
  db: Db
  auth: AuthContext
  key: string
  fingerprint: string
  now: Date
  ttlSeconds: number
  successStatus: number
  handler: (trx: Db) => Promise<T>
}): Promise<IdempotentOutcome<T>> {
  const { db, auth, key, now } = options
  const expiresAt = new Date(now.getTime() + options.ttlSeconds * 1000)
  // Partner ids and modes hold no colon, so this names one (partner, mode, key) only.
  const lockName = `caipay.idempotency:${auth.partnerId}:${auth.mode}:${key}`

  /** Stores the answer unless a live one is already there; false when it was. */
  const store = async (executor: Db, status: number, body: string): Promise<boolean> => {
    const answer = {
      fingerprint: options.fingerprint,
      state: 'done' as const,
      response_status: status,
      response_body: body,
      response_headers: null,
      locked_until: expiresAt,
      created_at: now,
      expires_at: expiresAt,
    }
    const stored = await executor
      .insertInto('idempotency_keys')
      .values({ partner_id: auth.partnerId, mode: auth.mode, key, ...answer })
      .onConflict((oc) =>
        oc
          .columns(['partner_id', 'mode', 'key'])
          .doUpdateSet(answer)
          .where((eb) =>
            eb.or([eb('idempotency_keys.state', '<>', 'done'), eb('idempotency_keys.expires_at', '<=', now)]),
          ),
      )
      .returning('key')
      .executeTakeFirst()
    return stored !== undefined
  }

  /** The live answer of the key, checked against this request, once another request stored it. */
  const storedAnswer = async (): Promise<IdempotentOutcome<T>> => {
    const record = await db
      .selectFrom('idempotency_keys')
      .select(['fingerprint', 'state', 'response_status', 'response_body', 'expires_at'])
      .where('partner_id', '=', auth.partnerId)
      .where('mode', '=', auth.mode)
      .where('key', '=', key)
      .executeTakeFirst()
    const outcome = record && answerOf(record, options.fingerprint, now)
    if (!outcome) fail('idempotency_conflict', 'A request with this Idempotency-Key is still in progress.')
    return outcome
  }

  const trx = await db.startTransaction().execute()
  let open = true
  const rollback = async () => {
    open = false
    await trx.rollback().execute()
  }
  try {
    const { rows } = await sql<RecordRead>`
      SELECT l.locked, k.fingerprint, k.state, k.response_status, k.response_body, k.expires_at
      FROM (SELECT pg_try_advisory_xact_lock(hashtextextended(${lockName}, 0)) AS locked) l
      LEFT JOIN idempotency_keys k ON k.partner_id = ${auth.partnerId} AND k.mode = ${auth.mode} AND k.key = ${key}
    `.execute(trx)
    const read = rows[0]!
    if (!read.locked) {
      fail('idempotency_conflict', 'A request with this Idempotency-Key is still in progress.')
    }
    const known =
      read.fingerprint === null ? undefined : answerOf(read as StoredRecord, options.fingerprint, now)
    if (known) {
      await rollback()
      return known
    }

    let result: T
    try {
      result = await options.handler(trx)
    } catch (error) {
      const rendered = error instanceof PayError ? renderError(error) : undefined
      if (!rendered || rendered.status >= 500) throw error
      // A refusal is the outcome of this key too: undo the handler's writes, keep the answer.
      await rollback()
      if (await store(db, rendered.status, JSON.stringify(rendered.body))) throw error
      return storedAnswer()
    }
    if (!(await store(trx, options.successStatus, JSON.stringify(result)))) {
      // Another request with this key finished between our read and our lock: its answer stands.
      await rollback()
      return storedAnswer()
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
