import * as z from 'zod/mini'
import { AmountUnit, Caip10, ErrorResponse, ResponseAmountUnit } from '../contract/common.js'
import { type Endpoint, operationErrorCodes } from '../contract/endpoint.js'
import { endpoints } from '../contract/endpoints.js'
import {
  apiVersions,
  defaultApiVersion,
  type ServiceErrorCode,
  serviceErrorStatus,
} from '../contract/errors.js'
import { CryptoSettlementInput, MerchantUpdateBody } from '../contract/merchant.js'
import { PaymentCreateBodyPreview } from '../contract/payment.js'
import { databaseRetryAfterSeconds } from './errors.js'
import {
  SolanaPayBody,
  SolanaPayLabel,
  SolanaPayParams,
  SolanaPayTransaction,
  solanaPayErrors,
  solanaPayPostErrors,
} from './routes/solanaPay.js'
import { wcpWireStatus } from './wcp/routes.js'
import { wcpEndpoints } from './wcp/wire.js'

type JsonSchema = Record<string, unknown>

/**
 * The JSON Schema form of what a refinement checks, for the refinements JSON Schema can state (and the
 * words for the one it cannot). Every refinement of a request schema must have an entry: the contract
 * tests walk the schemas and fail on one that has none, so the document never states less than the
 * server checks.
 */
export const jsonForms = z.registry<JsonSchema>()

jsonForms.add(Caip10, {
  description: 'CAIP-10 account id; eip155 addresses are 0x + 40 hex, solana addresses a base58 32-byte key.',
})

/**
 * A CAIP-10 account as one exact branch per namespace rule rather than the generic pattern with
 * if/then refinements beside it: the two say the same, but generators (Schemathesis) can draw the
 * branches directly, where the refined form left them filtering out nearly every string they drew.
 */
const caip10Branches: JsonSchema[] = [
  { pattern: '^eip155:[-_a-zA-Z0-9]{1,32}:0x[0-9a-fA-F]{40}$' },
  { pattern: '^solana:[-_a-zA-Z0-9]{1,32}:[1-9A-HJ-NP-Za-km-z]{32,44}$' },
  { pattern: `^${namespaceOtherThan(['eip155', 'solana'])}:[-_a-zA-Z0-9]{1,32}:[-.%a-zA-Z0-9]{1,128}$` },
]

/**
 * A CAIP-2 namespace (3 to 8 of `[-a-z0-9]`) that is none of `names` (all six long), written without a
 * lookahead: generators draw a lookahead by filtering, and Hypothesis failed its filter_too_much health
 * check on it. Six-character names are ruled out one character at a time.
 */
function namespaceOtherThan(names: string[]): string {
  const alphabet = [...'-0123456789abcdefghijklmnopqrstuvwxyz']
  const differing = (prefix: string): string => {
    const next = new Set(names.filter((name) => name.startsWith(prefix)).map((name) => name[prefix.length]))
    const rest = 5 - prefix.length
    const branches = [
      `${characterClass(alphabet.filter((c) => !next.has(c)))}${rest ? `[-a-z0-9]{${rest}}` : ''}`,
    ]
    // A character that completes a name has no branch: that name is the one string left out.
    if (rest) for (const c of next) branches.push(`${c}${differing(prefix + c)}`)
    return `(?:${branches.join('|')})`
  }
  return `(?:[-a-z0-9]{3,5}|[-a-z0-9]{7,8}|${differing('')})`
}

/** `[...]` for sorted characters, runs written as ranges, `-` first so that it stands for itself. */
function characterClass(chars: string[]): string {
  let body = ''
  for (let i = 0; i < chars.length; i++) {
    let j = i
    while (j + 1 < chars.length && chars[j + 1].charCodeAt(0) === chars[j].charCodeAt(0) + 1) j++
    body += j - i >= 2 ? `${chars[i]}-${chars[j]}` : chars.slice(i, j + 1).join('')
    i = j
  }
  return `[${body}]`
}

/**
 * An amount unit in a response is one a request could name: the server keeps the unit a payment was made
 * in. (The wallet core reads any three-letter code, so a later server's new currency does not break it.)
 */
