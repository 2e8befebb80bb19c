import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { endpoints } from '../../src/contract/endpoints.js'
import { isServiceErrorCode, serviceErrorStatus } from '../../src/contract/errors.js'
import { createBuyer, usdc } from '../gateway/support.js'
import { createTestServer, type TestServer } from '../server/harness.js'
import { createMerchant, createPayment, headers, idem, succeedPayment } from '../server/helpers.js'

/**
 * Property-based bad input, generated from the served OpenAPI document: for every operation, requests
 * built from its own parameter and body schemas, then broken (wrong types, missing and extra fields, huge
 * and non-ASCII values, invalid CAIP strings, odd amounts, path and query junk). The server must never
 * answer 5xx, and every error must be `{code, message}` with a spec code and that code's HTTP status.
 *
 * Replay a failure with the seed fast-check prints: CAIPAY_FUZZ_SEED=<seed> (runs per operation:
 * CAIPAY_FUZZ_RUNS, default 50).
 */
const baseSeed = Number(process.env.CAIPAY_FUZZ_SEED ?? 20260218)
const numRuns = Number(process.env.CAIPAY_FUZZ_RUNS ?? 50)

// biome-ignore lint/suspicious/noExplicitAny: the OpenAPI document and bodies are walked dynamically
type Json = Record<string, any>

let t: TestServer
let doc: Json
const keys: Record<'test' | 'live' | 'wallet' | 'otherPartner', string> = {
  test: '',
  live: '',
  wallet: '',
  otherPartner: '',
}
let foreignMerchant: string

/** Real objects the generated requests aim at, remade per operation (a run may delete or cancel them). */
interface Fixtures {
  merchantId: string
  settlementId: string
  paymentId: string
  succeededId: string
  optionId: string
  buildData: string
}
let fx: Fixtures

const buyer = createBuyer()

async function makeFixtures(): Promise<Fixtures> {
  const merchantId = await createMerchant(t, keys.test)
  const s = await t.request({
    method: 'POST',
    url: `/v1/merchants/${merchantId}/settlements/crypto`,
    headers: headers(keys.test, undefined, { 'idempotency-key': idem() }),
    payload: { settlements: [{ asset: usdc.base, destination: buyer.accounts.base }] },
  })
  expect(s.statusCode, s.body).toBe(201)
  const paymentId = await createPayment(t, keys.test, merchantId)
  const succeededId = await createPayment(t, keys.test, merchantId, {
    referenceId: 'fuzz-done',
    amount: { unit: 'iso4217/USD', value: '99' },
  })
  await succeedPayment(t, succeededId)
  const options = await t.request({
    method: 'POST',
    url: `/v1/gateway/payment/${paymentId}/options`,
    headers: headers(keys.test),
    payload: { accounts: Object.values(buyer.accounts) },
  })
  expect(options.statusCode, options.body).toBe(200)
  const withBuild = options.json.options.find((o: Json) => o.actions.some((a: Json) => a.type === 'build'))
  return {
    merchantId,
    settlementId: s.json.settlements[0].id,
    paymentId,
    succeededId,
    optionId: options.json.options[0].id,
    buildData: withBuild?.actions.find((a: Json) => a.type === 'build').build.data ?? 'x',
  }
}

beforeAll(async () => {
  t = await createTestServer()
  keys.test = (await t.createKey('test')).apiKey
  keys.live = (await t.createKey('live')).apiKey
  keys.wallet = (await t.createKey('test', 'wallet')).apiKey
  const other = await t.createPartner()
  keys.otherPartner = (await t.createKey('test', 'partner', other)).apiKey
  foreignMerchant = await createMerchant(t, keys.otherPartner)
  const res = await t.request({ method: 'GET', url: '/openapi.json' })
  expect(res.statusCode).toBe(200)
  doc = res.json
})
afterAll(() => t.close())

// ---------------------------------------------------------------------------------------------------
// Values: schema-driven, plus the junk a careless or hostile client sends.

