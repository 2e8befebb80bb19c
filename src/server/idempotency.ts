import { PayError } from '../errors/PayError.js'
import type { AuthContext } from './context.js'
import { fail, renderError } from './errors.js'
import { sha256Hex } from './ids.js'
import type { Db } from './store/db.js'

/**
 * Idempotency in PostgreSQL, scoped to (partner, mode, key).
 *
 * The record row is inserted (committed) first, then locked with FOR UPDATE NOWAIT inside the
 * transaction that runs the handler and stores its response. So:
 * - a second request while the first runs cannot take the lock: `409 idempotency_conflict`;
 * - the handler's writes and the stored response commit together, or neither does;
 * - a crashed request leaves an unlocked `in_flight` row, which the next retry simply runs.
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
  const scope = { partner_id: auth.partnerId, mode: auth.mode, key }
  const fresh = {
    fingerprint: options.fingerprint,
    state: 'in_flight' as const,
    response_status: null,
    response_body: null,
    response_headers: null,
    locked_until: expiresAt,
    created_at: now,
    expires_at: expiresAt,
  }
  await db
    .insertInto('idempotency_keys')
    .values({ ...scope, ...fresh })
    .onConflict((oc) => oc.columns(['partner_id', 'mode', 'key']).doNothing())
    .execute()

  const trx = await db.startTransaction().execute()
  let committed = false
  try {
    const record = await trx
      .selectFrom('idempotency_keys')
      .selectAll()
      .where('partner_id', '=', auth.partnerId)
      .where('mode', '=', auth.mode)
      .where('key', '=', key)
      .forUpdate()
      .noWait()
      .executeTakeFirst()
      .catch((error: unknown) => {
        // 55P03 lock_not_available: the first request with this key is still running.
        if ((error as { code?: string }).code === '55P03') {
          fail('idempotency_conflict', 'A request with this Idempotency-Key is still in progress.')
        }
        throw error
      })
    const finish = (db: Db, status: number, body: string) =>
      db
        .updateTable('idempotency_keys')
        .set({ state: 'done', response_status: status, response_body: body })
        .where('partner_id', '=', auth.partnerId)
        .where('mode', '=', auth.mode)
        .where('key', '=', key)
        .execute()

    if (!record || record.expires_at.getTime() <= now.getTime()) {
      // Expired (or swept between our insert and select): the key starts a new life.
      await trx
        .insertInto('idempotency_keys')
        .values({ ...scope, ...fresh })
        .onConflict((oc) => oc.columns(['partner_id', 'mode', 'key']).doUpdateSet(fresh))
        .execute()
    } else if (record.fingerprint !== options.fingerprint) {
      fail('idempotency_conflict', 'This Idempotency-Key was used with a different request.')
    } else if (record.state === 'done') {
      await trx.rollback().execute()
      committed = true
      return { replayed: true, stored: { status: record.response_status!, body: record.response_body! } }
    }

    const savepoint = await trx.savepoint('handler').execute()
    let result: T
    try {
      result = await options.handler(savepoint)
    } catch (error) {
      const rendered = error instanceof PayError ? renderError(error) : undefined
      if (!rendered || rendered.status >= 500) throw error
      // A refusal is the outcome of this key too: undo the handler's writes, keep the answer.
      await savepoint.rollbackToSavepoint('handler').execute()
      await finish(trx, rendered.status, JSON.stringify(rendered.body))
      await trx.commit().execute()
      committed = true
      throw error
    }
    await finish(savepoint, options.successStatus, JSON.stringify(result))
    await trx.commit().execute()
    committed = true
    return { replayed: false, status: options.successStatus, result }
  } finally {
    if (!committed)
      await trx
        .rollback()
        .execute()
        .catch(() => {})
  }
}

/** Deletes expired records; safe to call from any instance at any time. */
export async function sweepIdempotencyKeys(db: Db, now: Date): Promise<number> {
  const result = await db.deleteFrom('idempotency_keys').where('expires_at', '<', now).executeTakeFirst()
  return Number(result.numDeletedRows)
}
