import { type RawBuilder, sql } from 'kysely'

/**
 * The fixed parts of hot statements (column lists, qualified columns, jsonb keys), built once as raw
 * text of our own identifiers. Building them with kysely's `sql.ref` / `sql.lit` on every request was
 * most of test mode's confirm statement's server CPU: 342 -> 110 µs per confirm once they were built once.
 * Only code constants go through here; a name that is not a plain lower-case identifier throws.
 */
const built = new Map<string, RawBuilder<unknown>>()

function once(key: string, text: () => string): RawBuilder<unknown> {
  let fragment = built.get(key)
  if (!fragment) {
    fragment = sql.raw(text())
    built.set(key, fragment)
  }
  return fragment
}

function quoted(name: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`Not a plain identifier: ${name}`)
  return `"${name}"`
}

/** `"table"."column"`, or `"column"`. */
export function identifier(...parts: string[]): RawBuilder<unknown> {
  return once(`i ${parts.join('.')}`, () => parts.map(quoted).join('.'))
}

/** A column's name as a string literal (a jsonb key). */
export function nameLiteral(name: string): RawBuilder<unknown> {
  return once(`l ${name}`, () => `'${quoted(name).slice(1, -1)}'`)
}

/** `"a", "b", ...`, each qualified by `alias` when given (`columns` is a constant list). */
export function columnList(columns: readonly string[], alias = ''): RawBuilder<unknown> {
  let byAlias = lists.get(columns)
  if (!byAlias) {
    byAlias = new Map()
    lists.set(columns, byAlias)
  }
  let list = byAlias.get(alias)
  if (!list) {
    const prefix = alias ? `${quoted(alias)}.` : ''
    list = sql.raw(columns.map((c) => prefix + quoted(c)).join(', '))
    byAlias.set(alias, list)
  }
  return list
}
const lists = new WeakMap<readonly string[], Map<string, RawBuilder<unknown>>>()

/** A fixed expression written once by `text` (from identifiers only), kept under `key`. */
export function fixedFragment<T>(key: string, text: () => string): RawBuilder<T> {
  return once(`f ${key}`, text) as RawBuilder<T>
}

export { quoted as quotedIdentifier }
