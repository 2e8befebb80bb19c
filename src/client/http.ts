import type { ErrorResponse } from '../contract/common.js'
import type { ServiceErrorCode } from '../contract/errors.js'
import * as schemas from '../contract/generated/walletSchemas.js'
import { type Issue, type Parse, parser } from '../contract/validate.js'
import { sleep, throwIfAborted } from '../errors/abort.js'
import { isPayError, PayError } from '../errors/PayError.js'
import { randomUuid } from './random.js'
import {
  defaultRetryPolicy,
  isRetryableStatus,
  parseRetryAfter,
  type RetryPolicy,
  retryDelay,
} from './retry.js'
import { type SdkInfo, sdkHeaders } from './sdk.js'

export type Fetch = (input: string, init: RequestInit) => Promise<Response>

export type Credentials = { apiKey: string } | { appId: string; clientId: string }

export interface HttpClientConfig {
  baseUrl: string
  auth?: Credentials
  /** Sent as `Pay-Version`; omit to use the version pinned to the account. */
  version?: string
  fetch?: Fetch
  retry?: Partial<RetryPolicy>
  sdk?: Partial<SdkInfo>
  /** Extra headers on every call (e.g. `Merchant-Id`). */
  headers?: Record<string, string>
}

export interface HttpRequest<T> {
  method: string
  path: string
  query?: Record<string, unknown>
  body?: unknown
  headers?: Record<string, string | undefined> | undefined
  idempotencyKey?: string
  /** A POST without an idempotency key is retried only when repeating it is harmless. */
  safeToRetry?: boolean
  signal?: AbortSignal
  /** How long the service was asked to hold its answer (`Prefer: wait`), added to the time limit. */
  holdMs?: number
  /**
   * Checks the success body. The gateway client passes a validator generated from the contract, the
   * merchant client (`zodParser`) the zod schema itself: this module stays free of zod either way.
   */
  parse: Parse<T>
  /**
   * The codes an error body may carry: the endpoint's, from the contract. Any other code (a client-side
   * one such as `user_rejected`, or one the endpoint cannot answer) becomes `invalid_response`.
   */
  errorCodes: readonly ServiceErrorCode[]
}

export interface HttpClient {
  request<T>(request: HttpRequest<T>): Promise<T>
}

const requestAborted = 'The request was aborted.'

/** JSON over `fetch` with typed errors, response validation and bounded, jittered retries. */
export function createHttpClient(config: HttpClientConfig): HttpClient {
  const policy = { ...defaultRetryPolicy, ...config.retry }
  const doFetch: Fetch = config.fetch ?? ((input, init) => globalThis.fetch(input, init))
  const baseUrl = config.baseUrl.replace(/\/+$/, '')
  const fixedHeaders: Record<string, string> = {
    accept: 'application/json',
    ...sdkHeaders(config.sdk),
    ...authHeaders(config.auth),
    ...(config.version ? { 'Pay-Version': config.version } : {}),
    ...config.headers,
  }

  async function request<T>(req: HttpRequest<T>): Promise<T> {
    const retryable = req.method === 'GET' || req.idempotencyKey !== undefined || req.safeToRetry === true
    const url = baseUrl + req.path + queryString(req.query)
    const headers: Record<string, string> = { ...fixedHeaders }
    for (const [name, value] of Object.entries(req.headers ?? {}))
      if (value !== undefined) headers[name] = value
    if (req.idempotencyKey) headers['Idempotency-Key'] = req.idempotencyKey
    if (req.body !== undefined) headers['content-type'] = 'application/json'
    const init: RequestInit = {
      method: req.method,
      headers,
      ...(req.body !== undefined ? { body: JSON.stringify(req.body) } : {}),
    }

    for (let attempt = 1; ; attempt++) {
      throwIfAborted(req.signal, requestAborted)
      // Cut by the caller's signal or by this attempt's time limit, whichever comes first.
      const attemptCut = new AbortController()
      const cut = () => attemptCut.abort()
      req.signal?.addEventListener('abort', cut)
      const timer = setTimeout(cut, policy.timeoutMs + (req.holdMs ?? 0))
      let delay: number
      try {
        const response = await doFetch(url, { ...init, signal: attemptCut.signal })
        if (response.ok) return await parseBody(response, req)
        const failure = await errorFromResponse(response, req)
        if (!retryable || attempt >= policy.attempts || !isRetryableStatus(response.status)) throw failure
        delay = retryDelay(policy, attempt, parseRetryAfter(response.headers.get('retry-after')))
      } catch (error) {
        throwIfAborted(req.signal, requestAborted)
        // The service's own answer stands; a connection that failed or went silent is retried.
        if (isPayError(error) && !attemptCut.signal.aborted) throw error
        const failure = new PayError({
          code: 'network_error',
          message: attemptCut.signal.aborted
            ? 'The service did not answer in time.'
            : 'The service could not be reached.',
          context: { method: req.method, path: req.path, attempt },
          cause: error,
        })
        if (!retryable || attempt >= policy.attempts) throw failure
        delay = retryDelay(policy, attempt, undefined)
      } finally {
        clearTimeout(timer)
        req.signal?.removeEventListener('abort', cut)
      }
      await sleep(delay, req.signal, requestAborted)
    }
  }

  return { request }
}

