import type { CollectData } from '../contract/gateway.js'
import { hasOwn } from '../contract/hasOwn.js'
import { PayError } from '../errors/PayError.js'

export interface CollectDataUrlOptions {
  /** Fields the wallet already knows; only keys the form's schema requires are sent. */
  prefill?: Record<string, unknown>
  theme?: 'light' | 'dark'
  /** Already base64url-encoded by the host; appended verbatim. */
  themeVariables?: string
}

/** What the hosted form posted: `IC_COMPLETE`, or `IC_ERROR` with its `error` text. */
export type CollectDataMessage = { type: 'complete' } | { type: 'error'; error: string }

/**
 * The hosted form URL with the optional `prefill`, `theme` and `themeVariables` query parameters
 * (spec rule 2). Built by hand rather than with `URL`: React Native's URL lacks `searchParams.set`.
 */
export function buildCollectDataUrl(collectData: CollectData, options: CollectDataUrlOptions = {}): string {
  const query: string[] = []
  const prefill = pickRequired(options.prefill, collectData.schema)
  if (prefill) query.push(`prefill=${base64UrlEncode(JSON.stringify(prefill))}`)
  if (options.theme === 'light' || options.theme === 'dark') query.push(`theme=${options.theme}`)
  if (options.themeVariables !== undefined) {
    // Verbatim, so it must not be able to smuggle in further parameters.
    if (!/^[A-Za-z0-9_-]*={0,2}$/.test(options.themeVariables)) {
      throw new PayError({ code: 'invalid_params', message: 'themeVariables must be base64url.' })
    }
    query.push(`themeVariables=${options.themeVariables}`)
  }
  if (query.length === 0) return collectData.url

  const hashAt = collectData.url.indexOf('#')
  const base = hashAt === -1 ? collectData.url : collectData.url.slice(0, hashAt)
  const hash = hashAt === -1 ? '' : collectData.url.slice(hashAt)
  const separator = base.includes('?') ? (base.endsWith('?') || base.endsWith('&') ? '' : '&') : '?'
  return `${base}${separator}${query.join('&')}${hash}`
}

/**
 * Reads a form message as the host received it (`event.data`): an object, or a string (React Native
 * WebViews only pass strings) holding JSON or the bare type. Anything else is not ours: undefined.
 */
export function parseCollectDataMessage(data: unknown): CollectDataMessage | undefined {
  let message = data
  if (typeof data === 'string') {
    if (data === 'IC_COMPLETE' || data === 'IC_ERROR') message = { type: data }
    else {
      try {
        message = JSON.parse(data)
      } catch {
        return undefined
      }
    }
  }
  if (message === null || typeof message !== 'object') return undefined
  const { type, error } = message as { type?: unknown; error?: unknown }
  if (type === 'IC_COMPLETE') return { type: 'complete' }
  if (type === 'IC_ERROR') {
    return { type: 'error', error: typeof error === 'string' && error ? error : 'Data collection failed.' }
  }
  return undefined
}

/** Required top-level fields of the form's JSON Schema (carried as a string). */
export function requiredFields(schema: string | undefined): string[] {
  if (!schema) return []
  try {
    const required = (JSON.parse(schema) as { required?: unknown } | null)?.required
    return Array.isArray(required) ? required.filter((key): key is string => typeof key === 'string') : []
  } catch {
    return []
  }
}

function pickRequired(
  prefill: Record<string, unknown> | undefined,
  schema: string | undefined,
): Record<string, unknown> | undefined {
  if (!prefill) return undefined
  const picked: Record<string, unknown> = {}
  for (const key of requiredFields(schema)) {
    if (hasOwn(prefill, key) && prefill[key] !== undefined) picked[key] = prefill[key]
  }
  return Object.keys(picked).length > 0 ? picked : undefined
}

/** UTF-8 -> base64url without padding, using only web globals (browsers, React Native, Node 20). */
export function base64UrlEncode(text: string): string {
  const bytes = new TextEncoder().encode(text)
  let binary = ''
  for (const byte of bytes) binary += String.fromCharCode(byte)
  return btoa(binary).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '')
}
