import { PayError } from '../errors/PayError.js'

export interface ParsePaymentLinkOptions {
  /** Hosts a link may point at: `host` or `host:port`. An entry without a port matches any port. */
  trustedHosts: readonly string[]
}

export interface PaymentLink {
  paymentId: string
  /** The https (or loopback http) URL the id came from; undefined for a bare id. */
  url: string | undefined
}

const paymentIdPattern = /^pay_[A-Za-z0-9]{1,60}$/
const loopbackHosts = new Set(['127.0.0.1', 'localhost', '[::1]'])
const maxNesting = 3

/**
 * Extracts the payment id from a link a buyer scanned or tapped:
 * `https://<host>/pay/<id>`, `https://<host>/?pid=<id>` (pid wins), `wc:...?pay=<encoded link>`,
 * a percent-encoded link, or a bare `pay_...` id. Only trusted hosts are accepted, by exact match.
 */
export function parsePaymentLink(link: string, options: ParsePaymentLinkOptions): PaymentLink {
  return parse(link.trim(), options, 0)
}

function parse(link: string, options: ParsePaymentLinkOptions, depth: number): PaymentLink {
  if (depth > maxNesting) throw invalidLink('Payment link is nested too deeply.', link)
  if (paymentIdPattern.test(link)) return { paymentId: link, url: undefined }
  if (/^https?%3A/i.test(link)) return parse(safeDecode(link), options, depth + 1)
  if (/^wc:/i.test(link)) {
    const query = link.slice(link.indexOf('?') + 1)
    const pay = link.includes('?') ? new URLSearchParams(query).get('pay') : null
    if (!pay) throw invalidLink('WalletConnect URI carries no pay= parameter.', link)
    return parse(pay, options, depth + 1)
  }
  return parseUrl(link, options)
}

function parseUrl(link: string, options: ParsePaymentLinkOptions): PaymentLink {
  let url: URL
  try {
    url = new URL(link)
  } catch {
    throw invalidLink('Not a payment link.', link)
  }
  if (url.username || url.password) throw untrusted('Payment links must not carry user info.', url)
  const loopback = loopbackHosts.has(url.hostname)
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback)) {
    throw untrusted('Payment links must use https.', url)
  }
  if (!isTrustedHost(url, options.trustedHosts)) throw untrusted('Payment link host is not trusted.', url)

  const fromQuery = url.searchParams.get('pid')
  const fromPath = /^\/pay\/([^/]+)\/?$/.exec(url.pathname)?.[1]
  const paymentId = fromQuery ?? (fromPath === undefined ? undefined : safeDecode(fromPath))
  if (!paymentId || !paymentIdPattern.test(paymentId))
    throw invalidLink('Payment link carries no valid payment id.', link)
  return { paymentId, url: url.href }
}

function isTrustedHost(url: URL, trustedHosts: readonly string[]): boolean {
  const host = url.host.toLowerCase()
  const hostname = url.hostname.toLowerCase()
  return trustedHosts.some((entry) => {
    const trusted = entry.toLowerCase()
    return trusted.includes(':') && !trusted.startsWith('[')
      ? trusted === host
      : trusted === hostname || trusted === host
  })
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value)
  } catch {
    throw invalidLink('Payment link is not valid percent-encoding.', value)
  }
}

function invalidLink(message: string, link: string): PayError {
  return new PayError({ code: 'invalid_link', message, context: { link: link.slice(0, 200) } })
}

function untrusted(message: string, url: URL): PayError {
  return new PayError({ code: 'untrusted_host', message, context: { host: url.host } })
}

/** The host part used as the default trusted host for a client's base URL. */
export function hostOf(baseUrl: string): string {
  return new URL(baseUrl).host
}
