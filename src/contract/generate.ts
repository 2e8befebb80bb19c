/**
 * Writes src/contract/generated/walletSchemas.ts: JSON Schemas of what the wallet core validates, generated
 * from the zod/mini schemas (the single source of truth), so the core checks responses and snapshots with
 * src/contract/validate.ts and does not bundle zod. Run with `npm run generate`; generated.test.ts fails
 * when the committed file no longer matches the zod schemas.
 */
import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import * as z from 'zod/mini'
import { FlowSnapshot } from '../flow/snapshotSchema.js'
import { ErrorResponse } from './common.js'
import { operationErrorCodes } from './endpoint.js'
import { type ServiceErrorCode, serviceErrorCodes } from './errorCodes.js'
import { ConfirmResponse, FetchResponse, GatewayPayment, OptionsResponse } from './gateway.js'
import { gatewayEndpoints } from './gatewayEndpoints.js'
import * as contract from './index.js'
import { CancelResponse, StatusResponse } from './status.js'
import { type JsonSchema, supportedKeywords } from './validate.js'

/** What the wallet core validates: every gateway response, error bodies and stored snapshots. */
export const walletSchemaSources: Record<string, z.ZodMiniType> = {
  GatewayPayment,
  StatusResponse,
  OptionsResponse,
  FetchResponse,
  ConfirmResponse,
  CancelResponse,
  ErrorResponse,
  FlowSnapshot,
}

const generatedPath = fileURLToPath(new URL('./generated/walletSchemas.ts', import.meta.url))

type Json = null | boolean | number | string | Json[] | { [key: string]: Json }

/** Annotations only: they never change what is valid. */
const annotations = ['$schema', 'title', 'description', 'examples']

/**
 * `io: 'input'`, not `'output'`: the core checks what arrives. For a `z.object` the output schema says
 * `additionalProperties: false` (zod strips unknown keys), which would refuse a response the moment the
 * service adds a field; the input schema leaves them allowed, as zod does, and the validator strips them.
 * `unrepresentable: 'throw'`, not `'any'`: a type JSON Schema cannot express (a date, a transform) must
 * stop generation, not become `{}` and accept anything.
 */
export function toWalletJsonSchema(schema: z.ZodMiniType, name: string): JsonSchema {
  const json = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'throw' }) as Record<string, Json>
  assertSupported(json, name)
  return json as JsonSchema
}

/**
 * Drops annotations and refuses what validate.ts would not enforce, so a new zod feature cannot quietly
 * loosen the checks.
 */
function assertSupported(node: Json, path: string): void {
  if (node === null || typeof node !== 'object' || Array.isArray(node)) {
    throw new Error(`${path}: expected a schema object`)
  }
  for (const key of Object.keys(node)) {
    if (annotations.includes(key)) delete node[key]
    else if (!(supportedKeywords as readonly string[]).includes(key)) {
      throw new Error(`${path}: the wallet validator does not support "${key}"; extend validate.ts first`)
    }
  }
  // z.int()'s safe-integer bounds: validate.ts reads every integer as a safe one, so they are not repeated.
  if (node.type === 'integer') {
    if (node.maximum === Number.MAX_SAFE_INTEGER) delete node.maximum
    if (node.minimum === Number.MIN_SAFE_INTEGER) delete node.minimum
  }
  const { type, properties, items, anyOf, oneOf, pattern, additionalProperties } = node
  if (additionalProperties !== undefined && additionalProperties !== false) {
    throw new Error(`${path}: only additionalProperties: false (z.strictObject) is supported`)
  }
  if (type === 'object' && (properties === null || typeof properties !== 'object')) {
    throw new Error(`${path}: an object schema needs properties (records are not supported)`)
  }
  if (type === 'array' && items === undefined) throw new Error(`${path}: an array schema needs items`)
  if (typeof pattern === 'string') new RegExp(pattern)
  for (const [key, child] of Object.entries((properties ?? {}) as Record<string, Json>)) {
    assertSupported(child, `${path}.${key}`)
  }
  if (items !== undefined) assertSupported(items, `${path}[]`)
  for (const [index, branch] of [...((anyOf ?? oneOf ?? []) as Json[])].entries()) {
    assertSupported(branch, `${path}|${index}`)
  }
}

