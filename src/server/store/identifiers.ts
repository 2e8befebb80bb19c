import { type RawBuilder, sql } from 'kysely'

/**
 * The fixed parts of hot statements (column lists, qualified columns, jsonb keys), built once as raw
 * text of our own identifiers. Built with kysely's `sql.ref` / `sql.lit` on every request, they were most
 * of the server CPU that building test mode's confirm statement took (`npx tsx bench/statementBuild.ts`).
 * Only code constants go through here; a name that is not a plain lower-case identifier throws, checked
 * on every call (before any cached fragment is returned).
 */

/** `name` quoted, once it is known to be a plain lower-case identifier. */
export function quotedIdentifier(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`Not a plain identifier: ${name}`)
  return `"${name}"`
}

const identifiers = new Map<string, RawBuilder<unknown>>()

/** `"table"."column"`, or `"column"`. */
export function identifier(...parts: string[]): RawBuilder<unknown> {
  const text = parts.map(quotedIdentifier).join('.')
  let fragment = identifiers.get(text)
  if (!fragment) {
    fragment = sql.raw(text)
    identifiers.set(text, fragment)
  }
  return fragment
}

const nameLiterals = new Map<string, RawBuilder<unknown>>()

/** A column's name as a string literal (a jsonb key). */
export function nameLiteral(name: string): RawBuilder<unknown> {
  quotedIdentifier(name)
  let fragment = nameLiterals.get(name)
  if (!fragment) {
    fragment = sql.raw(`'${name}'`)
    nameLiterals.set(name, fragment)
  }
  return fragment
}

/** Per constant column list (by identity: a key built from 30 names would cost what the cache saves), per alias. */
const columnLists = new WeakMap<readonly string[], Map<string, RawBuilder<unknown>>>()

/** `"a", "b", ...`, each qualified by `alias` when given; `columns` is a constant list. */
export function columnList(columns: readonly string[], alias = ''): RawBuilder<unknown> {
  let byAlias = columnLists.get(columns)
  if (!byAlias) {
    byAlias = new Map()
    columnLists.set(columns, byAlias)
  }
  let list = byAlias.get(alias)
  if (!list) {
    const prefix = alias ? `${quotedIdentifier(alias)}.` : ''
    list = sql.raw(columns.map((c) => prefix + quotedIdentifier(c)).join(', '))
    byAlias.set(alias, list)
  }
  return list
}
