import { createHmac, randomBytes } from 'node:crypto'

/** `whsec_` + base64 of 32 random bytes (Standard Webhooks secrets are base64 after the prefix). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`
}

/** `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}">`, keyed with the secret's decoded bytes. */
export function sign(secret: string, messageId: string, timestamp: number, body: string): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
  return `v1,${createHmac('sha256', key).update(`${messageId}.${timestamp}.${body}`).digest('base64')}`
}

/**
 * The headers of one attempt; every secret in `secrets` signs (rotation overlap). `svix-*` is what
 * WalletConnect Pay sends; the same values go as `webhook-*`, the Standard Webhooks names, so any
 * Standard Webhooks library verifies a delivery as it arrives.
 */
export function signedHeaders(
  secrets: readonly string[],
  messageId: string,
  body: string,
  timestamp = Math.floor(Date.now() / 1000),
): Record<string, string> {
  const signature = secrets.map((secret) => sign(secret, messageId, timestamp, body)).join(' ')
  return {
    'svix-id': messageId,
    'svix-timestamp': String(timestamp),
    'svix-signature': signature,
    'webhook-id': messageId,
    'webhook-timestamp': String(timestamp),
    'webhook-signature': signature,
  }
}