export interface WalletSchemas {
  schemas: Record<string, JsonSchema>
  gatewayRoutes: Record<string, { method: string; path: string; response: JsonSchema }>
  /**
   * The codes the gateway client takes from an error body: those a gateway endpoint can answer, in
   * catalogue order. Any other code (a merchant API one, say) is off the contract: `invalid_response`.
   */
  gatewayErrorCodes: ServiceErrorCode[]
}

export function buildWalletSchemas(): WalletSchemas {
  const schemas = Object.fromEntries(
    Object.entries(walletSchemaSources).map(([name, schema]) => [name, toWalletJsonSchema(schema, name)]),
  )
  const gatewayRoutes = Object.fromEntries(
    Object.entries(gatewayEndpoints).map(([name, endpoint]) => {
      const response = Object.keys(walletSchemaSources).find(
        (key) => walletSchemaSources[key] === endpoint.response,
      )
      if (!response) throw new Error(`${name}: add its response schema to walletSchemaSources`)
      return [name, { method: endpoint.method, path: endpoint.path, response: schemas[response]! }]
    }),
  )
  const answerable = new Set(Object.values(gatewayEndpoints).flatMap(operationErrorCodes))
  const gatewayErrorCodes = serviceErrorCodes.filter((code) => answerable.has(code))
  return { schemas, gatewayRoutes, gatewayErrorCodes }
}

// --- emitting ---------------------------------------------------------------------------------------

const canonical = (node: unknown) => JSON.stringify(node)

/**
 * Parts used more than once (an amount, an option, a status) are emitted once, as a const named after
 * the contract schema they come from. Only objects, unions and enums are shared, and only when a contract
 * export gives them a name: an integer range named `UnixSeconds` would mislabel `etaS`.
 */
function sharedNames(): Map<string, string> {
  const names = new Map<string, string>()
  // A module namespace lists its exports sorted, so the first name wins deterministically.
  const candidates: [string, unknown][] = [
    ...Object.entries(walletSchemaSources),
    ...Object.entries(contract),
  ]
  for (const [name, value] of candidates) {
    if (typeof value !== 'object' || value === null || !('_zod' in value)) continue
    let json: JsonSchema
    try {
      json = toWalletJsonSchema(value as z.ZodMiniType, name)
    } catch {
      continue // a merchant-only schema the validator need not support
    }
    const named = json.properties || json.anyOf || json.oneOf || json.enum
    if (named && !names.has(canonical(json))) names.set(canonical(json), name)
  }
  return names
}

/** Occurrences in the schema graph once each shared part counts once: a part used only inside another is inlined. */
function countUses(roots: readonly JsonSchema[]): Map<string, number> {
  const uses = new Map<string, number>()
  const visit = (node: JsonSchema) => {
    const key = canonical(node)
    const count = (uses.get(key) ?? 0) + 1
    uses.set(key, count)
    if (count > 1) return
    for (const child of Object.values(node.properties ?? {})) visit(child)
    if (node.items) visit(node.items)
    for (const branch of node.anyOf ?? node.oneOf ?? []) visit(branch)
  }
  for (const root of roots) visit(root)
  return uses
}

const identifier = /^[A-Za-z_$][A-Za-z0-9_$]*$/

/** Marks a call bundlers may drop when its result is unused. */
const pureCall = '/* @__PURE__ */ '

/**
 * The keys `objectSchema` (validate.ts) would leave out of `required` to rebuild this node exactly, or
 * undefined when it cannot: not a plain object schema (a strict one, say), or `required` out of property
 * order. Such a node is emitted as it is.
 */
function optionalKeys(node: JsonSchema): string[] | undefined {
  if (node.type !== 'object' || !node.properties) return undefined
  if (Object.keys(node).some((key) => key !== 'type' && key !== 'properties' && key !== 'required')) {
    return undefined
  }
  const keys = Object.keys(node.properties)
  const required = node.required ?? []
  const inOrder = keys.filter((key) => required.includes(key))
  if (canonical(inOrder) !== canonical(required) || (node.required && !required.length)) return undefined
  return keys.filter((key) => !required.includes(key))
}

