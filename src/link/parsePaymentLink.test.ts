import { describe, expect, it } from 'vitest'
import { isPayError } from '../errors/PayError.js'
import { hostOf, parsePaymentLink } from './parsePaymentLink.js'

const trusted = { trustedHosts: ['pay.example.com', '127.0.0.1:8787'] }
const id = 'pay_Ab12Cd34'

describe('parsePaymentLink', () => {
  it.each([
    [id],
    [`https://pay.example.com/pay/${id}`],
    [`https://pay.example.com/pay/${id}/`],
    [`https://PAY.example.com/?pid=${id}`],
    [`https://pay.example.com/pay/pay_other?pid=${id}`],
    [`https://pay.example.com:8443/pay/${id}`],
    [`http://127.0.0.1:8787/pay/${id}`],
    [encodeURIComponent(`https://pay.example.com/pay/${id}`)],
    [`wc:abc@2?relay-protocol=irn&pay=${encodeURIComponent(`https://pay.example.com/pay/${id}`)}`],
    [`  ${id}  `],
    [`https://pay.example.com:443/pay/${id}`],
    [`HTTPS://pay.example.com/pay/${id}#fragment`],
    [`https://pay.example.com/?x=a+b&pid=${id}&pid=pay_second`],
  ])('extracts the id from %s', (link) => {
    expect(parsePaymentLink(link, trusted).paymentId).toBe(id)
  })

  it.each([
    ['untrusted_host', `https://evil.example.com/pay/${id}`],
    ['untrusted_host', `https://pay.example.com.evil.io/pay/${id}`],
    ['untrusted_host', `https://paypay.example.com/pay/${id}`],
    ['untrusted_host', `https://pay.example.com@evil.io/pay/${id}`],
    ['untrusted_host', `https://user:pw@pay.example.com/pay/${id}`],
    ['untrusted_host', `http://pay.example.com/pay/${id}`],
    ['untrusted_host', `http://127.0.0.1:9999/pay/${id}`],
    ['untrusted_host', `javascript:alert(1)//pay/${id}`],
    ['invalid_link', 'https://pay.example.com/pay/'],
    ['invalid_link', 'https://pay.example.com/pay/not-an-id'],
    ['invalid_link', `https://pay.example.com/checkout/${id}`],
    ['invalid_link', 'pay_'],
    ['invalid_link', 'wc:abc@2?relay-protocol=irn'],
    ['invalid_link', 'https%3A%2F%2Fpay.example.com%2Fpay%2F%E0%A4%A'],
    ['invalid_link', 'hello'],
    ['untrusted_host', `ftp://pay.example.com/pay/${id}`],
    // What WHATWG parsing would repair is refused: the host decides trust.
    ['invalid_link', `https://pay.example.com\\@evil.io/pay/${id}`],
    ['invalid_link', `https://pay.exa\tmple.com/pay/${id}`],
    ['invalid_link', `https://pay.example.com/x/../pay/${id}`],
    ['invalid_link', `https://pay%2eexample.com/pay/${id}`],
    ['invalid_link', `https://päy.example.com/pay/${id}`],
    ['invalid_link', `https://pay.example.com:99999/pay/${id}`],
    ['invalid_link', `https:pay.example.com/pay/${id}`],
  ])('rejects with %s: %s', (code, link) => {
    try {
      parsePaymentLink(link, trusted)
      expect.unreachable()
    } catch (error) {
      expect(isPayError(error)).toBe(true)
      expect((error as { code: string }).code).toBe(code)
    }
  })

  it('keeps the link it parsed, host in lower case without a default port', () => {
    expect(parsePaymentLink(`https://PAY.example.com:443/pay/${id}?a=1`, trusted).url).toBe(
      `https://pay.example.com/pay/${id}?a=1`,
    )
  })

  it('works without URL and URLSearchParams (React Native implements neither fully)', () => {
    const saved = { URL: globalThis.URL, URLSearchParams: globalThis.URLSearchParams }
    const missing = () => {
      throw new Error('not implemented')
    }
    Object.assign(globalThis, { URL: missing, URLSearchParams: missing })
    try {
      expect(parsePaymentLink(`https://pay.example.com/?pid=${id}`, trusted).paymentId).toBe(id)
      expect(
        parsePaymentLink(`wc:abc@2?pay=${encodeURIComponent(`http://127.0.0.1:8787/pay/${id}`)}`, trusted)
          .paymentId,
      ).toBe(id)
      expect(hostOf('HTTP://LocalHost:8787/base/')).toBe('localhost:8787')
      expect(hostOf('https://pay.example.com:443')).toBe('pay.example.com')
    } finally {
      Object.assign(globalThis, saved)
    }
  })

  it('refuses links nested without end', () => {
    let link = `https://pay.example.com/pay/${id}`
    for (let i = 0; i < 5; i++) link = `wc:x@2?pay=${encodeURIComponent(link)}`
    expect(() => parsePaymentLink(link, trusted)).toThrowError(/nested/)
  })
})
