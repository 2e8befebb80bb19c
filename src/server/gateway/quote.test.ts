import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { AssetConfig } from '../chains/types.js'
import { quoteExpiry, tokenAmountFor, usdMinorOf } from './quote.js'

const usdc: AssetConfig = {
  id: 'eip155:8453/erc20:0xabc',
  symbol: 'USDC',
  name: 'USD Coin',
  decimals: 6,
  usdRate: '1',
}
const weth: AssetConfig = {
  id: 'eip155:1/erc20:0xdef',
  symbol: 'WETH',
  name: 'Wrapped Ether',
  decimals: 18,
  usdRate: '3000.5',
}
const usd = (value: string) => ({ unit: 'iso4217/USD', value })

describe('tokenAmountFor', () => {
  it('stablecoins are 1:1: cents become token minor units exactly', () => {
    expect(tokenAmountFor(usd('1250'), usdc)).toBe(12_500_000n)
    expect(tokenAmountFor(usd('1'), usdc)).toBe(10_000n)
  })

  it("rounds up in the merchant's favour", () => {
    const odd: AssetConfig = { ...usdc, usdRate: '3' }
    // $0.01 at $3 per token = 3333.33... minor units -> 3334
    expect(tokenAmountFor(usd('1'), odd)).toBe(3334n)
    // 12.50 / 3000.5 = 0.00416597233794367605... WETH
    expect(tokenAmountFor(usd('1250'), weth)).toBe(4_165_972_337_943_677n)
  })

  it('never pays the merchant less than asked, and never more than one minor unit too much', () => {
    fc.assert(
      fc.property(
        fc.bigInt({ min: 1n, max: 10n ** 15n }),
        fc.integer({ min: 0, max: 18 }),
        fc.bigInt({ min: 1n, max: 10n ** 8n }),
        fc.integer({ min: 0, max: 6 }),
        (cents, decimals, rateDigits, rateScale) => {
          const text = rateDigits.toString().padStart(rateScale + 1, '0')
          const rate = rateScale ? `${text.slice(0, -rateScale)}.${text.slice(-rateScale)}` : text
          const asset = { ...usdc, decimals, usdRate: rate }
          const tokens = tokenAmountFor(usd(cents.toString()), asset)!
          // value in USD cents * scale of the tokens paid vs asked, compared exactly as fractions
          const paid = tokens * rateDigits * 100n
          const asked = cents * 10n ** BigInt(decimals) * 10n ** BigInt(rateScale)
          expect(paid >= asked).toBe(true)
          expect((tokens - 1n) * rateDigits * 100n < asked).toBe(true)
        },
      ),
    )
  })

  it('a caip19 amount pays only in that asset, 1:1 (EVM ids case-insensitive)', () => {
    expect(tokenAmountFor({ unit: `caip19/${usdc.id}`, value: '777' }, usdc)).toBe(777n)
    expect(tokenAmountFor({ unit: 'caip19/eip155:8453/erc20:0xABC', value: '777' }, usdc)).toBe(777n)
    expect(tokenAmountFor({ unit: `caip19/${weth.id}`, value: '777' }, usdc)).toBeNull()
  })

  it('other fiat currencies have no rate: no option', () => {
    expect(tokenAmountFor({ unit: 'iso4217/EUR', value: '100' }, usdc)).toBeNull()
  })

  it('a malformed configured rate is an internal error, not a wrong price', () => {
    expect(() => tokenAmountFor(usd('1'), { ...usdc, usdRate: '0' })).toThrow(/usdRate/)
    expect(() => tokenAmountFor(usd('1'), { ...usdc, usdRate: '1e3' })).toThrow(/usdRate/)
  })
})

describe('usdMinorOf', () => {
  it('USD is itself; a token amount is valued at its rate, rounded down', () => {
    expect(usdMinorOf(usd('100000'), [])).toBe(100_000n)
    expect(usdMinorOf({ unit: `caip19/${usdc.id}`, value: '1000000000' }, [usdc])).toBe(100_000n)
    expect(usdMinorOf({ unit: `caip19/${weth.id}`, value: (10n ** 18n).toString() }, [weth])).toBe(300_050n)
    expect(usdMinorOf({ unit: `caip19/${weth.id}`, value: '1' }, [usdc])).toBeNull()
    expect(usdMinorOf({ unit: 'iso4217/EUR', value: '1' }, [usdc])).toBeNull()
  })
})

describe('quoteExpiry', () => {
  it('five minutes, never after the payment', () => {
    expect(quoteExpiry(1000, 10_000)).toBe(1300)
    expect(quoteExpiry(1000, 1100)).toBe(1100)
  })
})