async function parseBody<T>(response: Response, req: HttpRequest<T>): Promise<T> {
  let json: unknown
  try {
    json = await response.json()
  } catch (error) {
    throw invalidResponse(req, response.status, 'Response body is not JSON.', { cause: error })
  }
  const parsed = req.parse(json)
  if (!parsed.ok) {
    // A few issues say what is wrong without echoing a whole (possibly large) body into logs.
    throw invalidResponse(req, response.status, 'Response does not match the contract.', {
      issues: parsed.issues.slice(0, 5),
    })
  }
  return parsed.value
}

const parseErrorBody = parser<ErrorResponse>(schemas.ErrorResponse)

async function errorFromResponse(response: Response, req: HttpRequest<unknown>): Promise<PayError> {
  const text = await response.text().catch(() => '')
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  const parsed = parseErrorBody(body)
  const context = { method: req.method, path: req.path, status: response.status }
  const code = parsed.ok ? parsed.value.code : undefined
  if (parsed.ok && isOneOf(code, req.errorCodes)) {
    return new PayError({
      code,
      message: parsed.value.message,
      status: response.status,
      context: parsed.value.issues ? { ...context, issues: parsed.value.issues } : context,
    })
  }
  return new PayError({
    code: response.status >= 500 ? 'internal_error' : 'invalid_response',
    message: `The service answered ${response.status} without a valid error body.`,
    status: response.status,
    context,
    details: text.slice(0, 200) || undefined,
  })
}

function invalidResponse(
  req: HttpRequest<unknown>,
  status: number,
  message: string,
  { cause, issues }: { cause?: unknown; issues?: Issue[] },
): PayError {
  return new PayError({
    code: 'invalid_response',
    message,
    status,
    context: { method: req.method, path: req.path, issues },
    cause,
  })
}

function authHeaders(auth: Credentials | undefined): Record<string, string> {
  if (!auth) return {}
  return 'apiKey' in auth ? { 'Api-Key': auth.apiKey } : { 'App-Id': auth.appId, 'Client-Id': auth.clientId }
}

function queryString(query: Record<string, unknown> | undefined): string {
  if (!query) return ''
  // By hand: React Native's URLSearchParams is incomplete.
  const pairs: string[] = []
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined || value === null) continue
    for (const item of Array.isArray(value) ? value : [value])
      pairs.push(`${encodeURIComponent(key)}=${encodeURIComponent(String(item))}`)
  }
  return pairs.length > 0 ? `?${pairs.join('&')}` : ''
}

/** A random idempotency key. */
export function newIdempotencyKey(): string {
  return randomUuid()
}

function isOneOf<C extends string>(value: string | undefined, codes: readonly C[]): value is C {
  return (codes as readonly (string | undefined)[]).includes(value)
}
