import { describe, expect, it } from 'vitest'
import { formatAmount, formatMinor, fromDecimalString, parseMinor, toDecimalString } from './amount.js'

describe('amounts', () => {
  it('parses minor-unit strings exactly, beyond float precision', () => {
    expect(parseMinor('0')).toBe(0n)
    expect(parseMinor('123456789012345678901234567890')).toBe(123456789012345678901234567890n)
  })
  it.each(['', '-1', '01', '1.5', '1e6', ' 1', 'abc'])('rejects %j', (value) => {
    expect(() => parseMinor(value)).toThrowError(/integer/)
  })
  it('formats and round-trips decimals', () => {
    expect(toDecimalString(1250n, 2)).toBe('12.50')
    expect(toDecimalString(5n, 6)).toBe('0.000005')
    expect(toDecimalString(7n, 0)).toBe('7')
    expect(fromDecimalString('12.5', 6)).toBe(12_500_000n)
    expect(() => fromDecimalString('0.0000001', 6)).toThrowError(/decimal/)
    expect(formatAmount(12_500_000n, 6, 'USDC')).toBe('12.50 USDC')
    expect(formatAmount(12_345_678n, 6)).toBe('12.345678')
    expect(() => formatMinor(-1n)).toThrowError(/negative/)
  })
})
