import { PayError } from '../errors/PayError.js'

const minorPattern = /^(0|[1-9][0-9]*)$/

/** Parses a minor-unit integer string ("1250") into a bigint; no floats anywhere money is computed. */
export function parseMinor(value: string): bigint {
  if (!minorPattern.test(value)) {
    throw new PayError({
      code: 'invalid_amount',
      message: 'Amount must be a non-negative integer string.',
      context: { value },
    })
  }
  return BigInt(value)
}

export function formatMinor(value: bigint): string {
  if (value < 0n)
    throw new PayError({
      code: 'invalid_amount',
      message: 'Amount must not be negative.',
      context: { value: value.toString() },
    })
  return value.toString()
}

/** Renders minor units with their decimals: (1250n, 2) -> "12.50". */
export function toDecimalString(value: bigint, decimals: number): string {
  const negative = value < 0n
  const digits = (negative ? -value : value).toString().padStart(decimals + 1, '0')
  const whole = digits.slice(0, digits.length - decimals)
  const fraction = decimals > 0 ? `.${digits.slice(digits.length - decimals)}` : ''
  return `${negative ? '-' : ''}${whole}${fraction}`
}

/** Parses a decimal string ("12.5") into minor units; more fraction digits than `decimals` is an error. */
export function fromDecimalString(value: string, decimals: number): bigint {
  const match = /^(\d+)(?:\.(\d+))?$/.exec(value)
  if (!match || (match[2]?.length ?? 0) > decimals) {
    throw new PayError({
      code: 'invalid_amount',
      message: 'Invalid decimal amount.',
      context: { value, decimals },
    })
  }
  return BigInt(match[1]! + (match[2] ?? '').padEnd(decimals, '0'))
}

/** Display text such as "12.50 USDC"; trailing zeros beyond `minFraction` are trimmed. */
export function formatAmount(value: bigint, decimals: number, symbol?: string, minFraction = 2): string {
  let text = toDecimalString(value, decimals)
  if (decimals > minFraction) text = text.replace(new RegExp(`(\\.\\d{${minFraction}}\\d*?)0+$`), '$1')
  return symbol ? `${text} ${symbol}` : text
}
