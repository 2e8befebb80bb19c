import { PayError } from '../errors/PayError.js'
import type { AuthContext } from './context.js'
import { fail, renderError } from './errors.js'
import { sha256Hex } from './ids.js'
import { openSecret, type SecretBox, sealSecret } from './secrets.js'
import { commitTransaction, type Db, startTransaction } from './store/db.js'
import { namedStatement } from './store/prepared.js'

/**
 * Idempotency in PostgreSQL, scoped to (partner, mode, key): the HTTP protocol of the `Idempotency-Key`
 * header, run by route.ts around a handler. One engine, runIdempotent, one transaction per request:
 * a non-blocking advisory lock on the key (taken by the statement that reads the stored record), the
 * handler's writes, then the record stored as `done` with the response. So:
 * - a second request while the first runs cannot take the lock: `409 idempotency_conflict`;
 * - the handler's writes and the stored response commit together, or neither does;
 * - a crashed request holds nothing (the lock and its writes die with its connection), so the next retry
 *   simply runs; an `in_flight` row (older versions committed one first) counts as no answer;
 * - a refusal (a client error the handler throws) is the key's answer too: the handler's writes are
 *   rolled back and the refusal is stored under the key's lock, so a retry gets the same refusal.
 * A statement's read shows the record as committed when the statement began; a record committed after
 * that is still seen by the store's ON CONFLICT, which then stores nothing, and that record's answer
 * is used instead.
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

export interface KeyScope {
  db: Db
  auth: AuthContext
  key: string
  fingerprint: string
  now: Date
  ttlSeconds: number
  /**
   * Seals stored answers (secrets.ts): an answer may carry a secret (a webhook endpoint's signing
   * secret), and a replay must return it, so it is kept, but never in plain text when a key is set.
   */
  box?: SecretBox | undefined
}

interface StoredRecord {
  fingerprint: string
  state: 'in_flight' | 'done'
  response_status: number | null
  response_body: string | null
  expires_at: Date
}

/** The key's record as a statement read it (all null: none), and whether it holds the key's lock. */
type RecordRead = { locked: boolean } & { [K in keyof StoredRecord]: StoredRecord[K] | null }

const recordColumns = 'k.fingerprint, k.state, k.response_status, k.response_body, k.expires_at'
// The lock is transaction-scoped: a statement outside a transaction holds it for itself only. Partner
// ids and modes hold no colon, so the lock's name ($1) names one (partner, mode, key) only.
const lockAndRecord = `(SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0)) AS locked) l
  LEFT JOIN idempotency_keys k ON k.partner_id = $2 AND k.mode = $3 AND k.key = $4`

/** Takes the key's lock and reads its record. */
const lockAndRead = namedStatement<RecordRead>(`SELECT l.locked, ${recordColumns} FROM ${lockAndRecord}`)

/**
 * Takes the key's lock (a transaction that holds it takes it again) and stores an answer, only over a
 * record with no live answer (expired, or left `in_flight` by this same request); reads the record as
 * it was before. `stored` false: the lock is held elsewhere, or a live answer is there.
 */
const lockAndStore = namedStatement<RecordRead & { stored: boolean }>(`WITH attempt AS (
    SELECT l.locked, ${recordColumns} FROM ${lockAndRecord}
  ), stored AS (
    INSERT INTO idempotency_keys (partner_id, mode, key, fingerprint, state, response_status, response_body,
      locked_until, created_at, expires_at)
    SELECT $2, $3, $4, $5, 'done', $6, $7, $8, $9, $8 FROM attempt WHERE locked
    ON CONFLICT (partner_id, mode, key) DO UPDATE SET fingerprint = EXCLUDED.fingerprint,
      state = EXCLUDED.state, response_status = EXCLUDED.response_status,
      response_body = EXCLUDED.response_body, response_headers = NULL,
      locked_until = EXCLUDED.locked_until, created_at = EXCLUDED.created_at,
      expires_at = EXCLUDED.expires_at
    WHERE idempotency_keys.expires_at <= $9
      OR (idempotency_keys.state <> 'done' AND idempotency_keys.fingerprint = EXCLUDED.fingerprint)
    RETURNING 1
  )
  SELECT attempt.*, EXISTS (SELECT 1 FROM stored) AS stored FROM attempt`)

