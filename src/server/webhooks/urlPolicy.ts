import { lookup } from 'node:dns/promises'
import { BlockList, isIP } from 'node:net'
import { paramsError } from '../errors.js'
import type { Mode } from '../store/schema.js'

/**
 * Where webhooks may go. The server trusts no byte of a merchant's URL: an address is allowed only when
 * it is public unicast (IPv6: inside 2000::/3 and outside every special-purpose block), or loopback in
 * test mode (a merchant developing against a local receiver), or anything when the operator opted in
 * (`webhooks.allowPrivateUrls`). Live URLs must be https. The host is resolved and checked at
 * registration and again at every delivery, and the delivery connects to the address that was checked
 * (no DNS rebinding in between).
 */
export interface UrlPolicy {
  mode: Mode
  allowPrivateUrls: boolean
}

const notPublic = new BlockList()
for (const [network, prefix] of [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4],
] as const) {
  notPublic.addSubnet(network, prefix, 'ipv4')
}
const globalUnicast6 = new BlockList()
globalUnicast6.addSubnet('2000::', 3, 'ipv6')
for (const [network, prefix] of [
  ['2001::', 23],
  ['2001:db8::', 32],
  ['2002::', 16],
  ['3fff::', 20],
] as const) {
  notPublic.addSubnet(network, prefix, 'ipv6')
}
const loopback = new BlockList()
loopback.addSubnet('127.0.0.0', 8, 'ipv4')
loopback.addAddress('::1', 'ipv6')

export function isPublicAddress(address: string): boolean {
  const family = isIP(address)
  if (family === 4) return !notPublic.check(address, 'ipv4')
  if (family !== 6) return false
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped) return isPublicAddress(mapped[1]!)
  return globalUnicast6.check(address, 'ipv6') && !notPublic.check(address, 'ipv6')
}

function isAllowedAddress(address: string, policy: UrlPolicy): boolean {
  if (policy.allowPrivateUrls || isPublicAddress(address)) return true
  const family = isIP(address) === 6 ? 'ipv6' : 'ipv4'
  return policy.mode === 'test' && loopback.check(address, family)
}

function refuse(message: string): never {
  throw paramsError('body.url', message)
}

/** The URL if its form is acceptable for the mode (scheme, no credentials); 400 otherwise. */
export function parseWebhookUrl(raw: string, policy: UrlPolicy): URL {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    refuse('Expected an absolute URL.')
  }
  const httpAllowed = policy.mode === 'test' || policy.allowPrivateUrls
  if (url.protocol !== 'https:' && !(httpAllowed && url.protocol === 'http:')) {
    refuse(policy.mode === 'live' ? 'Live webhook URLs must use https.' : 'Expected an http or https URL.')
  }
  if (url.username || url.password) refuse('Credentials in the URL are not accepted.')
  if (url.hash) refuse('A URL fragment is not accepted.')
  return url
}

export interface ResolvedAddress {
  address: string
  family: 4 | 6
}

/**
 * Resolves the URL's host and checks every address it has (one private address among public ones is
 * enough to refuse: which one a connection uses is not ours to pick). Throws `Error` with the reason.
 */
export async function resolveWebhookAddress(url: URL, policy: UrlPolicy): Promise<ResolvedAddress> {
  const host = url.hostname.replace(/^\[|\]$/g, '')
  const literal = isIP(host)
  const addresses = literal
    ? [{ address: host, family: literal }]
    : await lookup(host, { all: true, verbatim: true }).catch((error: NodeJS.ErrnoException) => {
        throw new Error(`Cannot resolve ${host}: ${error.code ?? error.message}`)
      })
  if (addresses.length === 0) throw new Error(`${host} has no address.`)
  for (const { address } of addresses) {
    if (!isAllowedAddress(address, policy)) {
      throw new Error(`${host} resolves to ${address}, which is not a public address.`)
    }
  }
  const first = addresses[0]!
  return { address: first.address, family: first.family === 6 ? 6 : 4 }
}

/** Registration: the URL's form and where it points now; `400 params_validation` otherwise. */
export async function checkWebhookUrl(raw: string, policy: UrlPolicy): Promise<URL> {
  const url = parseWebhookUrl(raw, policy)
  try {
    await resolveWebhookAddress(url, policy)
  } catch (error) {
    refuse((error as Error).message)
  }
  return url
}
