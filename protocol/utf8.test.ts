import { afterEach, describe, expect, it } from 'vitest'
import { decodeUtf8 } from './utf8.js'

const RealDecoder = globalThis.TextDecoder
afterEach(() => {
  globalThis.TextDecoder = RealDecoder
})

describe('decodeUtf8 without TextDecoder (Hermes)', () => {
  const samples = [
    new TextEncoder().encode('order 42: café ☕ 𝄞 日本'),
    new Uint8Array([0x61, 0xff, 0x62]),
    new Uint8Array([0xe2, 0x82]),
    new Uint8Array([0xc0, 0xaf]),
    new Uint8Array([0xed, 0xa0, 0x80]),
    new Uint8Array([0xf4, 0x90, 0x80, 0x80]),
    new Uint8Array([]),
  ]

  it('agrees with TextDecoder on valid text and on malformed sequences', () => {
    const random = Array.from({ length: 300 }, (_, n) =>
      Uint8Array.from({ length: n % 13 }, (_, k) => (n * 131 + k * 71 + (n >> 2) * k * 29) % 256),
    )
    const all = [...samples, ...random]
    const expected = all.map((bytes) => new RealDecoder().decode(bytes))
    ;(globalThis as { TextDecoder?: unknown }).TextDecoder = undefined
    expect(all.map(decodeUtf8)).toEqual(expected)
  })
})
