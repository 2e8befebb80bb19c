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
    const query = link.slice(link.indexOf('?') + 1).split('#')[0]!
    const pay = link.includes('?') ? queryParam(query, 'pay', link) : undefined
    if (!pay) throw invalidLink('WalletConnect URI carries no pay= parameter.', link)
    return parse(pay, options, depth + 1)
  }
  return parseUrl(link, options)
}

/** The parts of an http(s) URL a payment link needs. */
interface LinkUrl {
  scheme: string
  /** Lower case, without a default port: `pay.example.com`, `127.0.0.1:8787`, `[::1]:8787`. */
  host: string
  /** Lower case, without the port. */
  hostname: string
  path: string
  query: string
}

/**
 * Parsed by hand, not with `URL`: React Native's URL does not implement `host`, `hostname`, `pathname` or
 * `searchParams.get`. Stricter than WHATWG parsing on purpose: anything it would repair (backslashes,
 * whitespace, dot segments, percent-encoded or non-ASCII hosts) is refused, since the host decides trust.
 */
const urlPattern = /^([A-Za-z][A-Za-z0-9+.-]*):(\/\/([^/?#]*))?([^?#]*)(\?[^#]*)?(#.*)?$/
const authorityPattern = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?$/
const defaultPorts: Record<string, string> = { http: '80', https: '443' }

function parseUrl(link: string, options: ParsePaymentLinkOptions): PaymentLink {
  // Controls and spaces are refused wherever they are (WHATWG parsing would strip some of them).
  // biome-ignore lint/suspicious/noControlCharactersInRegex: refusing control characters is the point.
  if (/[\u0000-\u0020\u007f\\]/.test(link)) throw invalidLink('Not a payment link.', link)
  const match = urlPattern.exec(link)
  if (!match) throw invalidLink('Not a payment link.', link)
  const scheme = match[1]!.toLowerCase()
  const authority = match[3] ?? ''
  if (authority.includes('@')) throw untrusted('Payment links must not carry user info.', authority)
  if (scheme !== 'https' && scheme !== 'http') throw untrusted('Payment links must use https.', authority)
  const url = parseAuthority(scheme, authority)
  if (!url) throw invalidLink('Not a payment link.', link)
  const parts: LinkUrl = { ...url, path: match[4] || '/', query: (match[5] ?? '').slice(1) }
  if (parts.scheme !== 'https' && !(parts.scheme === 'http' && loopbackHosts.has(parts.hostname))) {
    throw untrusted('Payment links must use https.', parts.host)
  }
  if (!isTrustedHost(parts, options.trustedHosts))
    throw untrusted('Payment link host is not trusted.', parts.host)

  const fromQuery = queryParam(parts.query, 'pid', link)
  const fromPath = /^\/pay\/([^/]+)\/?$/.exec(parts.path)?.[1]
  const paymentId = fromQuery ?? (fromPath === undefined ? undefined : safeDecode(fromPath))
  if (!paymentId || !paymentIdPattern.test(paymentId))
    throw invalidLink('Payment link carries no valid payment id.', link)
  return {
    paymentId,
    url: `${parts.scheme}://${parts.host}${parts.path}${parts.query ? `?${parts.query}` : ''}`,
  }
}

function parseAuthority(
  scheme: string,
  authority: string,
): Pick<LinkUrl, 'scheme' | 'host' | 'hostname'> | undefined {
  const match = authorityPattern.exec(authority)
  if (!match) return undefined
  const hostname = match[1]!.toLowerCase()
  const port = match[2] === undefined ? undefined : String(Number(match[2]))
  if (port !== undefined && Number(port) > 65535) return undefined
  const host = port === undefined || port === defaultPorts[scheme] ? hostname : `${hostname}:${port}`
  return { scheme, host, hostname }
}

/** The first value of a query parameter, decoded as URLSearchParams would (`+` is a space). */
function queryParam(query: string, name: string, link: string): string | undefined {
  for (const pair of query.split('&')) {
    const at = pair.indexOf('=')
    const key = at === -1 ? pair : pair.slice(0, at)
    if (formDecode(key, link) === name) return at === -1 ? '' : formDecode(pair.slice(at + 1), link)
  }
  return undefined
}

function formDecode(value: string, link: string): string {
  return safeDecode(value.replace(/\+/g, ' '), link)
}

function isTrustedHost(url: LinkUrl, trustedHosts: readonly string[]): boolean {
  return trustedHosts.some((entry) => {
    const trusted = entry.toLowerCase()
    return trusted.includes(':') && !trusted.startsWith('[')
      ? trusted === url.host
      : trusted === url.hostname || trusted === url.host
  })
}

function safeDecode(value: string, link = value): string {
  try {
    return decodeURIComponent(value)
  } catch {
    throw invalidLink('Payment link is not valid percent-encoding.', link)
  }
}

function invalidLink(message: string, link: string): PayError {
  return new PayError({ code: 'invalid_link', message, context: { link: link.slice(0, 200) } })
}

function untrusted(message: string, host: string): PayError {
  return new PayError({ code: 'untrusted_host', message, context: { host: host.slice(0, 200) } })
}

/** The host part used as the default trusted host for a client's base URL (`host:port`, lower case). */
export function hostOf(baseUrl: string): string {
  const match = urlPattern.exec(baseUrl.trim())
  const url = match?.[3] === undefined ? undefined : parseAuthority(match[1]!.toLowerCase(), match[3])
  if (!url) throw invalidLink('baseUrl is not an http(s) URL.', baseUrl)
  return url.host
}
