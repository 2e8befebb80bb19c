import type { AnyWebhookEvent } from '../contract/webhooks.js'
import { PayError } from '../errors/PayError.js'

/**
 * Verifies a webhook delivery in the Standard Webhooks format (what caipay and WalletConnect Pay sign
 * with): `svix-signature` (or `webhook-signature`) holds space-separated `v1,<base64 HMAC-SHA256>` of
 * `{svix-id}.{svix-timestamp}.{raw body}`, keyed with the base64 part of the `whsec_` secret. Built on
 * Web Crypto only, so it runs in Node 20+, edge runtimes and browsers alike.
 *
 * Passes when any one signature matches (during a secret rotation deliveries carry two) and the
 * timestamp is within `toleranceSeconds` (default 300) of `now`; the comparison is constant-time.
 * Returns the parsed event; throws PayError `invalid_webhook_signature` otherwise.
 */
export async function verifyWebhook(
  secret: string,
  headers: WebhookHeaders,
  rawBody: string | Uint8Array,
  options: { toleranceSeconds?: number; now?: Date } = {},
): Promise<AnyWebhookEvent> {
  const id = header(headers, 'svix-id') ?? header(headers, 'webhook-id')
  const timestamp = header(headers, 'svix-timestamp') ?? header(headers, 'webhook-timestamp')
  const signatures = header(headers, 'svix-signature') ?? header(headers, 'webhook-signature')
  if (!id || !timestamp || !signatures) refuse('Missing svix-id, svix-timestamp or svix-signature.')
  if (!/^\d{1,12}$/.test(timestamp)) refuse('svix-timestamp is not unix seconds.')
  const nowSeconds = Math.floor((options.now ?? new Date()).getTime() / 1000)
  if (Math.abs(nowSeconds - Number(timestamp)) > (options.toleranceSeconds ?? 300)) {
    refuse('svix-timestamp is outside the tolerance: a stale or replayed delivery.')
  }
  const body = typeof rawBody === 'string' ? rawBody : new TextDecoder().decode(rawBody)
  const expected = await hmacSha256(secretBytes(secret), `${id}.${timestamp}.${body}`)
  let matched = false
  for (const entry of signatures.split(' ')) {
    const [version, signature] = entry.split(',', 2)
    if (version !== 'v1' || !signature) continue
    const given = decodeBase64(signature)
    // Keep looking after a match: the time taken does not tell which signature matched.
    if (given && constantTimeEqual(given, expected)) matched = true
  }
  if (!matched) refuse('No signature matches this secret.')
  try {
    return JSON.parse(body) as AnyWebhookEvent
  } catch {
    refuse('The body is not JSON.')
  }
}

/** A `Headers` object (fetch, edge runtimes) or a plain record (Node's `IncomingHttpHeaders`). */
export type WebhookHeaders =
  | { get(name: string): string | null }
  | Record<string, string | string[] | undefined>

function header(headers: WebhookHeaders, name: string): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(name: string): string | null }).get(name) ?? undefined
  }
  const record = headers as Record<string, string | string[] | undefined>
  const key = Object.keys(record).find((k) => k.toLowerCase() === name)
  const value = key === undefined ? undefined : record[key]
  return Array.isArray(value) ? value[0] : value
}

function refuse(message: string): never {
  throw new PayError({ code: 'invalid_webhook_signature', message })
}

function secretBytes(secret: string): Uint8Array {
  const bytes = decodeBase64(secret.startsWith('whsec_') ? secret.slice(6) : secret)
  if (!bytes || bytes.length === 0) refuse('The secret is not a whsec_ base64 secret.')
  return bytes
}

async function hmacSha256(key: Uint8Array, message: string): Promise<Uint8Array> {
  const cryptoKey = await crypto.subtle.importKey(
    'raw',
    key as BufferSource,
    { name: 'HMAC', hash: 'SHA-256' },
    false,
    ['sign'],
  )
  return new Uint8Array(await crypto.subtle.sign('HMAC', cryptoKey, new TextEncoder().encode(message)))
}

function decodeBase64(text: string): Uint8Array | undefined {
  try {
    const binary = atob(text)
    const bytes = new Uint8Array(binary.length)
    for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i)
    return bytes
  } catch {
    return undefined
  }
}

function constantTimeEqual(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false
  let difference = 0
  for (let i = 0; i < a.length; i++) difference |= a[i]! ^ b[i]!
  return difference === 0
}
