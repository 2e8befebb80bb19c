import { toDecimalString } from '../../amount/amount.js'
import type { Amount } from '../../contract/common.js'

/** "$1,250.00" for fiat, "12.5 USDC" for tokens; exact (the decimal string never passes through a float). */
export function amountText(amount: Amount): string {
  const decimal = toDecimalString(BigInt(amount.value), amount.display.decimals) as `${number}`
  if (amount.unit.startsWith('iso4217/')) {
    return new Intl.NumberFormat('en-US', { style: 'currency', currency: amount.display.assetSymbol }).format(
      decimal,
    )
  }
  const grouped = new Intl.NumberFormat('en-US', { maximumFractionDigits: amount.display.decimals }).format(
    decimal,
  )
  return `${grouped} ${amount.display.assetSymbol}`
}
