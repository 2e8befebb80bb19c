import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { toWalletJsonSchema, walletSchemaSources } from './generate.js'
import * as generated from './generated/walletSchemas.js'
import { samples } from './samples.js'
import { type JsonSchema, objectSchema, validate } from './validate.js'

// The generated module's schemas: everything it exports but the gateway's routes and error codes.
const { gatewayRoutes: _routes, gatewayErrorCodes: _codes, ...schemaExports } = generated
const jsonSchemas = schemaExports as Record<string, JsonSchema>
const wallet = Object.entries(walletSchemaSources)

/**
 * The one allowed difference: JSON Schema cannot carry zod refinements (the CAIP checks), so the validator
 * may accept a value zod refuses only when every zod issue is a refinement's (`custom`).
 */
function onlyRefinementIssues(issues: readonly z.core.$ZodIssue[]): boolean {
  return issues.every((issue) =>
    issue.code === 'invalid_union' ? issue.errors.some(onlyRefinementIssues) : issue.code === 'custom',
  )
}

/** Validator and zod agree, up to refinements; when both accept, they return the same value. */
function expectAgreement(name: string, value: unknown): void {
  const schema = walletSchemaSources[name]!
  const byZod = z.safeParse(schema, value)
  const byValidator = validate(jsonSchemas[name]!, value)
  if (byZod.success) {
    expect(byValidator).toEqual({ ok: true, value: byZod.data })
  } else if (byValidator.ok) {
    expect(onlyRefinementIssues(byZod.error.issues), JSON.stringify(byZod.error.issues)).toBe(true)
  }
}

describe('validate', () => {
  it('covers every schema the wallet core validates', () => {
    expect(Object.keys(jsonSchemas)).toEqual(wallet.map(([name]) => name))
  })

  const gatewaySamples = samples.filter(([name]) => name in walletSchemaSources)
  it('is exercised by the contract samples of each gateway response', () => {
    expect(gatewaySamples.map(([name]) => name).sort()).toEqual(
      wallet
        .map(([name]) => name)
        .filter((name) => name !== 'FlowSnapshot')
        .sort(),
    )
  })
  describe.each(gatewaySamples)('%s samples', (name, _schema, valid, invalid) => {
    it.each(valid.map((v) => [v]))('accepts %j as zod does', (value) => {
      expect(validate(jsonSchemas[name]!, value).ok).toBe(true)
      expectAgreement(name, value)
    })
    it.each(invalid.map((v) => [v]))('rejects %j as zod does', (value) => {
      expect(validate(jsonSchemas[name]!, value).ok).toBe(false)
      expectAgreement(name, value)
    })
  })

  it('explains what is wrong, with dotted paths', () => {
    const result = validate(jsonSchemas.OptionsResponse!, {
      options: [{ id: 'o', account: 'a', amount: { unit: 'u', value: '01' }, etaS: 1.5, expiresAt: 1 }],
      collectData: null,
    })
    expect(result).toEqual({
      ok: false,
      issues: [
        { path: 'options.0.amount.value', message: 'Expected a string matching ^(0|[1-9][0-9]{0,38})$.' },
        { path: 'options.0.amount.display', message: 'Required.' },
        { path: 'options.0.etaS', message: 'Expected integer, got number.' },
        { path: 'options.0.actions', message: 'Required.' },
        { path: 'collectData', message: 'Expected object, got null.' },
      ],
    })
  })

  it('drops undeclared keys into a fresh value, never aliasing the input', () => {
    const input = { status: 'processing', isFinal: false, pollInMs: null, extra: { deep: 1 } }
    const result = validate(jsonSchemas.StatusResponse!, input)
    expect(result).toEqual({ ok: true, value: { status: 'processing', isFinal: false, pollInMs: null } })
    const snapshotLike = { items: [1, 2] }
    const copied = validate(
      { type: 'object', properties: { items: { type: 'array', items: {} } } },
      snapshotLike,
    )
    expect(copied.ok && copied.value).toEqual(snapshotLike)
    expect(copied.ok && (copied.value as typeof snapshotLike).items).not.toBe(snapshotLike.items)
  })

  it('rejects undeclared keys of a strict object, non-finite numbers and unknown variants', () => {
    const strict: JsonSchema = {
      type: 'object',
      properties: { a: { type: 'number' } },
      additionalProperties: false,
    }
    expect(validate(strict, { a: 1, b: 2 })).toEqual({
      ok: false,
      issues: [{ path: 'b', message: 'Unknown key.' }],
    })
    expect(validate(strict, { a: Number.NaN }).ok).toBe(false)
    expect(validate(strict, { a: Number.POSITIVE_INFINITY }).ok).toBe(false)
    expect(
      validate(jsonSchemas.FetchResponse!, { actions: [{ type: 'build', build: { data: 'x' } }] }),
    ).toEqual({
      ok: false,
      issues: [
        { path: 'actions.0.type', message: 'Expected "walletRpc".' },
        { path: 'actions.0.walletRpc', message: 'Required.' },
      ],
    })
  })
})

describe('validate: the documented looseness', () => {
  it('accepts what only a zod refinement refuses (a malformed CAIP-2 chain id); routing refuses it later', () => {
    const response = {
      actions: [
        { type: 'walletRpc', walletRpc: { chainId: 'eip155', method: 'personal_sign', params: '[]' } },
      ],
    }
    expect(validate(jsonSchemas.FetchResponse!, response).ok).toBe(true)
    const byZod = z.safeParse(walletSchemaSources.FetchResponse!, response)
    expect(byZod.error?.issues.map((issue) => issue.code)).toEqual(['custom'])
  })
})

// --- property tests against zod ---------------------------------------------------------------------