/**
 * Runs `handler` under the key: its result, or the answer already stored for the key (a replay), or
 * `409 idempotency_conflict` while another request holds the key or when it was used for another request.
 */
export async function runIdempotent<T>(
  options: KeyScope & { successStatus: number; handler: (trx: Db) => Promise<T> },
): Promise<IdempotentOutcome<T>> {
  const { db, auth, key, now } = options
  const lockName = `caipay.idempotency:${auth.partnerId}:${auth.mode}:${key}`
  const scope = [lockName, auth.partnerId, auth.mode, key] as const
  const expiresAt = new Date(now.getTime() + options.ttlSeconds * 1000)
  const store = async (executor: Db, answer: StoredResponse) =>
    (
      await lockAndStore(
        executor,
        ...scope,
        options.fingerprint,
        answer.status,
        sealSecret(options.box, answer.body),
        expiresAt,
        now,
      )
    ).rows[0]!

  /** What a read under the lock means: `409` while another request holds the key, else its live answer. */
  const settle = (read: RecordRead): IdempotentOutcome<never> | undefined => {
    if (!read.locked) inProgress()
    return read.fingerprint === null
      ? undefined
      : answerOf(read as StoredRecord, options.fingerprint, now, options.box)
  }
  /** The answer another request stored after our read (a store that stored nothing found it). */
  const storedAnswer = async (): Promise<IdempotentOutcome<never>> => {
    const read = (await lockAndRead(db, ...scope)).rows[0]!
    const outcome =
      read.fingerprint === null
        ? undefined
        : answerOf(read as StoredRecord, options.fingerprint, now, options.box)
    if (!outcome) inProgress()
    return outcome
  }

  const trx = await startTransaction(db)
  let open = true
  const rollback = async () => {
    open = false
    await trx.rollback().execute()
  }
  try {
    const known = settle((await lockAndRead(trx, ...scope)).rows[0]!)
    if (known) {
      await rollback()
      return known
    }
    let result: T
    try {
      result = await options.handler(trx)
    } catch (error) {
      // Undo the handler's writes; store the refusal as the key's answer (unless another answer is there).
      await rollback()
      const stored = await store(db, refusalOf(error))
      if (stored.stored) throw error
      return settle(stored) ?? storedAnswer()
    }
    const stored = await store(trx, { status: options.successStatus, body: JSON.stringify(result) })
    if (!stored.stored) {
      await rollback()
      return settle(stored) ?? storedAnswer()
    }
    await commitTransaction(trx)
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

function inProgress(): never {
  fail('idempotency_conflict', 'A request with this Idempotency-Key is still in progress.')
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

/**
 * What a stored record means for this request: a replay, `409` for another request's key, or undefined
 * when it holds no live answer (expired, or an `in_flight` row of the same request).
 */
function answerOf(
  record: StoredRecord,
  fingerprint: string,
  now: Date,
  box: SecretBox | undefined,
): IdempotentOutcome<never> | undefined {
  if (record.expires_at.getTime() <= now.getTime()) return undefined
  if (record.fingerprint !== fingerprint) {
    fail('idempotency_conflict', 'This Idempotency-Key was used with a different request.')
  }
  if (record.state !== 'done') return undefined
  return {
    replayed: true,
    stored: { status: record.response_status!, body: openSecret(box, record.response_body!) },
  }
}

/** Deletes expired records; safe to call from any instance at any time. */
export async function sweepIdempotencyKeys(db: Db, now: Date): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<', now).executeTakeFirst()
  return Number(result.numDeletedRows)
}