const amountUnitBranches = (z.toJSONSchema(AmountUnit, { io: 'input' }) as JsonSchema).anyOf

function publishedForm(ctx: { zodSchema: unknown; jsonSchema: JsonSchema }): void {
  if (ctx.zodSchema === Caip10) {
    delete ctx.jsonSchema.pattern
    ctx.jsonSchema.anyOf = caip10Branches
  } else if (ctx.zodSchema === ResponseAmountUnit) {
    ctx.jsonSchema.anyOf = amountUnitBranches
  }
}

jsonForms.add(MerchantUpdateBody, { minProperties: 1 })
jsonForms.add(CryptoSettlementInput, {
  description: '`destination` must be an account on the chain of `asset` (the CAIP-2 prefix of both).',
})

/** PostgreSQL text cannot hold NUL, so the server refuses it in any request string (app.ts). */
const noNul = '^[^\\u0000]*$'
/**
 * A header value as it travels: 1 to `max` characters of printable ASCII starting and ending with a visible
 * one, between optional spaces and tabs, which HTTP does not count as part of the value (the parser strips
 * them before the server reads it, so `Idempotency-Key: <tab>k` is the key `k`).
 */
function headerValue(max: number): JsonSchema {
  return {
    type: 'string',
    pattern: `^[\\t ]*[\\x21-\\x7e](?:[\\x20-\\x7e]{0,${max - 2}}[\\x21-\\x7e])?[\\t ]*$`,
  }
}

export function toJsonSchema(schema: z.ZodMiniType, io: 'input' | 'output'): JsonSchema {
  const json = z.toJSONSchema(schema, {
    io,
    target: 'draft-2020-12',
    metadata: jsonForms,
    override: publishedForm as never,
  }) as JsonSchema
  delete json.$schema
  return io === 'input' ? refuseNul(json) : json
}

function refuseNul(schema: unknown): JsonSchema {
  if (Array.isArray(schema)) return schema.map(refuseNul) as unknown as JsonSchema
  if (!schema || typeof schema !== 'object') return schema as JsonSchema
  const out: JsonSchema = {}
  for (const [key, value] of Object.entries(schema))
    out[key] = typeof value === 'object' ? refuseNul(value) : value
  if (out.type !== 'string' || out.enum !== undefined || out.const !== undefined) return out
  if (Array.isArray(out.anyOf) && out.anyOf.every((branch) => isNulFree(branch as JsonSchema))) return out
  if (out.pattern === undefined) out.pattern = noNul
  else if (mayMatchNul(out.pattern as string))
    out.allOf = [...((out.allOf as JsonSchema[]) ?? []), { pattern: noNul }]
  return out
}

function isNulFree(branch: JsonSchema): boolean {
  return typeof branch.pattern === 'string' && !mayMatchNul(branch.pattern)
}

/** Whether a pattern could match a string holding NUL: unanchored, or with `.`, `\S`, `\W`, `\D` or `[^`. */
function mayMatchNul(pattern: string): boolean {
  if (!pattern.startsWith('^') || !pattern.endsWith('$')) return true
  const outsideClasses = pattern
    .replace(/\\./g, (escaped) => (/\\[SWD]/.test(escaped) ? escaped : ''))
    .replace(/\[[^\]]*\]/g, (cls) => (cls.startsWith('[^') ? '[^' : ''))
  return /\.|\\[SWD]|\[\^/.test(outsideClasses)
}

const requestIdHeader = {
  'Request-Id': {
    description: 'This request, as the server logged it.',
    required: true,
    schema: { type: 'string' },
  },
}

interface Mount {
  /** The header that carries the API version in and out. */
  versionHeader: string
  /** The status the mount answers for a status the shared pipeline chose. */
  wireStatus: (status: number) => number
}

function errorResponses(endpoint: Endpoint, mount: Mount): Record<string, JsonSchema> {
  return errorResponsesOf(operationErrorCodes(endpoint), mount)
}

