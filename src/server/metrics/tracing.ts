import type { FastifyInstance } from 'fastify'

/**
 * OpenTelemetry traces behind a seam that costs nothing when they are off (docs/operations.md,
 * "Traces"): no OpenTelemetry module is imported, no span or context object is made, and every helper
 * below is one `undefined` check before it runs the work as is. `startTracing` loads the SDK
 * (tracingSdk.ts, a dynamic import) only when the standard OTel environment names an OTLP endpoint.
 */
export type SpanAttributes = Readonly<Record<string, string | number | boolean>>

/** What the loaded SDK offers the seam (tracingSdk.ts). */
export interface Tracer {
  inSpan<T>(name: string, attributes: SpanAttributes, work: () => Promise<T>): Promise<T>
  /** Runs `work` as a span continuing the trace of `traceparent` (a new trace when null). */
  continueTrace<T>(
    traceparent: string | null,
    name: string,
    attributes: SpanAttributes,
    work: () => Promise<T>,
  ): Promise<T>
  /** The active span's W3C traceparent, to carry with a job. */
  traceparent(): string | null
  registerRequestSpans(app: FastifyInstance): void
  flush(): Promise<void>
}

let tracer: Tracer | undefined
let starting: Promise<Tracer | undefined> | undefined

/** Whether the OTel environment asks for traces: an OTLP endpoint, and neither the SDK nor traces disabled. */
export function tracingConfigured(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.OTEL_SDK_DISABLED?.trim().toLowerCase() === 'true') return false
  if (env.OTEL_TRACES_EXPORTER !== undefined && env.OTEL_TRACES_EXPORTER.trim() !== 'otlp') return false
  return Boolean(env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || env.OTEL_EXPORTER_OTLP_ENDPOINT)
}

/**
 * Starts tracing for this process when configured (once; later calls share the first). The exporter
 * reads the rest of the standard environment itself (OTEL_EXPORTER_OTLP_HEADERS, OTEL_SERVICE_NAME,
 * OTEL_TRACES_SAMPLER, OTEL_BSP_*). Returns whether tracing is on.
 */
export async function startTracing(env: NodeJS.ProcessEnv = process.env): Promise<boolean> {
  if (tracer) return true
  if (!tracingConfigured(env)) return false
  starting ??= import('./tracingSdk.js').then((sdk) => {
    tracer = sdk.startSdk()
    return tracer
  })
  return (await starting) !== undefined
}

export const tracingOn = (): boolean => tracer !== undefined

/** Sends the spans ended so far (a stopping server; a test before it reads what was received). */
export async function flushTracing(): Promise<void> {
  await tracer?.flush()
}

/** `work` inside a span (a child of the active one) when tracing is on; `work()` alone otherwise. */
export function inSpan<T>(name: string, attributes: SpanAttributes, work: () => Promise<T>): Promise<T> {
  return tracer === undefined ? work() : tracer.inSpan(name, attributes, work)
}

/** A job's step continuing the trace that enqueued it (`traceparent` stored with the job). */
export function continueTrace<T>(
  traceparent: string | null,
  name: string,
  attributes: SpanAttributes,
  work: () => Promise<T>,
): Promise<T> {
  return tracer === undefined ? work() : tracer.continueTrace(traceparent, name, attributes, work)
}

/** The traceparent to store with a job being enqueued; null when tracing is off or no span is active. */
export function currentTraceparent(): string | null {
  return tracer === undefined ? null : tracer.traceparent()
}

/** A server span per request (route, method, status), when tracing is on; no hook at all otherwise. */
export function registerRequestTracing(app: FastifyInstance): void {
  tracer?.registerRequestSpans(app)
}
