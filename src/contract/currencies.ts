import { hasOwn } from './hasOwn.js'

/**
 * The ISO 4217 currencies the service prices in, with their names and minor decimals: the one list that
 * both the request validation (`AmountUnit`, published as an `enum` in /openapi.json) and the server's
 * display facts (src/server/payments/assets.ts) read, so the document cannot offer a unit the server refuses.
 */
export const fiatCurrencies = {
  USD: ['US Dollar', 2],
  EUR: ['Euro', 2],
  GBP: ['Pound Sterling', 2],
  JPY: ['Japanese Yen', 0],
  CHF: ['Swiss Franc', 2],
  CAD: ['Canadian Dollar', 2],
  AUD: ['Australian Dollar', 2],
  NZD: ['New Zealand Dollar', 2],
  CNY: ['Yuan Renminbi', 2],
  HKD: ['Hong Kong Dollar', 2],
  SGD: ['Singapore Dollar', 2],
  SEK: ['Swedish Krona', 2],
  NOK: ['Norwegian Krone', 2],
  DKK: ['Danish Krone', 2],
  PLN: ['Zloty', 2],
  CZK: ['Czech Koruna', 2],
  HUF: ['Forint', 2],
  INR: ['Indian Rupee', 2],
  KRW: ['Won', 0],
  BRL: ['Brazilian Real', 2],
  MXN: ['Mexican Peso', 2],
  ZAR: ['Rand', 2],
  TRY: ['Turkish Lira', 2],
  AED: ['UAE Dirham', 2],
  SAR: ['Saudi Riyal', 2],
  ILS: ['New Israeli Sheqel', 2],
  THB: ['Baht', 2],
  IDR: ['Rupiah', 2],
  PHP: ['Philippine Peso', 2],
  MYR: ['Malaysian Ringgit', 2],
  VND: ['Dong', 0],
  CLP: ['Chilean Peso', 0],
  ISK: ['Iceland Krona', 0],
  KWD: ['Kuwaiti Dinar', 3],
  BHD: ['Bahraini Dinar', 3],
  OMR: ['Rial Omani', 3],
  JOD: ['Jordanian Dinar', 3],
  TND: ['Tunisian Dinar', 3],
} as const satisfies Record<string, readonly [name: string, decimals: number]>

export type FiatCurrency = keyof typeof fiatCurrencies

/** `iso4217/USD`, `iso4217/EUR`...: every fiat amount unit a request may name. */
export type FiatUnit = `iso4217/${FiatCurrency}`

export const fiatUnits = (Object.keys(fiatCurrencies) as FiatCurrency[]).map(
  (code): FiatUnit => `iso4217/${code}`,
)

/** Name and minor decimals of a fiat currency the service prices in, or undefined for any other code. */
export function fiatCurrency(code: string): readonly [name: string, decimals: number] | undefined {
  return hasOwn(fiatCurrencies, code) ? fiatCurrencies[code as FiatCurrency] : undefined
}