function errorResponsesOf(codes: readonly ServiceErrorCode[], mount: Mount): Record<string, JsonSchema> {
  const byStatus = new Map<number, Set<ServiceErrorCode>>()
  for (const code of codes) {
    const status = mount.wireStatus(serviceErrorStatus[code])
    if (!byStatus.has(status)) byStatus.set(status, new Set())
    byStatus.get(status)!.add(code)
  }
  // The database unreachable: nothing was done, retry (errors.ts).
  byStatus.set(503, new Set(['internal_error']))
  const out: Record<string, JsonSchema> = {}
  for (const [status, codes] of [...byStatus].sort(([a], [b]) => a - b)) {
    const list = [...codes].sort()
    const retry = status === 429 || status === 503
    out[String(status)] = {
      description: list.map((code) => `\`${code}\``).join(', '),
      headers: {
        ...requestIdHeader,
        ...(retry
          ? {
              'Retry-After': {
                description: `Seconds to wait before retrying${status === 503 ? ` (${databaseRetryAfterSeconds} while the database is unreachable)` : ''}.`,
                required: true,
                schema: { type: 'string', pattern: '^[0-9]+$' },
              },
            }
          : {}),
      },
      content: {
        'application/json': {
          schema: {
            allOf: [{ $ref: '#/components/schemas/ErrorResponse' }],
            properties: { code: { enum: list } },
          },
        },
      },
    }
  }
  return out
}

function parameters(endpoint: Endpoint, mount: Mount): JsonSchema[] {
  const out: JsonSchema[] = []
  for (const [location, schema] of [
    ['path', endpoint.params],
    ['query', endpoint.query],
  ] as const) {
    if (!schema) continue
    const json = toJsonSchema(schema, 'input')
    const required = new Set((json.required as string[] | undefined) ?? [])
    for (const [name, property] of Object.entries((json.properties as Record<string, JsonSchema>) ?? {})) {
      out.push({
        name,
        in: location,
        required: location === 'path' || required.has(name),
        schema: property,
        ...(location === 'query' ? { style: 'form', explode: true } : {}),
      })
    }
  }
  if (endpoint.auth === 'merchant') {
    out.push({
      name: 'Merchant-Id',
      in: 'header',
      required: true,
      description: "The merchant the call acts for (one of the partner's, same mode as the key).",
      schema: headerValue(64),
    })
  }
  if (endpoint.idempotencyKey || endpoint.method !== 'GET') {
    out.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: endpoint.idempotencyKey === 'required',
      description:
        'Replays within 24 h return the stored response with `Idempotent-Replayed: true`; the same key with ' +
        'another request is `409 idempotency_conflict`. An empty value is refused, not taken for absent.',
      schema: headerValue(255),
    })
  }
  if (endpoint.prefer === 'wait') {
    out.push({
      name: 'Prefer',
      in: 'header',
      required: false,
      description:
        'RFC 7240 preferences. `wait=<seconds>` holds the answer of a payment not final yet until its status ' +
        "changes or that long passes (at most the server's `statusWaitMaxMs`, 20 s by default); such an " +
        'answer carries `Preference-Applied`, and `pollInMs: 0` while the payment is not final (ask again ' +
        'at once). Other preferences, and a value that does not parse, are ignored; printable ASCII (and ' +
        'tabs) only.',
      schema: { type: 'string', pattern: '^[\\t -~]*$' },
      example: 'wait=20',
    })
  }
  out.push({
    name: mount.versionHeader,
    in: 'header',
    required: false,
    description:
      "Overrides the account's pinned version; previews only when sent. An empty value is refused.",
    schema: { type: 'string', enum: [...apiVersions] },
  })
  return out
}

