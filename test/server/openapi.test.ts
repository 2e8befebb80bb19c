import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as z from 'zod/mini'
import { isBase58PublicKey } from '../../src/caip/base58.js'
import { AmountUnit, Caip10 } from '../../src/contract/common.js'
import { fiatUnits } from '../../src/contract/currencies.js'
import type { Endpoint } from '../../src/contract/endpoint.js'
import { endpoints } from '../../src/contract/endpoints.js'
import { serviceErrorStatus } from '../../src/contract/errors.js'
import { PaymentCreateBodyPreview } from '../../src/contract/payment.js'
import { defaultConfig } from '../../src/server/config.js'
import { jsonForms, openApiDocument, wcpOpenApiDocument } from '../../src/server/openapi.js'
import { defaultTestAssets, unitDisplay } from '../../src/server/payments/assets.js'
import { wcpEndpoints } from '../../src/server/wcp/wire.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant } from './helpers.js'

type Json = Record<string, any>
const doc = openApiDocument('http://127.0.0.1:8787') as Json
const wcp = wcpOpenApiDocument('http://127.0.0.1:8787') as Json

function operations(document: Json): [string, string, Json][] {
  return Object.entries(document.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json).map(([method, op]) => [method, path, op] as [string, string, Json]),
  )
}

/** Every zod schema node under `schema` (objects, arrays, unions, optionals, pipes...). */
function* nodes(schema: unknown, seen = new Set<unknown>()): Generator<z.ZodMiniType> {
  if (!schema || typeof schema !== 'object' || !('_zod' in schema) || seen.has(schema)) return
  seen.add(schema)
  yield schema as z.ZodMiniType
  const def = (schema as { _zod: { def: Record<string, unknown> } })._zod.def
  for (const value of Object.values(def)) {
    for (const child of Array.isArray(value)
      ? value
      : value && typeof value === 'object'
        ? [value, ...Object.values(value)]
        : [])
      yield* nodes(child, seen)
  }
}

function refinements(schema: z.ZodMiniType): number {
  const checks = (schema._zod.def as { checks?: { _zod: { def: { check: string } } }[] }).checks ?? []
  return checks.filter((check) => check._zod.def.check === 'custom').length
}