export function emitWalletSchemasModule(built: WalletSchemas = buildWalletSchemas()): string {
  const { schemas, gatewayRoutes, gatewayErrorCodes } = built
  const names = sharedNames()
  const rootOf = new Map<string, string>()
  for (const [name, schema] of Object.entries(schemas)) {
    const twin = rootOf.get(canonical(schema))
    if (twin) throw new Error(`${twin} and ${name} have the same JSON Schema: export one of them`)
    rootOf.set(canonical(schema), name)
    names.set(canonical(schema), name)
  }
  const uses = countUses(Object.values(schemas))
  const rootNames = new Set(Object.keys(schemas))
  const isConst = (key: string) => {
    const name = names.get(key)
    return name !== undefined && (rootNames.has(name) || (uses.get(key) ?? 0) > 1)
  }

  const declarations: string[] = []
  const declared = new Set<string>()
  const literal = (node: unknown, indent: string, self?: string): string => {
    if (node === null || typeof node !== 'object') return JSON.stringify(node)
    const key = canonical(node)
    if (key !== self && isConst(key)) return declare(key)
    const optional = Array.isArray(node) ? undefined : optionalKeys(node as JsonSchema)
    if (optional) {
      // Pure: a bundle that uses none of a module's schemas drops their calls too.
      const properties = literal((node as JsonSchema).properties, indent)
      return `${pureCall}objectSchema(${properties}${optional.length ? `, ${JSON.stringify(optional)}` : ''})`
    }
    const inner = `${indent}  `
    if (Array.isArray(node)) {
      if (node.every((item) => item === null || typeof item !== 'object')) return JSON.stringify(node)
      return `[\n${node.map((item) => inner + literal(item, inner)).join(',\n')},\n${indent}]`
    }
    const entries = Object.entries(node).map(
      ([name, value]) =>
        `${inner}${identifier.test(name) ? name : JSON.stringify(name)}: ${literal(value, inner)}`,
    )
    return `{\n${entries.join(',\n')},\n${indent}}`
  }
  const declare = (key: string): string => {
    const name = names.get(key)!
    if (!declared.has(name)) {
      declared.add(name)
      // Dependencies are declared first: `literal` declares what it references before this line is pushed.
      const body = literal(JSON.parse(key), '', key)
      const exported = rootNames.has(name) ? 'export ' : ''
      // A call is typed by objectSchema's signature; `as const` applies to literals only.
      const typed = body.startsWith(pureCall) ? '' : ' as const satisfies JsonSchema'
      declarations.push(`${exported}const ${name} = ${body}${typed}`)
    }
    return name
  }
  for (const schema of Object.values(schemas)) declare(canonical(schema))

  const routes = Object.entries(gatewayRoutes).map(
    ([name, route]) =>
      `  ${name}: { method: ${JSON.stringify(route.method)}, path: ${JSON.stringify(route.path)}, response: ${declare(canonical(route.response))} },`,
  )
  const declaresAny = (text: string) => declarations.some((declaration) => declaration.includes(text))
  const imports = [
    ...(declaresAny(' as const satisfies JsonSchema') ? ['type JsonSchema'] : []),
    ...(declaresAny('objectSchema(') ? ['objectSchema'] : []),
  ]
  return [
    '// Generated by src/contract/generate.ts from the zod/mini schemas (src/contract, src/flow/snapshotSchema.ts).',
    '// Do not edit: run `npm run generate`. src/contract/generated.test.ts fails when this file is stale.',
    "import type { ServiceErrorCode } from '../errorCodes.js'",
    `import { ${imports.join(', ')} } from '../validate.js'`,
    '',
    ...declarations.flatMap((declaration) => [declaration, '']),
    '/** Method, path and response schema of each wallet gateway endpoint (src/contract/gatewayEndpoints.ts). */',
    `export const gatewayRoutes = {\n${routes.join('\n')}\n} as const`,
    '',
    "/** The error codes a gateway endpoint can answer: its own and the request pipeline's (src/contract/endpoint.ts). */",
    `export const gatewayErrorCodes = ${JSON.stringify(gatewayErrorCodes)} as const satisfies readonly ServiceErrorCode[]`,
    '',
  ].join('\n')
}

if (process.argv[1] && fileURLToPath(import.meta.url) === resolve(process.argv[1])) {
  mkdirSync(dirname(generatedPath), { recursive: true })
  writeFileSync(generatedPath, emitWalletSchemasModule())
  console.log(`wrote ${generatedPath}`)
}