/** Request bodies a reader can send as they are (the examples phase of a fuzzer sends them too). */
const bodyExamples: Record<string, Record<string, { summary: string; value: unknown }>> = {
  createMerchant: {
    shop: {
      summary: 'A merchant',
      value: { merchantName: 'Coffee Shop', merchantEmail: 'shop@example.com' },
    },
  },
  updateMerchant: { rename: { summary: 'Rename', value: { merchantName: 'Coffee Shop & Bakery' } } },
  createCryptoSettlements: {
    base: {
      summary: 'USDC on Base to the merchant wallet',
      value: {
        settlements: [
          {
            asset: 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
            destination: 'eip155:8453:0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
          },
        ],
      },
    },
  },
  updateCryptoSettlement: {
    wallet: {
      summary: 'Another wallet on the same chain',
      value: { destination: 'eip155:8453:0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359' },
    },
  },
  createPayment: {
    usd: {
      summary: '12.50 USD',
      value: { referenceId: 'order-1042', amount: { unit: 'iso4217/USD', value: '1250' } },
    },
  },
  createRefund: { full: { summary: 'Refund a succeeded payment', value: { paymentId: 'pay_3fK9sLq0Vw2' } } },
  capturePayment: {
    part: {
      summary: 'Capture 8.00 of a 12.50 USD payment',
      value: { amount: { unit: 'iso4217/USD', value: '800' } },
    },
  },
  simulatePayment: { succeeded: { summary: 'Pay it (test mode)', value: { outcome: 'succeeded' } } },
  createWebhookEndpoint: {
    https: { summary: 'A public https receiver', value: { url: 'https://shop.example.com/webhooks/caipay' } },
    sandbox: {
      summary: 'A receiver on this machine (test keys only)',
      value: { url: 'http://127.0.0.1:9/webhooks', enabledEvents: ['payment.succeeded', 'payment.failed'] },
    },
  },
  gatewayOptions: {
    evm: {
      summary: 'An EVM wallet',
      value: { accounts: ['eip155:8453:0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed'] },
    },
  },
}

/** OpenAPI links: the flows a client (and a stateful fuzzer) follows from one answer to the next. */
const paymentId = { id: '$response.body#/paymentId' }
const links: Record<string, Record<string, JsonSchema>> = {
  createMerchant: Object.fromEntries(
    ['getMerchant', 'updateMerchant', 'listSettlements', 'createCryptoSettlements', 'deleteMerchant'].map(
      (op) => [op, { operationId: op, parameters: { merchantId: '$response.body#/merchant/id' } }],
    ),
  ),
  createCryptoSettlements: Object.fromEntries(
    ['updateCryptoSettlement', 'deleteCryptoSettlement'].map((op) => [
      op,
      {
        operationId: op,
        parameters: { merchantId: '$request.path.merchantId', id: '$response.body#/settlements/0/id' },
      },
    ]),
  ),
  createPayment: Object.fromEntries(
    [
      'getPaymentStatus',
      'getPayment',
      'cancelPayment',
      'simulatePayment',
      'gatewayGetPayment',
      'gatewayGetStatus',
      'gatewayOptions',
    ].map((op) => [op, { operationId: op, parameters: paymentId }]),
  ),
  createRefund: Object.fromEntries(
    ['getRefund', 'simulateRefund'].map((op) => [
      op,
      { operationId: op, parameters: { id: '$response.body#/refundId' } },
    ]),
  ),
  createSubscription: Object.fromEntries(
    ['getSubscription', 'cancelSubscription', 'simulateSubscription'].map((op) => [
      op,
      { operationId: op, parameters: { id: '$response.body#/subscriptionId' } },
    ]),
  ),
  createTestClock: Object.fromEntries(
    ['getTestClock', 'advanceTestClock'].map((op) => [
      op,
      { operationId: op, parameters: { id: '$response.body#/id' } },
    ]),
  ),
  gatewayOptions: {
    gatewayFetch: {
      operationId: 'gatewayFetch',
      description: 'Resolve the first option (its build action, if it has one).',
      parameters: { id: '$request.path.id' },
      requestBody: {
        optionId: '$response.body#/options/0/id',
        data: '$response.body#/options/0/actions/0/build/data',
      },
    },
    gatewayConfirm: {
      operationId: 'gatewayConfirm',
      description: 'Confirm the first option with one result per action.',
      parameters: { id: '$request.path.id' },
      requestBody: { optionId: '$response.body#/options/0/id', results: ['0x'] },
    },
  },
  gatewayFetch: {
    gatewayConfirm: {
      operationId: 'gatewayConfirm',
      parameters: { id: '$request.path.id' },
      requestBody: { optionId: '$request.body#/optionId', results: ['0x'] },
    },
  },
  gatewayConfirm: {
    gatewayGetStatus: { operationId: 'gatewayGetStatus', parameters: { id: '$request.path.id' } },
  },
  createWebhookEndpoint: Object.fromEntries(
    [
      'listWebhookDeliveries',
      'getWebhookEndpoint',
      'sendTestWebhook',
      'rotateWebhookSecret',
      'deleteWebhookEndpoint',
    ].map((op) => [op, { operationId: op, parameters: { id: '$response.body#/id' } }]),
  ),
  sendTestWebhook: {
    retryWebhookDelivery: {
      operationId: 'retryWebhookDelivery',
      parameters: { id: '$request.path.id', deliveryId: '$response.body#/id' },
    },
  },
}