const nonAscii = fc.oneof(
  fc.constantFrom('é', '中文', '😀', '\u00ff\u00fe', 'ﬁ', '\u200b', 'Ω≈ç√', '\u0000', '\r\n', '\t'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 20 }),
)
const hugeString = fc.constantFrom('x'.repeat(70_000), 'é'.repeat(20_000), '9'.repeat(5_000), 'a'.repeat(257))
const wrongType = fc.oneof(
  fc.constantFrom(null, true, false, 0, -1, 1.5, 1e308, [], {}, [null], { a: 1 }, '', ' '),
  fc.integer(),
  fc.double(),
  fc.jsonValue({ maxDepth: 2 }),
)
const invalidCaip = fc.constantFrom(
  '',
  ':',
  'eip155',
  'eip155:',
  'eip155:1',
  'eip155:1:',
  'eip155:1:0xnothex',
  'eip155:1:0x1234',
  'eip155:abc:0x1111111111111111111111111111111111111111',
  'EIP155:1:0x1111111111111111111111111111111111111111',
  'eip155:1/erc20:',
  'eip155:1/erc20:0xZZ',
  'eip155:1/erc721:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
  'solana:',
  'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp:0OIl',
  'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:',
  'cosmos:cosmoshub-4:cosmos1abc',
  `eip155:1:0x${'1'.repeat(400)}`,
  'eip155:1:0x1111111111111111111111111111111111111111:extra',
  'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913/extra',
  '../../etc/passwd',
  "'; DROP TABLE payments; --",
)
const validAccount = fc.constantFrom(...Object.values(buyer.accounts))
const validAsset = fc.constantFrom(...Object.values(usdc))
const oddAmount = fc.oneof(
  fc.constantFrom(
    '-1',
    '0',
    '-0',
    '00',
    '01',
    '1.5',
    '1e5',
    '0x10',
    ' 1',
    '1 ',
    '١٢٣',
    '+1',
    'NaN',
    'Infinity',
  ),
  fc.bigInt({ min: 10n ** 38n, max: 10n ** 80n }).map(String),
  fc.bigInt({ min: -(10n ** 40n), max: -1n }).map(String),
  fc.integer({ min: -1000, max: 1000 }),
  fc.constant(Number.MAX_VALUE),
)

function fromSchema(schema: Json, name = ''): fc.Arbitrary<unknown> {
  const hinted = hint(name)
  if (hinted) return hinted
  if (schema.anyOf) return fc.oneof(...(schema.anyOf as Json[]).map((s) => fromSchema(s, name)))
  if (schema.enum) return fc.constantFrom(...(schema.enum as unknown[]))
  switch (schema.type) {
    case 'null':
      return fc.constant(null)
    case 'boolean':
      return fc.boolean()
    case 'integer':
    case 'number':
      return fc.integer({
        min: Math.max(schema.minimum ?? -1_000_000, Number.MIN_SAFE_INTEGER),
        max: Math.min(schema.maximum ?? 4_000_000_000, Number.MAX_SAFE_INTEGER),
      })
    case 'string': {
      const min = schema.minLength ?? 0
      const max = Math.min(schema.maxLength ?? 40, 64)
      if (schema.format === 'uri') {
        return fc.webUrl({ validSchemes: ['https'] }).filter((u) => u.length <= (schema.maxLength ?? 2048))
      }
      if (schema.pattern) {
        return fc
          .stringMatching(new RegExp(schema.pattern))
          .filter((s) => s.length >= min && s.length <= (schema.maxLength ?? Number.POSITIVE_INFINITY))
      }
      return fc.string({ minLength: min, maxLength: Math.max(min, max) })
    }
    case 'array':
      return fc.array(fromSchema(schema.items ?? {}, name), {
        minLength: schema.minItems ?? 0,
        maxLength: Math.min(schema.maxItems ?? 4, 4),
      })
    case 'object': {
      const props = Object.entries((schema.properties ?? {}) as Record<string, Json>)
      return fc.record(Object.fromEntries(props.map(([key, s]) => [key, fromSchema(s, key)])), {
        requiredKeys: (schema.required as string[] | undefined) ?? [],
      })
    }
    default:
      return fc.jsonValue({ maxDepth: 2 })
  }
}

/** Mostly good, sometimes not: a generated "valid" request should usually get past validation. */
const usually = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>) =>
  fc.oneof({ weight: 5, arbitrary: good }, { weight: 1, arbitrary: bad })

