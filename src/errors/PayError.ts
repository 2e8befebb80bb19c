import type { ServiceErrorCode } from '../contract/errors.js'

/** Codes raised by the wallet library itself (never sent by the service). */
export const clientErrorCodes = [
  'invalid_transition',
  'unsupported_namespace',
  'unsupported_method',
  'missing_signer',
  'action_rejected',
  'user_rejected',
  'poll_timeout',
  'aborted',
  'invalid_link',
  'untrusted_host',
  'invalid_response',
  'network_error',
  'collect_data_failed',
  'invalid_action',
  'invalid_caip',
  'invalid_amount',
  'invalid_signer',
  'unknown_option',
  'no_options',
  'signer_failed',
  'action_in_doubt',
  'invalid_snapshot',
  'unsupported_environment',
  'invalid_webhook_signature',
  'push_option',
] as const
export type ClientErrorCode = (typeof clientErrorCodes)[number]

export type PayErrorCode = ServiceErrorCode | ClientErrorCode

export interface PayErrorOptions<C extends PayErrorCode = PayErrorCode> {
  code: C
  /** Short, human sentence; the first line of `message`. */
  message: string
  /** HTTP status when the error came from (or is rendered to) HTTP. */
  status?: number
  /** Structured facts about the failure, safe to log. */
  context?: Record<string, unknown>
  details?: string
  cause?: unknown
}

/**
 * The one error type of caipay. Narrow by `code` (`isPayError(e, 'quote_expired')`), never by message.
 * The printed message is the short sentence, then context lines, then details.
 */
export class PayError<C extends PayErrorCode = PayErrorCode> extends Error {
  override readonly name = 'PayError' as const
  readonly code: C
  readonly status: number | undefined
  readonly shortMessage: string
  readonly context: Readonly<Record<string, unknown>>
  readonly details: string | undefined

  constructor(options: PayErrorOptions<C>) {
    const context = Object.freeze({ ...options.context })
    super(formatMessage(options.message, context, options.details), { cause: options.cause })
    this.code = options.code
    this.status = options.status
    this.shortMessage = options.message
    this.context = context
    this.details = options.details
  }

  /** Walks the `cause` chain and returns the deepest error (or the first one `fn` accepts). */
  walk(fn?: (error: unknown) => boolean): unknown {
    let current: unknown = this
    while (current instanceof Error && current.cause !== undefined) {
      if (fn?.(current)) return current
      current = current.cause
    }
    return fn ? (fn(current) ? current : undefined) : current
  }
}

function formatMessage(short: string, context: Record<string, unknown>, details?: string): string {
  const lines = Object.entries(context)
    .filter(([, v]) => v !== undefined)
    .map(([k, v]) => `  ${k}: ${typeof v === 'string' ? v : safeJson(v)}`)
  return [short, lines.length ? `\n${lines.join('\n')}` : '', details ? `\nDetails: ${details}` : ''].join('')
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? v.toString() : v)) ?? String(value)
  } catch {
    return String(value)
  }
}

/**
 * Narrows by name and code rather than `instanceof`, so an error from another copy of caipay
 * (ESM next to CJS, or two bundles) still counts.
 */
export function isPayError<C extends PayErrorCode>(error: unknown, code?: C): error is PayError<C> {
  if (typeof error !== 'object' || error === null) return false
  const candidate = error as { name?: unknown; code?: unknown }
  return (
    candidate.name === 'PayError' &&
    typeof candidate.code === 'string' &&
    (code === undefined || candidate.code === code)
  )
}