const offeredOption =
  '`optionId` must be an option the server offered for this payment (`400 params_validation` otherwise).'
/**
 * What the server checks beyond the request schema, each a rule JSON Schema cannot state (it depends on
 * the clock, on stored state, on this server's configuration or on two fields together); each answers
 * `400 params_validation` (or the 400 code named). A list's `cursor` rule is added to every list.
 */
const operationRules: Record<string, string> = {
  createPayment:
    '`amount.unit` is one of the listed `iso4217/` currencies or `caip19/` of an asset this server ' +
    'prices: the assets of its configured chains and the built-in USDC on Ethereum, Base and Solana. ' +
    '`expiresAt` is in the future and at most 30 days away. ' +
    '`capture: "manual"` holds the money once paid until captured or voided (caipay\'s; default ' +
    '`automatic`); `captureBy` (manual only) is after `expiresAt` and at most the configured hold ' +
    '(`capture.maxHoldSeconds`) from now, defaulting to `capture.defaultHoldSeconds` from now. A manual ' +
    'payment is offered only paths whose money reaches the service (no direct EVM transfer). ' +
    'The `checkout` field is accepted only with `Pay-Version: 2026-02-19.preview`.',
  capturePayment:
    'Only a manual-capture payment whose capture is `authorized` and before its `captureBy` ' +
    '(`409 invalid_state`, whose message says what the payment allows now). No body captures all of it; ' +
    "`amount` is in the payment's unit, at most what was authorized, at least one unit of the asset that " +
    'paid. The captured part settles through the normal settlement batches; the rest is refunded to the ' +
    'account that paid (a refund, listed under the payment). One capture per payment.',
  voidPayment:
    'Only a manual-capture payment whose capture is `authorized` (`409 invalid_state` otherwise). ' +
    'Everything is refunded to the account that paid (a refund, listed under the payment); the capture ' +
    'becomes `voided`. At `captureBy` the service voids by itself (`expired`).',
  createRefund:
    "The payment must have succeeded (`400 payment_not_succeeded`). `amount.unit` is the payment's unit and " +
    '`amount.value` at most what remains refundable (and at least one unit of the asset that paid); ' +
    '`destination` is on the chain the payment was paid on (required when no account paid it). A ' +
    'manual-capture payment still authorized is voided instead: all of it (no `amount` short of it, no ' +
    "`destination`), answered with the void's refund.",
  createSubscription:
    '`amount.unit` as for createPayment. Exactly one of `periods` or `endAt` (after `startAt`, at most 1200 ' +
    "periods, before the year 10000). `startAt` (default now, or the test clock's time) is at most 5 minutes " +
    'past and one year ahead. `testClock` is a test clock of this partner (test keys only).',
  advanceTestClock: "`frozenTime` is not before the clock's current time: a test clock only moves forward.",
  simulatePush:
    "`asset` (default: the first that can) must price this payment's amount: a USD amount any test asset, " +
    'a `caip19/` amount only that asset, an amount in another currency none (`400 params_validation`).',
  createCryptoSettlements:
    'Each `destination` is an account on the chain of its `asset` (the CAIP-2 prefix of both).',
  updateCryptoSettlement: "`destination` is an account on the chain of the settlement's asset.",
  createWebhookEndpoint:
    "The URL's host must resolve to a public address (with a test key a loopback one too); a live key needs https.",
  gatewayOptions:
    'Each `refresh` id is an option the server offered for this payment, for one of `accounts`.',
  gatewayFetch: `${offeredOption} \`data\` is the build data of that option.`,
  gatewayConfirm: `${offeredOption} \`results\` answer its actions one to one, in order, each in the form its method implies.`,
  wcp_options: 'Each `refresh` id is an option the server offered for this payment, for one of `accounts`.',
  wcp_fetch: `${offeredOption} \`data\` is the build data of that option (or empty).`,
  wcp_confirm: `${offeredOption} \`results\` answer its actions one to one, in order.`,
}
const cursorRule =
  '`cursor` is opaque: only a `nextCursor` this list answered is one (`400 params_validation` otherwise).'