/** Fields whose schema cannot say what a good value looks like (CAIP refinements, ids of real rows). */
function hint(name: string): fc.Arbitrary<unknown> | undefined {
  switch (name) {
    case 'asset':
      return usually(validAsset, invalidCaip)
    case 'destination':
      return usually(validAccount, invalidCaip)
    case 'accounts':
      return fc.array(usually(validAccount, invalidCaip), { maxLength: 4 })
    case 'paymentId':
      return usually(
        fc.constantFrom(fx.succeededId, fx.paymentId),
        fc.stringMatching(/^pay_[A-Za-z0-9]{1,30}$/),
      )
    case 'optionId':
      return usually(
        fc.constant(fx.optionId),
        fc.oneof(fc.stringMatching(/^opt_[A-Za-z0-9]{1,30}$/), fc.string()),
      )
    case 'data':
      return usually(fc.constant(fx.buildData), fc.oneof(fc.base64String({ maxLength: 200 }), fc.string()))
    case 'results':
      return fc.array(
        fc.oneof(
          fc.constantFrom(`0x${'ab'.repeat(65)}`, `0x${'00'.repeat(32)}`, ''),
          fc.base64String({ maxLength: 200 }),
          fc.string(),
        ),
        { minLength: 1, maxLength: 3 },
      )
    case 'value':
      return usually(fc.bigInt({ min: 1n, max: 10n ** 12n }).map(String), oddAmount)
    case 'unit':
      return usually(
        fc.oneof(
          fc.constantFrom('iso4217/USD', 'iso4217/EUR', 'iso4217/JPY'),
          validAsset.map((a) => `caip19/${a}`),
        ),
        fc.oneof(
          fc.constantFrom('iso4217/usd', 'iso4217/XXX', 'iso4217/', 'caip19/'),
          invalidCaip.map((a) => `caip19/${a}`),
          fc.string({ maxLength: 30 }),
        ),
      )
    case 'settlements':
      return fc.array(
        usually(
          fc.constantFrom(
            { asset: usdc.base, destination: buyer.accounts.base },
            { asset: usdc.ethereum, destination: buyer.accounts.ethereum },
            { asset: usdc.solana, destination: buyer.accounts.solana },
          ),
          fc.record({
            asset: usually(validAsset, invalidCaip),
            destination: usually(validAccount, invalidCaip),
          }),
        ),
        { minLength: 1, maxLength: 3 },
      )
    case 'expiresAt': {
      const now = Math.floor(Date.now() / 1000)
      return usually(
        fc.integer({ min: now + 120, max: now + 29 * 86_400 }),
        fc.oneof(fc.integer({ min: -1, max: now }), fc.constantFrom(now + 400 * 86_400, 2 ** 53, 1.5)),
      )
    }
    case 'refresh':
      return fc.oneof(
        { weight: 3, arbitrary: fc.constant([]) },
        fc.constant([fx.optionId]),
        fc.array(fc.string({ maxLength: 70 }), { maxLength: 3 }),
      )
    default:
      return undefined
  }
}

/** Breaks a (mostly) valid body in one of the ways clients do. */
function mutateBody(valid: fc.Arbitrary<unknown>): fc.Arbitrary<{ raw?: string; value?: unknown }> {
  const asObject = (v: unknown): Json =>
    v && typeof v === 'object' && !Array.isArray(v) ? { ...(v as Json) } : {}
  const pickKey = (o: Json, i: number) => {
    const ks = Object.keys(o)
    return ks.length ? ks[i % ks.length]! : 'x'
  }
  return fc.oneof(
    { weight: 3, arbitrary: valid.map((value) => ({ value })) },
    // Missing field.
    fc.tuple(valid, fc.nat()).map(([v, i]) => {
      const o = asObject(v)
      delete o[pickKey(o, i)]
      return { value: o }
    }),
    // Extra field (strict objects refuse it; a prototype key must not pollute anything).
    fc
      .tuple(
        valid,
        fc.constantFrom('extra', '__proto__', 'constructor', 'id', 'status', 'mode', ''),
        wrongType,
      )
      .map(([v, k, x]) => ({
        raw: JSON.stringify(asObject(v))
          .replace(/^\{/, `{${JSON.stringify(k)}:${JSON.stringify(x)},`)
          .replace(/,}$/, '}'),
      })),
    // Wrong type in one field.
    fc.tuple(valid, fc.nat(), wrongType).map(([v, i, x]) => {
      const o = asObject(v)
      o[pickKey(o, i)] = x
      return { value: o }
    }),
    // A huge or non-ASCII string in one field.
    fc.tuple(valid, fc.nat(), fc.oneof(hugeString, nonAscii)).map(([v, i, x]) => {
      const o = asObject(v)
      o[pickKey(o, i)] = x
      return { value: o }
    }),
    // Amount nonsense, wherever the body has one.
    fc.tuple(valid, oddAmount, fc.oneof(fc.constant('iso4217/USD'), invalidCaip)).map(([v, value, unit]) => {
      const o = asObject(v)
      o.amount = { unit, value }
      return { value: o }
    }),
    // Not an object at all, or not JSON.
    fc.oneof(wrongType, fc.jsonValue()).map((value) => ({ value })),
    fc
      .constantFrom('{', '{"a":}', '[1,', 'nul', '{"a":"\\u0000"}', '\u0000', '{"a":1}garbage', '{}{}', '')
      .map((raw) => ({ raw })),
  )
}

