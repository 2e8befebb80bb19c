import { afterEach, describe, expect, it } from 'vitest'
import { isPayError } from '../errors/PayError.js'
import { createGatewayClient } from './gateway.js'
import { randomHex, randomUuid } from './random.js'

const realCrypto = globalThis.crypto

afterEach(() => {
  Object.defineProperty(globalThis, 'crypto', { value: realCrypto, configurable: true, writable: true })
})

describe('random ids from getRandomValues only', () => {
  it('UUID v4 with the RFC 9562 variant, without crypto.randomUUID', () => {
    Object.defineProperty(globalThis, 'crypto', {
      value: { getRandomValues: realCrypto.getRandomValues.bind(realCrypto) },
      configurable: true,
      writable: true,
    })
    const ids = new Set(Array.from({ length: 200 }, randomUuid))
    expect(ids.size).toBe(200)
    for (const id of ids)
      expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(randomHex(16)).toMatch(/^[0-9a-f]{32}$/)
  })

  it('without getRandomValues a client is refused at creation with unsupported_environment', () => {
    Object.defineProperty(globalThis, 'crypto', { value: undefined, configurable: true, writable: true })
    try {
      createGatewayClient({ baseUrl: 'http://127.0.0.1:1', auth: { apiKey: 'k' } })
      expect.unreachable()
    } catch (error) {
      expect(isPayError(error, 'unsupported_environment')).toBe(true)
      expect((error as Error).message).toContain('react-native-get-random-values')
    }
  })
})