interface ZodDef {
  _zod: { def: { type: string; innerType?: ZodDef } }
}

/** A body the caller may leave out (`z.nullish`): capture's, where none captures all of it. */
function isOptionalBody(endpoint: Endpoint): boolean {
  const type = (endpoint.body as ZodDef | undefined)?._zod.def.type
  return type === 'optional' || type === 'nullable'
}

/** The object a body that may be left out holds when sent (documented as the body, not required). */
function sentBody(endpoint: Endpoint): Endpoint['body'] {
  let schema = endpoint.body as ZodDef | undefined
  while (schema && (schema._zod.def.type === 'optional' || schema._zod.def.type === 'nullable'))
    schema = schema._zod.def.innerType
  return schema as Endpoint['body']
}

function describe(name: string, endpoint: Endpoint): string | undefined {
  const query = endpoint.query ? toJsonSchema(endpoint.query, 'input') : undefined
  const lists = Boolean((query?.properties as JsonSchema | undefined)?.cursor)
  const rules = [operationRules[name], lists ? cursorRule : undefined].filter(Boolean)
  return rules.length > 0 ? rules.join(' ') : undefined
}

function operation(name: string, endpoint: Endpoint, mount: Mount, tag: string): JsonSchema {
  const body =
    name === 'createPayment'
      ? { anyOf: [toJsonSchema(endpoint.body!, 'input'), toJsonSchema(PaymentCreateBodyPreview, 'input')] }
      : endpoint.body
        ? toJsonSchema(sentBody(endpoint)!, 'input')
        : undefined
  const examples = bodyExamples[name]
  const description = describe(name, endpoint)
  return {
    operationId: name,
    summary: endpoint.summary,
    ...(endpoint.deprecated ? { deprecated: true } : {}),
    ...(description ? { description } : {}),
    tags: [tag],
    security: endpoint.auth === 'gateway' ? [{ ApiKey: [] }, { AppId: [], ClientId: [] }] : [{ ApiKey: [] }],
    parameters: parameters(endpoint, mount),
    ...(body
      ? {
          requestBody: {
            required: !isOptionalBody(endpoint),
            content: { 'application/json': { schema: body, ...(examples ? { examples } : {}) } },
          },
        }
      : {}),
    responses: {
      [String(endpoint.status)]: {
        description: 'Success',
        headers: {
          ...requestIdHeader,
          [mount.versionHeader]: {
            description: 'The version the request was served with.',
            required: true,
            schema: { type: 'string', enum: [...apiVersions] },
          },
          ...(endpoint.method !== 'GET'
            ? {
                'Idempotent-Replayed': {
                  description:
                    'Present (`true`) on a replay of an earlier request with the same Idempotency-Key.',
                  schema: { type: 'string', enum: ['true'] },
                },
              }
            : {}),
          ...(endpoint.deprecated
            ? { Deprecation: { required: true, schema: { type: 'string', enum: ['true'] } } }
            : {}),
          ...(endpoint.prefer === 'wait'
            ? {
                'Preference-Applied': {
                  description:
                    'Present (`wait=<seconds>`, the wait applied, rounded up) when the answer was held for ' +
                    '`Prefer: wait`.',
                  schema: { type: 'string', pattern: '^wait=[0-9]+$' },
                },
                Vary: {
                  description: 'Names `Prefer` (and `Origin` under a CORS allow-list).',
                  schema: { type: 'string' },
                },
              }
            : {}),
        },
        content: { 'application/json': { schema: toJsonSchema(endpoint.response, 'output') } },
        ...(links[name] ? { links: links[name] } : {}),
      },
      ...errorResponses(endpoint, mount),
    },
  }
}