// ---------------------------------------------------------------------------------------------------
// Requests.

interface Operation {
  name: string
  method: string
  path: string
  op: Json
  successStatus: number
}

interface Generated {
  url: string
  headers: Record<string, string>
  body?: string
}

function operationsOf(document: Json): Operation[] {
  const out: Operation[] = []
  for (const [path, methods] of Object.entries(document.paths as Record<string, Record<string, Json>>)) {
    for (const [method, op] of Object.entries(methods)) {
      const success = Object.keys(op.responses).find((s) => s.startsWith('2'))
      out.push({
        name: op.operationId,
        method: method.toUpperCase(),
        path,
        op,
        successStatus: Number(success),
      })
    }
  }
  return out
}

const oddPathParam = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '..',
    '.',
    '%2e%2e',
    '%2F',
    '%',
    '%E0%A4%A',
    '%FF',
    '%00',
    'null',
    'undefined',
    '0',
    '-1',
  ),
  fc.constantFrom(
    'pay_',
    'pay_!',
    `pay_${'a'.repeat(80)}`,
    'mrch_',
    'crypto_',
    "pay_1' OR '1'='1",
    'PAY_ABC',
  ),
  nonAscii.map(encodeURIComponent),
  hugeString.map((s) => encodeURIComponent(s.slice(0, 3000))),
  fc.string({ maxLength: 40 }).map(encodeURIComponent),
)

function pathParam(path: string, name: string, odd: boolean): fc.Arbitrary<string> {
  if (odd) return oddPathParam
  if (name === 'merchantId')
    return fc.constantFrom(fx.merchantId, fx.merchantId, fx.merchantId, foreignMerchant)
  if (path.includes('/settlements/crypto/')) return fc.constant(fx.settlementId)
  return fc.constantFrom(fx.paymentId, fx.paymentId, fx.succeededId)
}

const badQueryValue = fc.oneof(
  fc.constantFrom(
    '',
    'abc',
    '-1',
    '0',
    '1e309',
    'NaN',
    'Infinity',
    '0x10',
    '1.5',
    '9'.repeat(40),
    '%00',
    'true',
  ),
  nonAscii,
  hugeString.map((s) => s.slice(0, 3000)),
)

function queryArb(op: Json, bad: boolean): fc.Arbitrary<string> {
  const params = ((op.parameters ?? []) as Json[]).filter((p) => p.in === 'query')
  if (params.length === 0) {
    return bad ? badQueryValue.map((v) => `unexpected=${encodeURIComponent(v)}`) : fc.constant('')
  }
  const encode = (name: string, v: unknown) =>
    (Array.isArray(v) ? v : [v]).map((x) => `${encodeURIComponent(name)}=${encodeURIComponent(String(x))}`)
  const good = fc.array(
    fc.oneof(...params.map((p) => fromSchema(p.schema, p.name).map((v) => encode(p.name, v)))),
    { maxLength: 3 },
  )
  if (!bad) return good.map((ps) => ps.flat().join('&'))
  const broken = fc.oneof(
    ...params.map((p) => badQueryValue.map((v) => encode(p.name, v))),
    fc
      .tuple(fc.constantFrom('x', 'limit[]', 'status[0]', '__proto__', ''), badQueryValue)
      .map(([k, v]) => [`${k}=${encodeURIComponent(v)}`]),
    fc.constantFrom(
      ['&&'],
      ['=x'],
      ['%%%'],
      ['limit=1', 'limit=2'],
      ['a[b]=c'],
      ['%E0%A4%A=1'],
      ['cursor=%FF'],
    ),
  )
  return fc.tuple(good, broken).map(([ps, b]) => [...ps.flat(), ...b].join('&'))
}

