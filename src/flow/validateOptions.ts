import { canonicalCaip } from '../caip/caip.js'
import type { OptionsResponse, PaymentOption } from '../contract/gateway.js'
import { PayError } from '../errors/PayError.js'

/**
 * Checks an options answer as a whole before anything in it is shown or selected; a hostile gateway
 * controls every byte of it. Refuses (`invalid_response`):
 * - two options with one id (the user would pick one row and the flow sign another);
 * - `info` about another payment than the one asked for;
 * - a data-collection form that is not an http(s) URL (a `javascript:` URL would run in the host app);
 * - one asset shown with different decimals by different options (`assertOneDecimalsPerAsset`).
 */
export function validateOptions(response: OptionsResponse, paymentId: string): void {
  const ids = new Set<string>()
  if (response.info && response.info.paymentId !== paymentId) {
    throw invalid('The options answer describes another payment.', {
      paymentId,
      answered: response.info.paymentId,
    })
  }
  assertFormUrl(response.collectData?.url, undefined)
  for (const option of response.options) {
    if (ids.has(option.id)) throw invalid('Two options share one id.', { optionId: option.id })
    ids.add(option.id)
    assertFormUrl(option.collectData?.url, option.id)
  }
  assertOneDecimalsPerAsset(response.options)
}

/**
 * One asset shows one decimals in every option (else one of them misstates the amount), the asset
 * compared by its canonical identity: one EVM token in two spellings is one asset.
 */
export function assertOneDecimalsPerAsset(
  options: readonly PaymentOption[],
  code: 'invalid_response' | 'invalid_snapshot' = 'invalid_response',
): void {
  const decimalsByUnit = new Map<string, number>()
  for (const { id, amount } of options) {
    const { unit, display } = amount
    const key = canonicalCaip(unit.startsWith('caip19/') ? unit.slice(7) : unit)
    const seen = decimalsByUnit.get(key) ?? display.decimals
    if (seen !== display.decimals) {
      throw invalid(
        'Options show one asset with different decimals.',
        { optionId: id, unit, decimals: [seen, display.decimals] },
        code,
      )
    }
    decimalsByUnit.set(key, seen)
  }
}

function assertFormUrl(url: string | undefined, optionId: string | undefined): void {
  // An empty URL means "no form" to the flow; anything else must be a web page.
  if (url && !/^https?:\/\/[^\s]/i.test(url)) {
    throw invalid('The data-collection form URL is not an http(s) URL.', {
      ...(optionId !== undefined && { optionId }),
      scheme: url.slice(0, url.indexOf(':') + 1 || 12),
    })
  }
}

function invalid(
  message: string,
  context: Record<string, unknown>,
  code: 'invalid_response' | 'invalid_snapshot' = 'invalid_response',
): PayError {
  return new PayError({ code, message, context })
}
