import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'

/**
 * Secrets at rest (webhook signing secrets, and the stored idempotent answers that carry them), sealed
 * with AES-256-GCM under a key from the environment (`secretsKey: "env:NAME"`, 32 bytes as base64 or
 * 64 hex characters). A sealed value names its key by a short fingerprint, so after a rotation the
 * previous keys (`previousSecretsKeys`) still open what `caipay secrets rotate` has not re-sealed yet.
 * Without a key, values are stored as they are (and the server warns at start).
 */
export interface SecretBox {
  /** The fingerprint of the key `seal` uses. */
  readonly keyId: string
  seal(plain: string): string
  /** The plain value: a sealed one opened with its key, anything else as it is. */
  open(stored: string): string
  /** Whether `stored` is sealed under the current key. */
  isCurrent(stored: string): boolean
}

const prefix = 'caipay-sealed:v1:'

export function isSealed(stored: string): boolean {
  return stored.startsWith(prefix)
}

/** The box for these keys (current first), or undefined when no key is configured. */
export function secretBox(keys: {
  current: string | null
  previous: readonly string[]
}): SecretBox | undefined {
  if (keys.current === null) return undefined
  const current = parseKey(keys.current, 'secretsKey')
  const byId = new Map<string, Buffer>()
  for (const [i, text] of keys.previous.entries()) {
    const key = parseKey(text, `previousSecretsKeys.${i}`)
    byId.set(keyIdOf(key), key)
  }
  const keyId = keyIdOf(current)
  byId.set(keyId, current)
  return {
    keyId,
    seal(plain) {
      const iv = randomBytes(12)
      const cipher = createCipheriv('aes-256-gcm', current, iv)
      const sealed = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final(), cipher.getAuthTag()])
      return `${prefix}${keyId}:${iv.toString('base64url')}:${sealed.toString('base64url')}`
    },
    open(stored) {
      if (!isSealed(stored)) return stored
      const [id, iv, sealed] = stored.slice(prefix.length).split(':')
      const key = id === undefined ? undefined : byId.get(id)
      if (!key || iv === undefined || sealed === undefined)
        throw new Error(
          `A secret is sealed under key ${id}, which is neither secretsKey nor one of previousSecretsKeys.`,
        )
      const bytes = Buffer.from(sealed, 'base64url')
      const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'))
      decipher.setAuthTag(bytes.subarray(bytes.length - 16))
      return Buffer.concat([
        decipher.update(bytes.subarray(0, bytes.length - 16)),
        decipher.final(),
      ]).toString('utf8')
    },
    isCurrent(stored) {
      return stored.startsWith(`${prefix}${keyId}:`)
    },
  }
}

/** 32 bytes from base64 (44 characters) or hex (64); anything else is a configuration error. */
export function parseKey(text: string, path: string): Buffer {
  const key = /^[0-9a-fA-F]{64}$/.test(text) ? Buffer.from(text, 'hex') : Buffer.from(text, 'base64')
  if (key.length !== 32 || (!/^[0-9a-fA-F]{64}$/.test(text) && key.toString('base64') !== text.trim()))
    throw new Error(`Invalid configuration:\n  ${path}: expected 32 bytes as base64 or 64 hex characters`)
  return key
}

function keyIdOf(key: Buffer): string {
  return createHash('sha256').update('caipay secrets key').update(key).digest('hex').slice(0, 12)
}

/** Opens a possibly sealed value; a sealed one without a configured key is an operator's error. */
export function openSecret(box: SecretBox | undefined, stored: string): string {
  if (box) return box.open(stored)
  if (isSealed(stored))
    throw new Error(
      'A secret is sealed but no secretsKey is configured: set secretsKey to the key that sealed it.',
    )
  return stored
}

export function sealSecret(box: SecretBox | undefined, plain: string): string {
  return box ? box.seal(plain) : plain
}

const boxes = new Map<string, SecretBox | undefined>()

/** The box of a server's config (built once per set of keys). */
export function configuredSecretBox(config: {
  secretsKey: string | null
  previousSecretsKeys: readonly string[]
}): SecretBox | undefined {
  const id = JSON.stringify([config.secretsKey, config.previousSecretsKeys])
  if (!boxes.has(id))
    boxes.set(id, secretBox({ current: config.secretsKey, previous: config.previousSecretsKeys }))
  return boxes.get(id)
}