const baseHeaders = (): Record<string, string> => ({
  'api-key': keys.test,
  'merchant-id': fx.merchantId,
  'idempotency-key': idem(),
})

function headersArb(operation: Operation): fc.Arbitrary<Record<string, string>> {
  const gateway = operation.path.startsWith('/v1/gateway')
  const names = ['api-key', 'merchant-id', 'idempotency-key', 'pay-version', 'app-id', 'client-id']
  const replacement = fc.oneof(
    nonAscii,
    hugeString.map((s) => s.slice(0, 6000)),
    fc.constantFrom(
      '',
      ' ',
      keys.live,
      keys.wallet,
      keys.otherPartner,
      'svc_test_nope',
      'svc_nope',
      'app_test_nope',
      foreignMerchant,
      '2026-02-18',
      '2026-02-19.preview',
      '2025-01-01',
      '9999-99-99',
      'latest',
    ),
    fc.string({ maxLength: 30 }),
  )
  type Change = (h: Record<string, string>) => void
  const change: fc.Arbitrary<Change> = fc.oneof(
    fc.constantFrom(...names).map(
      (n): Change =>
        (h) =>
          delete h[n],
    ),
    fc.tuple(fc.constantFrom(...names), replacement).map(
      ([n, v]): Change =>
        (h) => {
          h[n] = v
        },
    ),
    // The gateway also takes App-Id + Client-Id; mixing schemes is an error, not a crash.
    fc.constant<Change>((h) => {
      if (gateway) delete h['api-key']
      h['app-id'] = 'app_test_x'
      h['client-id'] = 'wallet-1'
    }),
    fc
      .constantFrom(
        'text/plain',
        'application/x-www-form-urlencoded',
        'application/json; charset=latin1',
        'json',
      )
      .map(
        (type): Change =>
          (h) => {
            h['content-type'] = type
          },
      ),
  )
  return fc.array(change, { minLength: 1, maxLength: 2 }).map((changes) => {
    const h = baseHeaders()
    for (const c of changes) c(h)
    return h
  })
}

/**
 * One broken dimension per request (or none), the rest valid: a request broken everywhere at once only
 * ever meets the first check, while these reach auth, merchant lookup, validation and the handlers.
 */
function requestArb(operation: Operation): fc.Arbitrary<Generated> {
  const { op, path } = operation
  const pathNames = [...path.matchAll(/\{([A-Za-z]+)\}/g)].map((m) => m[1]!)
  const fill = (values: readonly string[]) =>
    pathNames.reduce((p, n, i) => p.replace(`{${n}}`, values[i]!), path)
  const realPath = fc.tuple(...pathNames.map((n) => pathParam(path, n, false))).map(fill)
  const oddPath = fc.tuple(...pathNames.map((n) => pathParam(path, n, true))).map(fill)
  const schema = op.requestBody?.content?.['application/json']?.schema as Json | undefined
  const validBody: fc.Arbitrary<string | undefined> = schema
    ? fromSchema(schema).map((v) => JSON.stringify(v))
    : fc.constant(undefined)
  // The preview payment body (with `checkout`) is valid only under the preview version.
  const coherent = (headers: Record<string, string>, body: string | undefined) => {
    if (body?.startsWith('{') && body.includes('"checkout":') && headers['pay-version'] === undefined)
      headers['pay-version'] = '2026-02-19.preview'
  }
  const brokenBody: fc.Arbitrary<string | undefined> = schema
    ? mutateBody(fromSchema(schema)).map((b) => b.raw ?? JSON.stringify(b.value) ?? '')
    : fc.jsonValue({ maxDepth: 2 }).map((v) => JSON.stringify(v))
  const validQuery = queryArb(op, false)
  const validHeaders = fc.constant(null).map(() => baseHeaders())
  const build = (
    p: fc.Arbitrary<string>,
    q: fc.Arbitrary<string>,
    h: fc.Arbitrary<Record<string, string>>,
    b: fc.Arbitrary<string | undefined>,
  ) =>
    fc.tuple(p, q, h, b).map(([url, query, hs, body]) => {
      if (body !== undefined && hs['content-type'] === undefined) hs['content-type'] = 'application/json'
      coherent(hs, body)
      return { url: query ? `${url}?${query}` : url, headers: hs, ...(body === undefined ? {} : { body }) }
    })
  return fc.oneof(
    { weight: 2, arbitrary: build(realPath, validQuery, validHeaders, validBody) },
    { weight: 1, arbitrary: build(oddPath, validQuery, validHeaders, validBody) },
    { weight: 1, arbitrary: build(realPath, queryArb(op, true), validHeaders, validBody) },
    { weight: 2, arbitrary: build(realPath, validQuery, headersArb(operation), validBody) },
    { weight: schema ? 4 : 1, arbitrary: build(realPath, validQuery, validHeaders, brokenBody) },
  )
}