/**
 * Strings that pass the refinements JSON Schema cannot carry (CAIP ids, amount units), by property name,
 * so generated values often satisfy zod too.
 */
const wellFormed: Record<string, readonly string[]> = {
  chainId: ['eip155:1', 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'],
  unit: ['iso4217/USD', 'caip19/eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'],
  asset: ['eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'],
  spender: ['eip155:1:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48'],
}

/**
 * Values shaped by a JSON Schema: mostly valid but for the refinements, often with undeclared keys, and
 * with values at and just past each bound.
 */
function shapedBy(schema: JsonSchema, key = ''): fc.Arbitrary<unknown> {
  const union = schema.anyOf ?? schema.oneOf
  if (union) return fc.oneof(...union.map((branch) => shapedBy(branch, key)))
  if (schema.const !== undefined) return fc.constant(schema.const)
  if (schema.enum)
    return fc.oneof({ arbitrary: fc.constantFrom(...schema.enum), weight: 8 }, fc.constant('other'))
  const types = ([] as string[]).concat(schema.type ?? [])
  if (types.length > 1) {
    return fc.oneof(...types.map((type) => shapedBy({ ...schema, type } as JsonSchema, key)))
  }
  switch (types[0]) {
    case 'null':
      return fc.constant(null)
    case 'boolean':
      return fc.boolean()
    case 'integer':
    case 'number': {
      const min = schema.minimum ?? -(2 ** 53 - 1)
      const max = schema.maximum ?? 2 ** 53 - 1
      const integers = fc.oneof(
        { arbitrary: fc.bigInt({ min: BigInt(min), max: BigInt(max) }).map(Number), weight: 8 },
        fc.constantFrom(min, max, min - 1, max + 1),
      )
      return types[0] === 'integer' ? integers : fc.oneof(integers, fc.double({ min, max, noNaN: true }))
    }
    case 'string': {
      if (schema.pattern) {
        return fc.oneof({ arbitrary: fc.stringMatching(new RegExp(schema.pattern)), weight: 8 }, fc.string())
      }
      const { minLength = 0, maxLength } = schema
      const bounds = [minLength, Math.max(0, minLength - 1), ...(maxLength ? [maxLength, maxLength + 1] : [])]
      const any = fc.oneof(
        { arbitrary: fc.string({ minLength, maxLength: Math.min(maxLength ?? 40, 40) }), weight: 8 },
        fc.constantFrom(...bounds).map((length) => 'x'.repeat(length)),
      )
      const hints = wellFormed[key]
      return hints
        ? fc.oneof({ arbitrary: fc.constantFrom(...hints), weight: 8 }, { arbitrary: any, weight: 1 })
        : any
    }
    case 'array':
      return fc.array(shapedBy(schema.items!, key), { maxLength: 3 })
    case 'object': {
      const properties = Object.entries(schema.properties!)
      const record = fc.record(
        Object.fromEntries(properties.map(([name, property]) => [name, shapedBy(property, name)])),
        { requiredKeys: [...(schema.required ?? [])] },
      )
      const undeclared = fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), {
        maxKeys: 2,
      })
      return fc.oneof(
        record,
        fc.tuple(undeclared, record).map(([extra, value]) => ({ ...extra, ...value })),
      )
    }
    default:
      return fc.jsonValue()
  }
}

/** One damage at a random place of a value: a replaced node (any JSON) or a removed key. */
function damaged(values: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> {
  return fc
    .tuple(values, fc.nat(), fc.jsonValue({ maxDepth: 2 }), fc.boolean())
    .map(([value, pick, replacement, remove]) => {
      const copy = structuredClone(value)
      const places: [Record<string | number, unknown>, string | number][] = []
      const walk = (node: unknown) => {
        if (node === null || typeof node !== 'object') return
        for (const [key, child] of Object.entries(node)) {
          places.push([node as Record<string, unknown>, Array.isArray(node) ? Number(key) : key])
          walk(child)
        }
      }
      walk(copy)
      if (places.length === 0) return replacement
      const [parent, key] = places[pick % places.length]!
      if (remove && !Array.isArray(parent)) delete parent[key]
      else parent[key] = replacement
      return copy
    })
}

describe.each(wallet)('%s: validator against zod', (name) => {
  const shaped = shapedBy(jsonSchemas[name]!)
  const values = fc.oneof(shaped, damaged(shaped))

  it('accepts whatever zod accepts (same value out), and rejects only what zod rejects', () => {
    fc.assert(
      fc.property(values, (value) => expectAgreement(name, value)),
      { numRuns: 300 },
    )
  })

  it('is tested on values zod accepts as well as on values it rejects', () => {
    const verdicts = fc
      .sample(values, { numRuns: 600, seed: 42 })
      .map((v) => z.safeParse(walletSchemaSources[name]!, v).success)
    expect(verdicts.filter(Boolean).length).toBeGreaterThan(30)
    expect(verdicts.filter((ok) => !ok).length).toBeGreaterThan(30)
  })
})

describe('objectSchema', () => {
  it("builds zod's JSON Schema of an object: required in property order, left out when empty", () => {
    const string = { type: 'string' } as const
    const cases: [z.ZodMiniType, JsonSchema][] = [
      [z.object({ a: z.string(), b: z.string() }), objectSchema({ a: string, b: string })],
      [
        z.object({ a: z.optional(z.string()), b: z.string(), c: z.optional(z.string()) }),
        objectSchema({ a: string, b: string, c: string }, ['a', 'c']),
      ],
      [z.object({ a: z.optional(z.string()) }), objectSchema({ a: string }, ['a'])],
    ]
    for (const [zod, built] of cases) expect(built).toEqual(toWalletJsonSchema(zod, 'Test'))
  })
})
