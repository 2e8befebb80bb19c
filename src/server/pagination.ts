import { type SelectQueryBuilder, sql } from 'kysely'
import { validationError } from './errors.js'

/** Keyset position: the (created_at, id) of the last item of a page. Opaque to callers. */
export interface Cursor {
  createdAt: Date
  id: string
}

export function encodeCursor(row: { created_at: Date; id: string }): string {
  return Buffer.from(JSON.stringify([row.created_at.toISOString(), row.id])).toString('base64url')
}

export function decodeCursor(text: string): Cursor {
  try {
    const value = JSON.parse(Buffer.from(text, 'base64url').toString('utf8')) as unknown
    if (
      Array.isArray(value) &&
      value.length === 2 &&
      typeof value[0] === 'string' &&
      typeof value[1] === 'string'
    ) {
      const createdAt = new Date(value[0])
      // encodeCursor writes a stored timestamp as toISOString(), a four-digit year. A date that is not
      // (year 200000 BC, say) was never issued here, and PostgreSQL would refuse it with a 500.
      if (
        !Number.isNaN(createdAt.getTime()) &&
        createdAt.toISOString() === value[0] &&
        /^\d{4}-/.test(value[0])
      )
        return { createdAt, id: value[1] }
    }
  } catch {
    // falls through to the validation error
  }
  throw validationError([{ path: 'query.cursor', message: 'Invalid cursor.' }])
}

/** Narrows a list to the rows after `cursor` (if any) in keyset order: `(created_at, id) < (cursor)`. */
export function afterCursor<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  cursor: string | undefined,
): SelectQueryBuilder<DB, TB, O> {
  if (cursor === undefined) return query
  const { createdAt, id } = decodeCursor(cursor)
  return query.where(sql<boolean>`(created_at, id) < (${createdAt}, ${id})`)
}

/** Keyset order, newest first, and `limit + 1` rows so that `page` knows whether another page follows. */
export function keysetPage<DB, TB extends keyof DB, O>(
  query: SelectQueryBuilder<DB, TB, O>,
  limit: number,
): SelectQueryBuilder<DB, TB, O> {
  return query
    .orderBy(sql.ref('created_at'), 'desc')
    .orderBy(sql.ref('id'), 'desc')
    .limit(limit + 1)
}

/** Fetches `limit + 1` rows to know whether another page follows. */
export function page<R extends { created_at: Date; id: string }>(
  rows: R[],
  limit: number,
): { items: R[]; nextCursor: string | null } {
  const items = rows.slice(0, limit)
  const last = items.at(-1)
  return { items, nextCursor: rows.length > limit && last ? encodeCursor(last) : null }
}

/** `%`, `_` and `\` match themselves in a LIKE pattern. */
export function likeEscape(text: string): string {
  return text.replace(/[\\%_]/g, (c) => `\\${c}`)
}