const securitySchemes = {
  ApiKey: {
    type: 'apiKey',
    in: 'header',
    name: 'Api-Key',
    description: 'svc_test_... (test mode) or svc_... (live); printable ASCII.',
  },
  AppId: {
    type: 'apiKey',
    in: 'header',
    name: 'App-Id',
    description: 'Public app id (wallets); with Client-Id.',
  },
  ClientId: {
    type: 'apiKey',
    in: 'header',
    name: 'Client-Id',
    description: 'The wallet installation, 1-255 ASCII.',
  },
}

function document(input: {
  title: string
  description: string
  publicBaseUrl: string
  tags: string[]
  paths: Record<string, Record<string, JsonSchema>>
}): JsonSchema {
  return {
    openapi: '3.1.0',
    info: { title: input.title, version: defaultApiVersion, description: input.description },
    servers: [{ url: input.publicBaseUrl }],
    tags: input.tags.map((name) => ({ name })),
    components: { securitySchemes, schemas: { ErrorResponse: toJsonSchema(ErrorResponse, 'output') } },
    paths: input.paths,
  }
}

const pipelineNote =
  'Errors are `{code, message}` (+ `issues` for `params_validation`), each status listing its codes. ' +
  'Header values must be printable ASCII (`400 header_not_ascii`); no request string may hold a NUL ' +
  'character. A method a path does not have is `405` with `Allow`. While the database is unreachable ' +
  'any operation answers `503` with `Retry-After`.'

const native: Mount = { versionHeader: 'Pay-Version', wireStatus: (status) => status }

function pathOf(endpoint: Endpoint): string {
  return endpoint.path.replace(/:([A-Za-z]+)/g, '{$1}')
}

/** The OpenAPI 3.1 document of the merchant API and wallet gateway, from the schemas that validate. */
export function openApiDocument(publicBaseUrl: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {}
  for (const [name, endpoint] of Object.entries(endpoints) as [string, Endpoint][]) {
    paths[pathOf(endpoint)] ??= {}
    paths[pathOf(endpoint)]![endpoint.method.toLowerCase()] = operation(
      name,
      endpoint,
      native,
      tagOf(endpoint),
    )
  }
  paths['/healthz'] = {
    get: {
      operationId: 'healthz',
      summary: 'Liveness and database check',
      tags: ['System'],
      security: [],
      responses: {
        '200': {
          description: 'Healthy',
          headers: requestIdHeader,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                properties: { ok: { const: true } },
                required: ['ok'],
                additionalProperties: false,
              },
            },
          },
        },
        '503': {
          description: '`internal_error`: the database is unreachable',
          headers: requestIdHeader,
          content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
        },
      },
    },
  }
  paths['/v1/solana-pay/{id}/{token}'] = solanaPayOperations()
  return document({
    title: 'caipay payments service',
    description:
      'Merchant API and wallet gateway. Test keys (svc_test_) and live keys (svc_) see disjoint data. ' +
      'Browsers may call the gateway from any origin by default (CORS, config key `cors`); the merchant API ' +
      `answers only the origins listed in \`cors.merchant\` (none by default). ${pipelineNote} ` +
      'The WalletConnect Pay SDK wire format of the gateway is described at `/wcp/openapi.json`.',
    publicBaseUrl,
    tags: ['Merchants', 'Payments', 'Subscriptions', 'Balances', 'Gateway', 'Webhooks', 'Sandbox', 'System'],
    paths,
  })
}

