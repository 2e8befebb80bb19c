import * as z from 'zod/mini'
import { ErrorResponse } from '../contract/common.js'
import { type Endpoint, endpoints } from '../contract/endpoints.js'
import { apiVersions, defaultApiVersion } from '../contract/errors.js'
import { PaymentCreateBodyPreview } from '../contract/payment.js'

type JsonSchema = Record<string, unknown>

function toSchema(schema: z.ZodMiniType, io: 'input' | 'output'): JsonSchema {
  // Refinements (CAIP checks) have no JSON Schema form: the text of the description stays.
  const json = z.toJSONSchema(schema, { io, target: 'draft-2020-12', unrepresentable: 'any' }) as JsonSchema
  delete json.$schema
  return json
}

const errorResponse = {
  description: 'Error',
  content: { 'application/json': { schema: { $ref: '#/components/schemas/ErrorResponse' } } },
}

function parameters(endpoint: Endpoint): JsonSchema[] {
  const out: JsonSchema[] = []
  for (const [location, schema] of [
    ['path', endpoint.params],
    ['query', endpoint.query],
  ] as const) {
    if (!schema) continue
    const json = toSchema(schema, 'input')
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
    out.push({ name: 'Merchant-Id', in: 'header', required: true, schema: { type: 'string', maxLength: 64 } })
  }
  if (endpoint.idempotencyKey || endpoint.method !== 'GET') {
    out.push({
      name: 'Idempotency-Key',
      in: 'header',
      required: endpoint.idempotencyKey === 'required',
      description: 'Replays return the original response with Idempotent-Replayed: true (24 h).',
      schema: { type: 'string', minLength: 1, maxLength: 255 },
    })
  }
  out.push({
    name: 'Pay-Version',
    in: 'header',
    required: false,
    description: "Overrides the account's pinned version; previews only when sent.",
    schema: { type: 'string', enum: [...apiVersions] },
  })
  return out
}

/** The OpenAPI 3.1 document, generated from the contract registry (the same schemas that validate). */
export function openApiDocument(publicBaseUrl: string): JsonSchema {
  const paths: Record<string, Record<string, JsonSchema>> = {}
  for (const [name, endpoint] of Object.entries(endpoints) as [string, Endpoint][]) {
    const path = endpoint.path.replace(/:([A-Za-z]+)/g, '{$1}')
    const body =
      name === 'createPayment'
        ? { anyOf: [toSchema(endpoint.body!, 'input'), toSchema(PaymentCreateBodyPreview, 'input')] }
        : endpoint.body
          ? toSchema(endpoint.body, 'input')
          : undefined
    paths[path] ??= {}
    paths[path][endpoint.method.toLowerCase()] = {
      operationId: name,
      summary: endpoint.summary,
      ...(endpoint.deprecated ? { deprecated: true } : {}),
      ...(name === 'createPayment'
        ? { description: 'The `checkout` field is accepted only with `Pay-Version: 2026-02-19.preview`.' }
        : {}),
      tags: [tagOf(endpoint)],
      security:
        endpoint.auth === 'gateway' ? [{ ApiKey: [] }, { AppId: [], ClientId: [] }] : [{ ApiKey: [] }],
      parameters: parameters(endpoint),
      ...(body ? { requestBody: { required: true, content: { 'application/json': { schema: body } } } } : {}),
      responses: {
        [String(endpoint.status)]: {
          description: 'Success',
          content: { 'application/json': { schema: toSchema(endpoint.response, 'output') } },
        },
        '400': errorResponse,
        '401': errorResponse,
        '403': errorResponse,
        '404': errorResponse,
        '409': errorResponse,
        '429': errorResponse,
        '500': errorResponse,
      },
    }
  }
  paths['/healthz'] = {
    get: {
      operationId: 'healthz',
      summary: 'Liveness and database check',
      tags: ['System'],
      security: [],
      responses: { '200': { description: 'Healthy' }, '503': errorResponse },
    },
  }
  return {
    openapi: '3.1.0',
    info: {
      title: 'caipay payments service',
      version: defaultApiVersion,
      description:
        'Merchant API and wallet gateway. Errors are {code, message} (+ issues for params_validation). ' +
        'Test keys (svc_test_) and live keys (svc_) see disjoint data. ' +
        'Browsers may call the gateway from any origin by default (CORS, config key `cors`); ' +
        'the merchant API answers only the origins listed in `cors.merchant` (none by default).',
    },
    servers: [{ url: publicBaseUrl }],
    tags: [
      { name: 'Merchants' },
      { name: 'Payments' },
      { name: 'Gateway' },
      { name: 'Sandbox' },
      { name: 'System' },
    ],
    components: {
      securitySchemes: {
        ApiKey: { type: 'apiKey', in: 'header', name: 'Api-Key' },
        AppId: { type: 'apiKey', in: 'header', name: 'App-Id' },
        ClientId: { type: 'apiKey', in: 'header', name: 'Client-Id' },
      },
      schemas: { ErrorResponse: toSchema(ErrorResponse, 'output') },
    },
    paths,
  }
}

function tagOf(endpoint: Endpoint): string {
  if (endpoint.path.startsWith('/v1/gateway')) return 'Gateway'
  if (endpoint.path.startsWith('/v1/test')) return 'Sandbox'
  if (endpoint.path.startsWith('/v1/merchants') && !endpoint.path.includes('payments')) return 'Merchants'
  return 'Payments'
}
