import { describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { operationErrorCodes } from './endpoint.js'
import { gatewayEndpoints } from './gatewayEndpoints.js'
import { buildWalletSchemas, emitWalletSchemasModule, toWalletJsonSchema } from './generate.js'
import * as committed from './generated/walletSchemas.js'

describe('generated wallet schemas', () => {
  it('match the zod schemas they were generated from (else run `npm run generate`)', () => {
    const { schemas, gatewayRoutes, gatewayErrorCodes } = buildWalletSchemas()
    // Compared as values, not text: the committed file is formatted by biome after generation.
    expect({ ...committed }).toEqual({ ...schemas, gatewayRoutes, gatewayErrorCodes })
  })

  it("lists the error codes of the gateway's operations, and only those", () => {
    const answerable = Object.values(gatewayEndpoints).flatMap(operationErrorCodes)
    expect(new Set(committed.gatewayErrorCodes)).toEqual(new Set(answerable))
    expect(committed.gatewayErrorCodes).toEqual(expect.arrayContaining(['payment_expired', 'missing_app_id']))
    expect(committed.gatewayErrorCodes).not.toContain('already_refunded')
  })

  it('emits a module that declares each shared part once and every root as an export', () => {
    const source = emitWalletSchemasModule()
    for (const name of Object.keys(buildWalletSchemas().schemas)) {
      expect(source).toContain(`export const ${name} = `)
    }
    expect(source.match(/^const Amount = /gm)).toHaveLength(1)
    expect(source).not.toContain('$schema')
  })

  it('writes object schemas with objectSchema, naming each property once', () => {
    const source = emitWalletSchemasModule()
    expect(source).toContain('export const GatewayPayment = /* @__PURE__ */ objectSchema({')
    expect(source).not.toContain('required:')
  })

  it('emits as they are the objects objectSchema cannot rebuild', () => {
    const strict = toWalletJsonSchema(z.strictObject({ a: z.string() }), 'Strict')
    const reordered = {
      type: 'object',
      properties: { a: { type: 'string' }, b: { type: 'string' } },
      required: ['b', 'a'],
    } as const
    const source = emitWalletSchemasModule({
      schemas: { Strict: strict, Reordered: reordered },
      gatewayRoutes: {},
      gatewayErrorCodes: [],
    })
    expect(source).toContain('additionalProperties: false')
    expect(source).toContain('required: ["b","a"]')
    expect(source).not.toContain('objectSchema(')
  })

  it('refuses keywords the wallet validator would ignore', () => {
    expect(() => toWalletJsonSchema(z.object({ email: z.email() }), 'Test')).toThrow(/"format"/)
    expect(() => toWalletJsonSchema(z.record(z.string(), z.string()), 'Test')).toThrow(
      /propertyNames|records/,
    )
    expect(() => toWalletJsonSchema(z.array(z.string()).check(z.maxLength(3)), 'Test')).toThrow(/"maxItems"/)
    expect(() => toWalletJsonSchema(z.looseObject({ a: z.string() }), 'Test')).toThrow(/additionalProperties/)
    expect(() => toWalletJsonSchema(z.object({ at: z.date() }), 'Test')).toThrow()
  })

  it('keeps undeclared keys allowed, as zod does on input, and strict objects strict', () => {
    expect(toWalletJsonSchema(z.object({ a: z.string() }), 'Test')).not.toHaveProperty('additionalProperties')
    expect(toWalletJsonSchema(z.strictObject({ a: z.string() }), 'Test')).toHaveProperty(
      'additionalProperties',
      false,
    )
  })
})
