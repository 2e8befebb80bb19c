import { sameCaip } from '../../caip/caip.js'
import { PayError } from '../../errors/PayError.js'
import type { AssetConfig } from '../chains/types.js'

/** USD has two minor decimals; the payment amount of an `iso4217/USD` payment is in cents. */
const usdDecimals = 2
/** How long a quote holds, capped by the payment's own expiry. */
const quoteTtlS = 300

/** A decimal string as an exact fraction: "0.9998" -> 9998 / 10^4. */
function parseRate(rate: string): { numerator: bigint; scale: bigint } {
  const match = /^(\d+)(?:\.(\d+))?$/.exec(rate)
  if (!match) throw badRate(rate)
  const fraction = match[2] ?? ''
  const numerator = BigInt(match[1]! + fraction)
  if (numerator === 0n) throw badRate(rate)
  return { numerator, scale: 10n ** BigInt(fraction.length) }
}

function badRate(rate: string): PayError {
  return new PayError({
    code: 'internal_error',
    message: 'Configured usdRate must be a positive decimal string.',
    context: { rate },
  })
}

function ceilDiv(a: bigint, b: bigint): bigint {
  return (a + b - 1n) / b
}

/**
 * Token minor units for a payment amount, or null when this asset cannot pay it.
 * USD is converted at the asset's `usdRate` with exact integer arithmetic, rounded up so the merchant
 * never receives less than asked; a `caip19/...` amount is payable only in that very asset, 1:1.
 */
export function tokenAmountFor(amount: { unit: string; value: string }, asset: AssetConfig): bigint | null {
  const value = BigInt(amount.value)
  if (amount.unit.startsWith('caip19/')) return sameCaip(amount.unit.slice(7), asset.id) ? value : null
  if (amount.unit !== 'iso4217/USD') return null
  const { numerator, scale } = parseRate(asset.usdRate)
  // token = usdMinor / 10^2 / rate * 10^decimals, rate = numerator / scale
  return ceilDiv(value * 10n ** BigInt(asset.decimals) * scale, 10n ** BigInt(usdDecimals) * numerator)
}

/**
 * The payment's worth in USD cents (rounded down), for thresholds such as data collection; null when it
 * cannot be known (a crypto amount in an asset without a configured rate, or another fiat currency).
 */
export function usdMinorOf(
  amount: { unit: string; value: string },
  assets: readonly AssetConfig[],
): bigint | null {
  const value = BigInt(amount.value)
  if (amount.unit === 'iso4217/USD') return value
  if (!amount.unit.startsWith('caip19/')) return null
  const asset = assets.find((a) => sameCaip(a.id, amount.unit.slice(7)))
  if (!asset) return null
  const { numerator, scale } = parseRate(asset.usdRate)
  return (value * numerator * 10n ** BigInt(usdDecimals)) / (scale * 10n ** BigInt(asset.decimals))
}

/** Quote expiry: a few minutes, never after the payment itself expires. */
export function quoteExpiry(now: number, paymentExpiresAt: number): number {
  return Math.min(now + quoteTtlS, paymentExpiresAt)
}