/**
 * The Solana Pay transaction request (routes/solanaPay.ts): public, outside the contract registry (no
 * credentials, no API version: a wallet that scanned a QR code speaks only the Solana Pay spec).
 */
function solanaPayOperations(): Record<string, JsonSchema> {
  // What any plain route of the app can answer: a malformed request, the rate limit, the database down.
  const pipeline: ServiceErrorCode[] = ['invalid_params', 'rate_limited', 'internal_error']
  const parameters = Object.entries(
    (toJsonSchema(SolanaPayParams, 'input').properties as Record<string, JsonSchema>) ?? {},
  ).map(([name, schema]) => ({ name, in: 'path', required: true, schema }))
  const success = (schema: JsonSchema) => ({
    '200': {
      description: 'Success',
      headers: requestIdHeader,
      content: { 'application/json': { schema } },
    },
  })
  return {
    get: {
      operationId: 'solanaPayLabel',
      summary: "A Solana Pay transaction request's label and icon (docs/push-payments.md)",
      tags: ['Gateway'],
      security: [],
      parameters,
      responses: {
        ...success(toJsonSchema(SolanaPayLabel, 'output')),
        ...errorResponsesOf([...pipeline, ...solanaPayErrors], native),
      },
    },
    post: {
      operationId: 'solanaPayTransaction',
      summary:
        "A Solana Pay transaction request's transaction for `account`: the gateway's own Solana transfer " +
        "with the payment's reference key, fee paid and signed by the service; the wallet signs and sends it",
      description:
        '`token` is the mint of a live Solana asset the payment can be pushed in, and the payment is ' +
        'waiting for payment (`409 invalid_state` once paid or cancelled, `410 payment_expired`).',
      tags: ['Gateway'],
      security: [],
      parameters,
      requestBody: {
        required: true,
        content: { 'application/json': { schema: toJsonSchema(SolanaPayBody, 'input') } },
      },
      responses: {
        ...success(toJsonSchema(SolanaPayTransaction, 'output')),
        ...errorResponsesOf([...pipeline, ...solanaPayPostErrors], native),
      },
    },
  }
}

/** The OpenAPI 3.1 document of the `/wcp` mount (the gateway in the WalletConnect Pay SDK's wire format). */
export function wcpOpenApiDocument(publicBaseUrl: string): JsonSchema {
  const mount: Mount = { versionHeader: 'WCP-Version', wireStatus: wcpWireStatus }
  const paths: Record<string, Record<string, JsonSchema>> = {}
  for (const [name, endpoint] of Object.entries(wcpEndpoints) as [string, Endpoint][]) {
    paths[pathOf(endpoint)] ??= {}
    paths[pathOf(endpoint)]![endpoint.method.toLowerCase()] = operation(
      `wcp_${name}`,
      endpoint,
      mount,
      'WalletConnect Pay',
    )
  }
  return document({
    title: 'caipay /wcp: the wallet gateway in the WalletConnect Pay SDK wire format',
    description:
      "Set the SDK's `baseUrl` to `<server>/wcp`. Same payments, state and credentials as `/v1/gateway`. " +
      'The path `id` is a payment id or a whole payment link, percent-encoded. Client errors the SDK does not ' +
      `read by status (403, 409, 422, 451) answer 400 with the same code. ${pipelineNote}`,
    publicBaseUrl,
    tags: ['WalletConnect Pay'],
    paths,
  })
}

function tagOf(endpoint: Endpoint): string {
  if (endpoint.path.startsWith('/v1/gateway')) return 'Gateway'
  if (endpoint.path.startsWith('/v1/test')) return 'Sandbox'
  if (endpoint.path.startsWith('/v1/webhook-endpoints')) return 'Webhooks'
  if (endpoint.path.startsWith('/v1/balances')) return 'Balances'
  if (endpoint.path.startsWith('/v1/subscriptions')) return 'Subscriptions'
  if (endpoint.path.startsWith('/v1/merchants') && !endpoint.path.includes('payments')) return 'Merchants'
  return 'Payments'
}
