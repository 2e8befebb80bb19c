import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'

const paymentIdPattern = /^pay_[A-Za-z0-9]{1,60}$/

/**
 * The payment id the SDK means. It sends a bare id as it is, but any link other than its own host's
 * percent-encoded whole, twice (the router has undone one); a link to this service's own payment page
 * (`<publicBaseUrl>/pay/{id}`, what `gatewayUrl` hands out) names that payment. Nothing else does.
 */
export function wcpPaymentId(raw: string, config: Pick<ServerConfig, 'publicBaseUrl'>): string {
  if (paymentIdPattern.test(raw)) return raw
  const id = paymentIdOfLink(raw, config.publicBaseUrl)
  if (!id) fail('payment_not_found', 'No payment of this service at that link.', { link: raw.slice(0, 200) })
  return id
}

function paymentIdOfLink(raw: string, publicBaseUrl: string): string | undefined {
  let link: URL
  let base: URL
  try {
    link = new URL(decodeURIComponent(raw))
    base = new URL(publicBaseUrl)
  } catch {
    return undefined
  }
  if (link.origin !== base.origin) return undefined
  const prefix = `${base.pathname.replace(/\/+$/, '')}/pay/`
  if (!link.pathname.startsWith(prefix)) return undefined
  const id = link.pathname.slice(prefix.length)
  return paymentIdPattern.test(id) ? id : undefined
}
