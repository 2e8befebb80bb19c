import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { parsePrefill, parseThemeVariables } from '../../src/server/pages/params.js'
import { createBuyer, createGatewayEnv, type GatewayEnv } from './support.js'

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')

let env: GatewayEnv
beforeAll(async () => {
  env = await createGatewayEnv({
    config: { collectDataAtMinor: '100000', publicBaseUrl: 'https://pay.example.test' },
  })
})
afterAll(() => env.t.close())

async function formUrl(value = '150000') {
  const paymentId = await env.pay(value)
  const res = await env.gw('POST', paymentId, '/options', { accounts: [createBuyer().accounts.base] })
  const url = new URL(res.json.options[0].collectData.url)
  return { paymentId, optionId: res.json.options[0].id as string, path: `${url.pathname}${url.search}` }
}

describe('checkout page /pay/:id', () => {
  it('renders merchant, amount, QR code of the payment link and status, under a strict CSP', async () => {
    const paymentId = await env.pay('1250')
    const res = await env.t.request({ method: 'GET', url: `/pay/${paymentId}` })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('text/html; charset=utf-8')
    expect(res.headers['content-security-policy']).toMatch(/script-src 'nonce-[^']+'/)
    expect(res.body).toContain('Coffee Shop')
    expect(res.body).toContain('$12.50')
    expect(res.body).toContain('<svg')
    expect(res.body).toContain(`https://pay.example.test/pay/${paymentId}`)
    expect(res.body).toContain('Waiting for payment')
    expect(res.body).toContain('Test mode')
    expect(res.body).toContain('Copy payment link')
  })

  it('a final payment shows its outcome instead of the QR code and the link', async () => {
    const paymentId = await env.pay('1250')
    await env.gw('POST', paymentId, '/cancel')
    const res = await env.t.request({ method: 'GET', url: `/pay/${paymentId}` })
    expect(res.body).toContain('This payment was cancelled.')
    expect(res.body).not.toContain('<svg')
    expect(res.body).not.toContain('Copy payment link')
  })

  it('has a public status route for its polling, and 404s for unknown payments', async () => {
    const paymentId = await env.pay()
    const status = await env.t.request({ method: 'GET', url: `/pay/${paymentId}/status` })
    expect(status.json).toMatchObject({ status: 'requires_action', isFinal: false })
    expect((await env.t.request({ method: 'GET', url: '/pay/pay_unknown' })).statusCode).toBe(404)
    expect((await env.t.request({ method: 'GET', url: '/pay/pay_unknown/status' })).json.code).toBe(
      'payment_not_found',
    )
    expect((await env.t.request({ method: 'GET', url: '/pay/<script>' })).statusCode).toBe(404)
  })
})

describe('data-collection form /collect/:id', () => {
  it('renders the schema fields, may be framed by wallets', async () => {
    const { path } = await formUrl()
    const res = await env.t.request({ method: 'GET', url: path })
    expect(res.statusCode).toBe(200)
    for (const name of ['fullName', 'dateOfBirth', 'country']) expect(res.body).toContain(`name="${name}"`)
    expect(res.headers['content-security-policy']).toContain('frame-ancestors *')
    expect(res.body).toContain('$1,500.00')
  })

  it('honours prefill, escaped; ignores keys that are not fields', async () => {
    const { path } = await formUrl()
    const prefill = b64({ fullName: '"><script>alert(1)</script>', country: 'DE', secret: 'x' })
    const res = await env.t.request({ method: 'GET', url: `${path}&prefill=${prefill}` })
    expect(res.body).toContain('value="&quot;&gt;&lt;script&gt;alert(1)&lt;/script&gt;"')
    expect(res.body).not.toContain('<script>alert(1)')
    expect(res.body).toContain('value="DE"')
    expect(res.body).not.toContain('"x"')
  })

  it('honours theme and safe theme variables', async () => {
    const { path } = await formUrl()
    const vars = b64({
      '--accent': '#ff6600',
      radius: '4px',
      '--evil': 'red;}</style><script>',
      '--img': 'url(https://x)',
    })
    const res = await env.t.request({ method: 'GET', url: `${path}&theme=dark&themeVariables=${vars}` })
    expect(res.body).toContain('data-theme="dark"')
    expect(res.body).toContain(':root{--accent:#ff6600;--radius:4px;}')
    expect(res.body).not.toContain('--evil')
    expect(res.body).not.toContain('url(https://x)')
  })

  it('explains (and reports IC_ERROR for) a link that cannot be used', async () => {
    const { paymentId } = await formUrl()
    const res = await env.t.request({ method: 'GET', url: `/collect/${paymentId}?option=opt_unknown` })
    expect(res.statusCode).toBe(404)
    expect(res.body).toContain('not valid for this payment')
    expect(res.body).toContain("post({type:'IC_ERROR'")
  })
})

describe('page parameter parsing', () => {
  it('malformed prefill and theme variables are ignored, not errors', () => {
    expect(parsePrefill('%%%')).toEqual({})
    expect(parsePrefill(b64(['fullName']))).toEqual({})
    expect(parseThemeVariables('not-json')).toBe('')
    expect(parseThemeVariables(b64({ '--a': 12 }))).toBe('--a:12;')
  })
})