describe('the published documents', () => {
  const all = [...operations(doc), ...operations(wcp)]

  it('state every refinement a request schema makes (else add its JSON form to jsonForms)', () => {
    const inputs = [...Object.values(endpoints), ...Object.values(wcpEndpoints)].flatMap((e: Endpoint) =>
      [e.params, e.query, e.body].filter((s) => s !== undefined),
    )
    const missing = [...inputs, PaymentCreateBodyPreview]
      .flatMap((input) => [...nodes(input)])
      .filter((node) => refinements(node) > 0 && !jsonForms.has(node))
      .map((node) => JSON.stringify(z.toJSONSchema(node, { unrepresentable: 'any' })).slice(0, 200))
    expect(missing).toEqual([])
  })

  it('leave no request value unconstrained: every string has a pattern, enum or const', () => {
    const loose: string[] = []
    const walk = (schema: unknown, where: string) => {
      if (!schema || typeof schema !== 'object') return
      const s = schema as Json
      const branchesConstrained =
        Array.isArray(s.anyOf) && s.anyOf.every((branch: Json) => typeof branch.pattern === 'string')
      if (
        s.type === 'string' &&
        s.pattern === undefined &&
        s.enum === undefined &&
        s.const === undefined &&
        !branchesConstrained
      )
        loose.push(where)
      if (Object.keys(s).length === 0) loose.push(`${where} (any value)`)
      for (const [key, value] of Object.entries(s))
        if (value && typeof value === 'object' && key !== 'examples') walk(value, `${where}.${key}`)
    }
    for (const [method, path, op] of all) {
      for (const p of op.parameters ?? []) walk(p.schema, `${method} ${path} ${p.in} ${p.name}`)
      walk(op.requestBody?.content['application/json'].schema, `${method} ${path} body`)
    }
    expect(loose).toEqual([])
  })

  it('give each integer query parameter type integer; native request bodies refuse unknown keys', () => {
    for (const name of ['limit', 'startTs', 'endTs']) {
      const param = doc.paths['/v1/payments'].get.parameters.find((p: Json) => p.name === name)
      expect(param.schema.type, name).toBe('integer')
    }
    // (The /wcp bodies take the SDK's unknown keys, as its schemas do.)
    for (const [method, path, op] of operations(doc)) {
      const body = op.requestBody?.content['application/json'].schema
      for (const branch of body?.anyOf ?? (body ? [body] : []))
        expect(branch.additionalProperties, `${method} ${path}`).toBe(false)
    }
    expect(
      doc.paths['/v1/merchants/{merchantId}'].patch.requestBody.content['application/json'].schema
        .minProperties,
    ).toBe(1)
  })

  it('list every status an operation can answer with its codes, 503 + Retry-After included', () => {
    for (const [method, path, op] of operations(doc)) {
      if (path === '/healthz') continue
      const statuses = Object.keys(op.responses)
      // A public operation (a Solana Pay transaction request) takes no credentials: no 401.
      const unauthorized = op.security.length === 0 ? [] : ['401']
      expect(statuses, `${method} ${path}`).toEqual(
        expect.arrayContaining(['400', ...unauthorized, '429', '500', '503']),
      )
      for (const status of ['429', '503'])
        expect(op.responses[status].headers['Retry-After'].required).toBe(true)
      for (const [status, response] of Object.entries(op.responses as Json)) {
        if (Number(status) < 400) continue
        for (const code of response.content['application/json'].schema.properties.code.enum)
          expect(serviceErrorStatus[code as keyof typeof serviceErrorStatus], `${path} ${code}`).toBe(
            status === '503' ? 500 : Number(status),
          )
      }
    }
    const confirm = doc.paths['/v1/gateway/payment/{id}/confirm'].post.responses
    expect(confirm['410'].content['application/json'].schema.properties.code.enum).toEqual([
      'payment_expired',
    ])
    expect(confirm['422'].content['application/json'].schema.properties.code.enum).toEqual(['quote_expired'])
    expect(confirm['451'].content['application/json'].schema.properties.code.enum).toEqual([
      'sanctioned_user',
    ])
    const settlement = doc.paths['/v1/merchants/{merchantId}/settlements/crypto/{id}'].delete.responses
    expect(settlement['404'].content['application/json'].schema.properties.code.enum).toEqual([
      'merchant_not_found',
      'settlement_not_found',
    ])
  })

  it('state the header rules: ASCII, non-empty Idempotency-Key, Pay-Version from the published list', () => {
    const create = doc.paths['/v1/payments'].post.parameters as Json[]
    const byName = Object.fromEntries(create.map((p) => [p.name, p.schema]))
    // Printable ASCII with a visible first and last character, up to the limit, between spaces and tabs
    // HTTP strips (test/server/headerValues.test.ts holds the pattern to the server over a real socket).
    expect(byName['Idempotency-Key']).toEqual({
      type: 'string',
      pattern: '^[\\t ]*[\\x21-\\x7e](?:[\\x20-\\x7e]{0,253}[\\x21-\\x7e])?[\\t ]*$',
    })
    expect(byName['Merchant-Id'].pattern).toContain('{0,62}')
    expect(byName['Pay-Version'].enum).toEqual(['2026-02-18', '2026-02-19.preview'])
  })

  it('declare the flows as links: payment -> status, options -> fetch -> confirm, endpoint -> deliveries', () => {
    const linksOf = (path: string, method: string, status: string) =>
      Object.keys(doc.paths[path][method].responses[status].links ?? {})
    expect(linksOf('/v1/payments', 'post', '201')).toEqual(
      expect.arrayContaining(['getPaymentStatus', 'gatewayOptions']),
    )
    expect(linksOf('/v1/gateway/payment/{id}/options', 'post', '200')).toContain('gatewayFetch')
    expect(linksOf('/v1/gateway/payment/{id}/fetch', 'post', '200')).toContain('gatewayConfirm')
    expect(linksOf('/v1/webhook-endpoints', 'post', '201')).toContain('listWebhookDeliveries')
    const ids = new Set(all.map(([, , op]) => op.operationId))
    for (const [, , op] of all)
      for (const response of Object.values(op.responses as Json))
        for (const link of Object.values((response as Json).links ?? {}))
          expect(ids).toContain((link as Json).operationId)
  })

  it('/wcp has its own document: its operations, its version header, the statuses the SDK reads', () => {
    expect(Object.keys(wcp.paths)).toHaveLength(6)
    const confirm = wcp.paths['/wcp/v1/gateway/payment/{id}/confirm'].post
    expect(confirm.parameters.map((p: Json) => p.name)).toContain('WCP-Version')
    expect(Object.keys(confirm.responses)).not.toEqual(expect.arrayContaining(['409']))
    expect(confirm.responses['400'].content['application/json'].schema.properties.code.enum).toEqual(
      expect.arrayContaining(['invalid_state', 'quote_expired', 'sanctioned_user']),
    )
    expect(confirm.responses['410']).toBeDefined()
  })
})

