import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { walletSchemaSources } from './generate.js'
import * as generated from './generated/walletSchemas.js'
import { samples } from './samples.js'
import { type JsonSchema, validate } from './validate.js'

const jsonSchemas = generated as unknown as Record<string, JsonSchema>
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
    expect(Object.keys(jsonSchemas).filter((name) => name !== 'gatewayRoutes')).toEqual(
      wallet.map(([name]) => name),
    )
  })

  const gatewaySamples = samples.filter(([name]) => name in walletSchemaSources)
  it('is exercised by the contract samples of each gateway response', () => {
    expect(gatewaySamples.map(([name]) => name).sort()).toEqual(
      wallet.map(([name]) => name).filter((name) => name !== 'FlowSnapshot').sort(),
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
    const copied = validate({ type: 'object', properties: { items: { type: 'array', items: {} } } }, snapshotLike)
    expect(copied.ok && copied.value).toEqual(snapshotLike)
    expect(copied.ok && (copied.value as typeof snapshotLike).items).not.toBe(snapshotLike.items)
  })

  it('rejects undeclared keys of a strict object, non-finite numbers and unknown variants', () => {
    const strict: JsonSchema = { type: 'object', properties: { a: { type: 'number' } }, additionalProperties: false }
    expect(validate(strict, { a: 1, b: 2 })).toEqual({ ok: false, issues: [{ path: 'b', message: 'Unknown key.' }] })
    expect(validate(strict, { a: Number.NaN }).ok).toBe(false)
    expect(validate(strict, { a: Number.POSITIVE_INFINITY }).ok).toBe(false)
    expect(validate(jsonSchemas.FetchResponse!, { actions: [{ type: 'build', build: { data: 'x' } }] })).toEqual({
      ok: false,
      issues: [{ path: 'actions.0.type', message: 'Expected "walletRpc".' }],
    })
  })
})

// --- property tests against zod ---------------------------------------------------------------------

/** Strings that pass the CAIP and amount-unit refinements, so generated values often satisfy zod too. */
const wellFormed = [
  'eip155:1',
  'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp',
  'eip155:1:0x1111111111111111111111111111111111111111',
  'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:9WzDXwBbmkg8ZTbNMqUxvQRAyrZzDsGYdLVL9zYtAWWM',
  'eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
  'caip19/eip155:1/erc20:0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
  'iso4217/USD',
  'eth_sendTransaction',
  '["0x1"]',
]

/**
 * Values shaped by a JSON Schema: mostly valid, with a small chance at every node of something else
 * (any JSON, a missing required key, an undeclared key), so both acceptance and each kind of rejection
 * are exercised.
 */
function arbitraryFor(schema: JsonSchema): fc.Arbitrary<unknown> {
  const noisy = (valid: fc.Arbitrary<unknown>) =>
    fc.oneof({ arbitrary: valid, weight: 40 }, { arbitrary: fc.jsonValue({ maxDepth: 2 }), weight: 1 })
  const union = schema.anyOf ?? schema.oneOf
  if (union) return fc.oneof(...union.map(arbitraryFor))
  if (schema.const !== undefined) return noisy(fc.constant(schema.const))
  if (schema.enum) return noisy(fc.constantFrom(...schema.enum))
  const types = ([] as string[]).concat(schema.type ?? [])
  if (types.length > 1) return fc.oneof(...types.map((type) => arbitraryFor({ ...schema, type } as JsonSchema)))
  switch (types[0]) {
    case 'null':
      return noisy(fc.constant(null))
    case 'boolean':
      return noisy(fc.boolean())
    case 'integer':
    case 'number': {
      const min = schema.minimum ?? -(2 ** 53 - 1)
      const max = schema.maximum ?? 2 ** 53 - 1
      const integers = fc.bigInt({ min: BigInt(min), max: BigInt(max) }).map(Number)
      return noisy(types[0] === 'integer' ? fc.oneof(integers, fc.constantFrom(min, max)) : integers)
    }
    case 'string': {
      if (schema.pattern) return noisy(fc.stringMatching(new RegExp(schema.pattern)))
      const sized = { minLength: schema.minLength ?? 0, maxLength: Math.min(schema.maxLength ?? 40, 40) }
      const fits = wellFormed.filter((s) => s.length >= sized.minLength && s.length <= (schema.maxLength ?? 1e9))
      return noisy(fc.oneof(fc.string(sized), fc.constantFrom(...fits)))
    }
    case 'array':
      return noisy(fc.array(arbitraryFor(schema.items!), { maxLength: 3 }))
    case 'object': {
      const properties = Object.entries(schema.properties!)
      const required = schema.required ?? []
      const record = fc.record(
        Object.fromEntries(properties.map(([key, property]) => [key, arbitraryFor(property)])),
        { requiredKeys: [...required] },
      )
      const damaged = fc
        .tuple(record, fc.nat(), fc.dictionary(fc.string({ maxLength: 6 }), fc.jsonValue({ maxDepth: 1 }), { maxKeys: 2 }))
        .map(([value, pick, extra]) => {
          const copy: Record<string, unknown> = { ...extra, ...value }
          if (required.length && pick % 3 === 0) delete copy[required[pick % required.length]!]
          return copy
        })
      return noisy(fc.oneof({ arbitrary: record, weight: 6 }, { arbitrary: damaged, weight: 1 }))
    }
    default:
      return fc.jsonValue()
  }
}

describe.each(wallet)('%s: validator against zod', (name) => {
  const values = arbitraryFor(jsonSchemas[name]!)

  it('accepts whatever zod accepts (same value out), and rejects only what zod rejects', () => {
    fc.assert(fc.property(values, (value) => expectAgreement(name, value)), { numRuns: 300 })
  })

  it('is tested on values zod accepts as well as on values it rejects', () => {
    const verdicts = fc.sample(values, { numRuns: 300, seed: 42 }).map((v) => z.safeParse(walletSchemaSources[name]!, v).success)
    expect(verdicts.filter(Boolean).length).toBeGreaterThan(20)
    expect(verdicts.filter((ok) => !ok).length).toBeGreaterThan(20)
  })
})
