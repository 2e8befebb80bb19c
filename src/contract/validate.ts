/**
 * A JSON Schema validator for exactly the subset `z.toJSONSchema` emits for the wallet core's schemas
 * (src/contract/generate.ts refuses to generate any other keyword, so nothing is silently ignored). It
 * lets the wallet core check responses and snapshots without bundling zod.
 *
 * It follows zod, not the letter of JSON Schema, where the two differ:
 * - an object drops keys its schema does not declare (zod's `z.object` strips them) and is rebuilt, as
 *   are arrays, so the result never aliases the input; `additionalProperties: false` (`z.strictObject`)
 *   rejects them instead;
 * - a property whose value is `undefined` counts as absent;
 * - `minLength`/`maxLength` count UTF-16 code units (`string.length`), as zod does;
 * - `oneOf` is read as `anyOf`: zod emits it only for discriminated unions, whose branches are disjoint;
 * - `number` excludes NaN and the infinities.
 * What JSON Schema cannot express is lost: zod refinements (e.g. the CAIP-2/10/19 checks) are not
 * applied, so this accepts a little more than zod. Fine for checking what the service sent: anything the
 * flow relies on is re-checked where it is used (action routing parses chain ids, the guard checks accounts).
 */

import { hasOwn } from './hasOwn.js'

export type JsonType = 'object' | 'array' | 'string' | 'number' | 'integer' | 'boolean' | 'null'

export interface JsonSchema {
  readonly type?: JsonType | readonly JsonType[]
  readonly properties?: { readonly [key: string]: JsonSchema }
  readonly required?: readonly string[]
  readonly additionalProperties?: false
  readonly items?: JsonSchema
  readonly enum?: readonly (string | number | boolean | null)[]
  readonly const?: string | number | boolean | null
  readonly anyOf?: readonly JsonSchema[]
  readonly oneOf?: readonly JsonSchema[]
  readonly pattern?: string
  readonly minLength?: number
  readonly maxLength?: number
  readonly minimum?: number
  readonly maximum?: number
}

/** The keywords above: the generator checks its output against this list. */
export const supportedKeywords: readonly (keyof JsonSchema)[] = [
  'type',
  'properties',
  'required',
  'additionalProperties',
  'items',
  'enum',
  'const',
  'anyOf',
  'oneOf',
  'pattern',
  'minLength',
  'maxLength',
  'minimum',
  'maximum',
]

/**
 * An object schema whose properties are all required except the `optional` ones, in `z.toJSONSchema`'s
 * form (`required` in property order, left out when empty). The generated schemas are written with it:
 * the wallet core ships each property name once instead of again in `required`.
 */
export function objectSchema<const P extends { readonly [key: string]: JsonSchema }>(
  properties: P,
  optional: readonly (keyof P & string)[] = [],
): { readonly type: 'object'; readonly properties: P; readonly required?: readonly (keyof P & string)[] } {
  const required = Object.keys(properties).filter((key) => !(optional as readonly string[]).includes(key))
  return required.length ? { type: 'object', properties, required } : { type: 'object', properties }
}

export interface Issue {
  /** Dotted, like the service's `params_validation` issues: `options.0.amount.value`. */
  path: string
  message: string
}

export type ParseResult<T> = { ok: true; value: T } | { ok: false; issues: Issue[] }

/** Turns untrusted JSON into a `T`, or says why it is not one. */
export type Parse<T> = (json: unknown) => ParseResult<T>

export function validate(schema: JsonSchema, value: unknown): ParseResult<unknown> {
  const issues: Issue[] = []
  const result = check(schema, value, '', issues)
  return issues.length ? { ok: false, issues } : { ok: true, value: result }
}

/**
 * A `Parse<T>` for a generated schema. `T` is the zod type the schema was generated from: the staleness
 * test of the generated module is what makes this assertion hold.
 */
export function parser<T>(schema: JsonSchema): Parse<T> {
  return (json) => validate(schema, json) as ParseResult<T>
}

function check(schema: JsonSchema, value: unknown, path: string, issues: Issue[]): unknown {
  const fail = (message: string) => {
    issues.push({ path, message })
    return value
  }
  const union = schema.anyOf ?? schema.oneOf
  if (union) {
    // The branch that came closest explains the failure best; with a nullable object, that is the object.
    let closest: Issue[] = []
    for (const [at, branch] of union.entries()) {
      const found: Issue[] = []
      const result = check(branch, value, path, found)
      if (!found.length) return result
      if (!at || found.length < closest.length) closest = found
    }
    issues.push(...closest)
    return value
  }

  const kind =
    value === null
      ? 'null'
      : Array.isArray(value)
        ? 'array'
        : typeof value === 'number'
          ? Number.isSafeInteger(value)
            ? 'integer'
            : Number.isFinite(value)
              ? 'number'
              : 'non-finite number'
          : typeof value
  const types = schema.type === undefined ? undefined : ([] as JsonType[]).concat(schema.type)
  if (types && !types.some((type) => type === kind || (type === 'number' && kind === 'integer'))) {
    return fail(`Expected ${types.join(' or ')}, got ${kind}.`)
  }
  if (schema.const !== undefined && value !== schema.const) {
    return fail(`Expected ${JSON.stringify(schema.const)}.`)
  }
  if (schema.enum && !schema.enum.includes(value as string)) {
    return fail(`Expected one of ${schema.enum.join(', ')}.`)
  }
  if (typeof value === 'string') {
    if (value.length < (schema.minLength ?? 0)) fail(`Expected at least ${schema.minLength} characters.`)
    if (value.length > (schema.maxLength ?? Infinity))
      fail(`Expected at most ${schema.maxLength} characters.`)
    if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(value)) {
      fail(`Expected a string matching ${schema.pattern}.`)
    }
  }
  if (typeof value === 'number') {
    if (value < (schema.minimum ?? -Infinity)) fail(`Expected at least ${schema.minimum}.`)
    if (value > (schema.maximum ?? Infinity)) fail(`Expected at most ${schema.maximum}.`)
  }
  if (schema.items && Array.isArray(value)) {
    const { items } = schema
    return value.map((item, index) => check(items, item, join(path, index), issues))
  }
  if (schema.properties && kind === 'object') {
    const input = value as Record<string, unknown>
    const output: Record<string, unknown> = {}
    for (const [key, property] of Object.entries(schema.properties)) {
      if (input[key] !== undefined) output[key] = check(property, input[key], join(path, key), issues)
      else if (schema.required?.includes(key)) issues.push({ path: join(path, key), message: 'Required.' })
    }
    if (schema.additionalProperties === false) {
      for (const key of Object.keys(input)) {
        if (!hasOwn(schema.properties, key)) issues.push({ path: join(path, key), message: 'Unknown key.' })
      }
    }
    return output
  }
  return value
}

function join(path: string, key: string | number): string {
  return path ? `${path}.${key}` : String(key)
}
