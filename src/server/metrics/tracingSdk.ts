import {
  type Attributes,
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import {
  defaultResource,
  detectResources,
  envDetector,
  resourceFromAttributes,
} from '@opentelemetry/resources'
import { BasicTracerProvider, BatchSpanProcessor } from '@opentelemetry/sdk-trace-base'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Tracer } from './tracing.js'

/**
 * The OpenTelemetry SDK, loaded by tracing.ts only when an OTLP endpoint is configured: spans batched
 * to OTLP over HTTP (the exporter reads OTEL_EXPORTER_OTLP_* itself), W3C trace context, and the
 * active span carried across `await` by AsyncLocalStorage. Spans carry routes, kinds, chains and the
 * payment id; never a key, a signature, an address, an amount or a request body.
 */
export function startSdk(): Tracer {
  const resource = defaultResource()
    .merge(resourceFromAttributes({ 'service.name': 'caipay' }))
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES override the name above.
    .merge(detectResources({ detectors: [envDetector] }))
  const provider = new BasicTracerProvider({
    resource,
    spanProcessors: [new BatchSpanProcessor(new OTLPTraceExporter())],
  })
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable())
  propagation.setGlobalPropagator(new W3CTraceContextPropagator())
  trace.setGlobalTracerProvider(provider)
  const tracer = provider.getTracer('caipay')

  function inContext<T>(span: Span, parent: Context, work: () => Promise<T>): Promise<T> {
    return context.with(trace.setSpan(parent, span), async () => {
      try {
        return await work()
      } catch (error) {
        span.setStatus({ code: SpanStatusCode.ERROR, message: errorName(error) })
        throw error
      } finally {
        span.end()
      }
    })
  }

  return {
    inSpan(name, attributes, work) {
      const parent = context.active()
      return inContext(tracer.startSpan(name, { attributes: attributes as Attributes }, parent), parent, work)
    },
    continueTrace(traceparent, name, attributes, work) {
      const parent = traceparent === null ? ROOT_CONTEXT : propagation.extract(ROOT_CONTEXT, { traceparent })
      const span = tracer.startSpan(
        name,
        { kind: SpanKind.CONSUMER, attributes: attributes as Attributes },
        parent,
      )
      return inContext(span, parent, work)
    },
    traceparent() {
      const carrier: { traceparent?: string } = {}
      propagation.inject(context.active(), carrier)
      return carrier.traceparent ?? null
    },
    registerRequestSpans(app) {
      registerRequestSpans(app, tracer)
    },
    async flush() {
      await provider.forceFlush()
    },
  }
}

const requestSpans = new WeakMap<FastifyRequest, { span: Span; context: Context }>()

/**
 * A server span per request: started when the request arrives (continuing a caller's `traceparent`),
 * made the active context for the handler (preHandler: after the body is read, whose stream events
 * would lose it), named and ended when the response is sent.
 */
function registerRequestSpans(app: FastifyInstance, tracer: ReturnType<BasicTracerProvider['getTracer']>) {
  app.addHook('onRequest', (request, _reply, done) => {
    const parent = propagation.extract(ROOT_CONTEXT, request.headers)
    const span = tracer.startSpan(
      request.method,
      { kind: SpanKind.SERVER, attributes: { 'http.request.method': request.method } },
      parent,
    )
    requestSpans.set(request, { span, context: trace.setSpan(parent, span) })
    done()
  })
  app.addHook('preHandler', (request, _reply, done) => {
    const started = requestSpans.get(request)
    if (started === undefined) return done()
    context.with(started.context, done)
  })
  app.addHook('onResponse', (request, reply, done) => {
    const started = requestSpans.get(request)
    if (started !== undefined) {
      const route = request.routeOptions.url
      const { span } = started
      if (route !== undefined) {
        span.updateName(`${request.method} ${route}`)
        span.setAttribute('http.route', route)
        const paymentId = paymentIdOf(route, request.params)
        if (paymentId !== undefined) span.setAttribute('caipay.payment_id', paymentId)
      }
      span.setAttribute('http.response.status_code', reply.statusCode)
      if (reply.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR })
      span.end()
    }
    done()
  })
}

/** The payment a route names by its `:id` (the payments and the gateway's payment routes). */
function paymentIdOf(route: string, params: unknown): string | undefined {
  if (!route.startsWith('/v1/payments/:id') && !route.startsWith('/v1/gateway/payment/:id')) return undefined
  const id = (params as { id?: unknown } | undefined)?.id
  return typeof id === 'string' ? id : undefined
}

/** An error's class name only: messages can quote what a caller sent. */
function errorName(error: unknown): string {
  return error instanceof Error ? error.name : 'error'
}