// ---------------------------------------------------------------------------------------------------

function checkAnswer(
  operation: Operation,
  req: Generated,
  res: { statusCode: number; body: string; headers?: Record<string, unknown> },
) {
  const label = `${operation.method} ${req.url.slice(0, 200)} -> ${res.statusCode} ${res.body.slice(0, 300)}`
  expect(res.statusCode, label).toBeLessThan(500)
  if (res.statusCode < 400) {
    expect(res.statusCode, label).toBe(operation.successStatus)
    return
  }
  let body: Json
  try {
    body = JSON.parse(res.body)
  } catch {
    throw new Error(`error body is not JSON: ${label}`)
  }
  expect(typeof body.message, label).toBe('string')
  expect(body.message.length, label).toBeGreaterThan(0)
  expect(isServiceErrorCode(body.code), label).toBe(true)
  // An unknown route (a path param that ate a slash, say) is 404 invalid_params by design, and a path
  // that exists only under other methods is 405 invalid_params with `Allow`.
  const routeLevel =
    (res.statusCode === 404 && body.code === 'invalid_params') ||
    (res.statusCode === 405 &&
      body.code === 'invalid_params' &&
      /^[A-Z]+(, [A-Z]+)*$/.test(String(res.headers?.allow)))
  if (!routeLevel)
    expect(res.statusCode, label).toBe(serviceErrorStatus[body.code as keyof typeof serviceErrorStatus])
  if (body.code === 'params_validation') expect(Array.isArray(body.issues), label).toBe(true)
  // No internals leak into what a client sees.
  expect(res.body, label).not.toMatch(/node_modules|at [A-Za-z.]+ \(|SELECT |INSERT |ZodError/)
}

describe('bad input from the OpenAPI document (property-based)', () => {
  /** Operations the document lists besides the contract's: health, and Solana Pay transaction requests. */
  const outsideTheContract = ['healthz', 'solanaPayLabel', 'solanaPayTransaction']
  it('the document lists every operation of the contract', () => {
    const ids = operationsOf(doc).map((o) => o.name)
    expect(ids.sort()).toEqual([...Object.keys(endpoints), ...outsideTheContract].sort())
  })

  const names = [...Object.keys(endpoints), ...outsideTheContract]
  names.forEach((name, index) => {
    it(`${name}: no 5xx, every error a spec code with its status`, async () => {
      const operation = operationsOf(doc).find((o) => o.name === name)
      expect(operation).toBeDefined()
      fx = await makeFixtures()
      const seed = baseSeed + index
      const statuses = new Map<number, number>()
      try {
        await fc.assert(
          fc.asyncProperty(requestArb(operation!), async (req) => {
            const res = await t.request({
              method: operation!.method as 'GET',
              url: req.url,
              headers: req.headers,
              ...(req.body === undefined ? {} : { payload: req.body }),
            })
            statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1)
            checkAnswer(operation!, req, res)
          }),
          { seed, numRuns, endOnFailure: true },
        )
      } catch (error) {
        throw new Error(
          `${name}: replay with CAIPAY_FUZZ_SEED=${baseSeed} (operation seed ${seed})\n${error}`,
        )
      }
      // Not an assertion: a glance at what the generator reached.
      if (process.env.CAIPAY_FUZZ_VERBOSE) console.info(name, Object.fromEntries(statuses))
      expect(({} as Json).polluted).toBeUndefined()
    })
  })
})
