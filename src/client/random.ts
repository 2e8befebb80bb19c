import { PayError } from '../errors/PayError.js'

interface RandomSource {
  getRandomValues<T extends Uint8Array>(array: T): T
}

/**
 * Web Crypto's `getRandomValues`: browsers (plain-http pages too), Node 20, and React Native once
 * `react-native-get-random-values` is imported. `crypto.randomUUID` is not used: Hermes and non-secure
 * browser origins lack it.
 */
function randomSource(): RandomSource {
  const crypto = (globalThis as { crypto?: Partial<RandomSource> }).crypto
  if (typeof crypto?.getRandomValues !== 'function') {
    throw new PayError({
      code: 'unsupported_environment',
      message:
        'crypto.getRandomValues is missing (in React Native, import "react-native-get-random-values" first).',
      context: { missing: 'crypto.getRandomValues' },
    })
  }
  return crypto as RandomSource
}

/** Throws `unsupported_environment` now rather than in the middle of a payment. */
export function assertRandomSource(): void {
  randomSource()
}

export function randomHex(byteLength: number): string {
  const bytes = randomSource().getRandomValues(new Uint8Array(byteLength))
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, '0')).join('')
}

/** A version 4 UUID (RFC 9562), e.g. for idempotency keys. */
export function randomUuid(): string {
  const hex = randomHex(16)
  const variant = ((Number.parseInt(hex[16]!, 16) & 0x3) | 0x8).toString(16)
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-4${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20)}`
}