describe('a CAIP-10 account as published', () => {
  const published = (
    doc.paths['/v1/refunds'].post.requestBody.content['application/json'].schema.properties.destination
      .anyOf as { pattern: string }[]
  ).map((branch) => new RegExp(branch.pattern, 'u'))

  it('accepts exactly what the server accepts (but for a solana key that must decode to 32 bytes)', () => {
    let seed = 2026
    const next = (n: number) => {
      seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
      return seed % n
    }
    const pick = (alphabet: string, min: number, max: number) =>
      Array.from({ length: min + next(max - min + 1) }, () => alphabet[next(alphabet.length)]).join('')
    const hex = '0123456789abcdefABCDEFxg'
    const base58 = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz0OIl'
    const namespaces = ['eip155', 'solana', 'cosmos', 'bip122', 'eip155x', 'sol', 'EIP155', 'ab']
    namespaces.push('eip156', 'eip15', 'eip1-5', 'solanb', 'solan', 'zolana', 'e-p155', 'solana1')
    const disagreements: string[] = []
    let drawn = 0
    for (let i = 0; i < 3000; i++) {
      const namespace = namespaces[next(namespaces.length)]!
      const reference = pick('1abcXYZ-_', 0, 4)
      const address =
        next(2) === 0 ? `0x${pick(hex, 38, 42)}` : next(2) === 0 ? pick(base58, 30, 46) : pick('ab.%-9', 0, 6)
      const value = `${namespace}:${reference}:${address}`
      const server = Caip10.safeParse(value).success
      const document = published.some((branch) => branch.test(value))
      drawn += Number(server)
      const stricterByDesign = namespace === 'solana' && document && !isBase58PublicKey(address)
      if (server !== document && !stricterByDesign) disagreements.push(value)
    }
    expect(disagreements).toEqual([])
    expect(drawn).toBeGreaterThan(300)
  })

  it('is written without lookaheads, which generators can draw only by filtering', () => {
    for (const document of [doc, wcp]) expect(JSON.stringify(document)).not.toMatch(/\(\?<?[!=]/)
  })
})

describe("simulatePush's asset as published", () => {
  it('is an enum of the test assets, the ones the route prices with', () => {
    const body = doc.paths['/v1/test/payments/{id}/push'].post.requestBody.content['application/json'].schema
    expect(body.properties.asset.enum).toEqual(defaultTestAssets.map((a) => a.asset))
    expect(doc.paths['/v1/test/payments/{id}/push'].post.description).toContain('must price this payment')
  })
})

describe('an amount unit as published', () => {
  const createBody = doc.paths['/v1/payments'].post.requestBody.content['application/json'].schema.anyOf[0]
  const published = createBody.properties.amount.properties.unit as { anyOf: Json[] }
  const [fiat, asset] = published.anyOf as [{ enum: string[] }, { pattern: string; maxLength: number }]
  const assetPattern = new RegExp(asset.pattern, 'u')
  const inDocument = (unit: string) =>
    fiat.enum.includes(unit) || (assetPattern.test(unit) && unit.length <= asset.maxLength)
  /** What POST /v1/payments takes: the request schema, then a unit the server prices (payments/create.ts). */
  const serverTakes = (unit: string) =>
    AmountUnit.safeParse(unit).success && unitDisplay(unit, defaultConfig) !== undefined
  const letters = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ'
  const everyCode = [...letters].flatMap((a) =>
    [...letters].flatMap((b) => [...letters].map((c) => a + b + c)),
  )

  it('lists exactly the fiat units the server takes, of all 17,576 iso4217/<A-Z>{3}', () => {
    const disagreements = everyCode
      .map((code) => `iso4217/${code}`)
      .filter((unit) => inDocument(unit) !== serverTakes(unit))
    expect(disagreements).toEqual([])
    expect(fiat.enum).toEqual(fiatUnits)
    expect(fiat.enum).toContain('iso4217/KWD')
    expect(fiat.enum).not.toContain('iso4217/RWE')
    for (const unit of ['iso4217/usd', 'iso4217/USDX', 'iso4217/', 'USD', 'iso4217/US'])
      expect([unit, inDocument(unit), serverTakes(unit)]).toEqual([unit, false, false])
  })

  it('takes caip19 units by pattern, the server only the assets it prices (stated in the description)', () => {
    for (const { asset: id } of defaultTestAssets) {
      expect(inDocument(`caip19/${id}`), id).toBe(true)
      expect(serverTakes(`caip19/${id}`), id).toBe(true)
    }
    const unpriced = 'caip19/eip155:1/erc20:0x0000000000000000000000000000000000000001'
    expect([inDocument(unpriced), serverTakes(unpriced)]).toEqual([true, false])
    expect(doc.paths['/v1/payments'].post.description).toContain('an asset this server prices')
  })

  it('is the same form in refunds, and in the responses of both documents', () => {
    const refund = doc.paths['/v1/refunds'].post.requestBody.content['application/json'].schema
    expect(refund.properties.amount.properties.unit.anyOf).toEqual(published.anyOf)
    const info = wcp.paths['/wcp/v1/gateway/payment/{id}'].get.responses['200'].content['application/json']
    expect(info.schema.properties.amount.properties.unit.anyOf).toEqual(published.anyOf)
    const read = doc.paths['/v1/payments/{id}'].get.responses['200'].content['application/json'].schema
    expect(JSON.stringify(read)).toContain(JSON.stringify(published.anyOf))
  })

  describe('held to the server: POST /v1/payments', () => {
    let t: TestServer
    let key: string
    let merchantId: string
    beforeAll(async () => {
      t = await createTestServer()
      key = (await t.createKey('test')).apiKey
      merchantId = await createMerchant(t, key)
    })
    afterAll(() => t.close())

    it('creates a payment in every listed unit and refuses unlisted codes with 400 params_validation', async () => {
      let seed = 45
      const unlisted = Array.from({ length: 40 }, () => {
        seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31
        return `iso4217/${everyCode[seed % everyCode.length]}`
      }).filter((unit) => !fiat.enum.includes(unit))
      const answers: string[] = []
      for (const unit of [...fiat.enum, ...unlisted, 'iso4217/RWE', 'iso4217/BOL']) {
        const res = await t.request({
          method: 'POST',
          url: '/v1/payments',
          headers: { 'api-key': key, 'merchant-id': merchantId },
          payload: { referenceId: 'unit-sweep', amount: { unit, value: '100' } },
        })
        const expected = fiat.enum.includes(unit) ? '201' : '400 params_validation'
        const got = res.statusCode === 201 ? '201' : `${res.statusCode} ${res.json.code}`
        if (got !== expected) answers.push(`${unit}: ${got}`)
      }
      expect(answers).toEqual([])
      expect(unlisted.length).toBeGreaterThan(30)
    })
  })
})
