import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { gunzipSync } from 'node:zlib'

/** A span as OTLP/JSON carries it, with its attributes read into plain values. */
export interface ReceivedSpan {
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  kind: number
  attributes: Record<string, string | number | boolean>
  service: string
}

export interface OtlpReceiver {
  /** For OTEL_EXPORTER_OTLP_ENDPOINT (the exporter posts to `${endpoint}/v1/traces`). */
  endpoint: string
  spans: ReceivedSpan[]
  /** Content types of the requests received (what the exporter chose to send). */
  contentTypes: string[]
  close(): Promise<void>
}

interface OtlpValue {
  stringValue?: string
  intValue?: string | number
  boolValue?: boolean
  doubleValue?: number
}
interface OtlpAttribute {
  key: string
  value: OtlpValue
}
interface OtlpExport {
  resourceSpans?: {
    resource?: { attributes?: OtlpAttribute[] }
    scopeSpans?: {
      spans?: (Omit<ReceivedSpan, 'attributes' | 'service' | 'parentSpanId'> & {
        parentSpanId?: string
        attributes?: OtlpAttribute[]
      })[]
    }[]
  }[]
}

/**
 * An OTLP/HTTP trace receiver: accepts POST /v1/traces in OTLP's JSON encoding (what
 * @opentelemetry/exporter-trace-otlp-http sends), gzip or not, answers 200 with an empty partial
 * success, and keeps every span it was sent. Anything else (protobuf) is answered 415 and recorded.
 */
export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const spans: ReceivedSpan[] = []
  const contentTypes: string[] = []
  const server: Server = createServer((request, response) => {
    const chunks: Buffer[] = []
    request.on('data', (chunk: Buffer) => chunks.push(chunk))
    request.on('end', () => {
      const type = request.headers['content-type'] ?? ''
      contentTypes.push(type)
      if (request.method !== 'POST' || request.url !== '/v1/traces' || !type.startsWith('application/json')) {
        response.writeHead(415).end()
        return
      }
      let body = Buffer.concat(chunks)
      if (request.headers['content-encoding'] === 'gzip') body = gunzipSync(body)
      spans.push(...decode(JSON.parse(body.toString('utf8')) as OtlpExport))
      response.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    endpoint: `http://127.0.0.1:${port}`,
    spans,
    contentTypes,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}

function decode(exported: OtlpExport): ReceivedSpan[] {
  return (exported.resourceSpans ?? []).flatMap((resourceSpans) => {
    const service = String(attributesOf(resourceSpans.resource?.attributes)['service.name'] ?? '')
    return (resourceSpans.scopeSpans ?? []).flatMap((scope) =>
      (scope.spans ?? []).map((span) => ({
        traceId: span.traceId,
        spanId: span.spanId,
        parentSpanId: span.parentSpanId ?? '',
        name: span.name,
        kind: span.kind,
        attributes: attributesOf(span.attributes),
        service,
      })),
    )
  })
}

function attributesOf(attributes: OtlpAttribute[] | undefined): Record<string, string | number | boolean> {
  const values: Record<string, string | number | boolean> = {}
  for (const { key, value } of attributes ?? [])
    values[key] = value.stringValue ?? value.boolValue ?? value.doubleValue ?? Number(value.intValue)
  return values
}
