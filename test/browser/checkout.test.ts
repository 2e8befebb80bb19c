import path from 'node:path'
import { describe, expect, it } from 'vitest'
import { createBuyer, isBaseOption } from '../gateway/support.js'
import { updateScreenshots, useBrowserEnv } from './support.js'

const suite = useBrowserEnv()

describe('checkout page in real Chromium', () => {
  it('shows merchant, amount and QR on a phone, then turns to Paid when the wallet confirms', async () => {
    const created = await suite.env.t.request({
      method: 'POST',
      url: '/v1/payments',
      headers: { 'api-key': suite.env.apiKey, 'merchant-id': suite.env.merchantId },
      payload: { referenceId: 'order-checkout', amount: { unit: 'iso4217/USD', value: '4250' } },
    })
    const { paymentId, gatewayUrl } = created.json
    expect(gatewayUrl).toBe(`${suite.env.baseUrl}/pay/${paymentId}`)

    const page = await suite.browser.newPage({
      viewport: { width: 390, height: 844 },
      deviceScaleFactor: 2,
      isMobile: true,
    })
    await page.goto(gatewayUrl)
    expect(await page.locator('#merchant').textContent()).toBe('Coffee Shop')
    expect(await page.locator('#amount').textContent()).toBe('$42.50')
    expect(await page.locator('#status').getAttribute('data-status')).toBe('requires_action')
    expect(await page.locator('#qr svg').isVisible()).toBe(true)
    // Nothing overflows sideways on a phone.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)
    if (updateScreenshots) await page.screenshot({ path: path.resolve('docs/checkout.png'), fullPage: true })

    const buyer = createBuyer()
    const { option, results } = await suite.env.prepare(paymentId, buyer, isBaseOption)
    const confirm = await suite.env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect(confirm.json.status).toBe('succeeded')

    await page.waitForFunction(
      () => document.getElementById('status')?.getAttribute('data-status') === 'succeeded',
      null,
      {
        timeout: 15_000,
      },
    )
    expect(await page.locator('#status').textContent()).toBe('Paid')
    expect(await page.locator('#txid').textContent()).toBe(`test:${paymentId}`)
    // A paid link must not invite a second scan: the QR code, the link and its copy button are gone.
    for (const id of ['#qr', '#link', '#copy', '#expires']) expect(await page.locator(id).count(), id).toBe(0)
    expect(await page.locator('#done').isVisible()).toBe(true)
    expect(await page.locator('#done-text').textContent()).toBe('Payment received. You can close this page.')
    await page.close()
  })

  it('a final payment renders final at once, without the QR code or the link', async () => {
    const paymentId = await suite.env.pay('100')
    const page = await suite.browser.newPage()
    await page.goto(`${suite.env.baseUrl}/pay/${paymentId}`)
    expect(await page.locator('#link').textContent()).toBe(`${suite.env.baseUrl}/pay/${paymentId}`)
    await suite.env.gw('POST', paymentId, '/cancel')
    await page.reload()
    expect(await page.locator('#status').textContent()).toBe('Cancelled')
    expect(await page.locator('#done-text').textContent()).toBe('This payment was cancelled.')
    for (const id of ['#qr', '#link', '#copy']) expect(await page.locator(id).count(), id).toBe(0)
    await page.close()
  })

  it('a succeeded payment loaded afterwards shows the paid state and the way back to the merchant', async () => {
    const created = await suite.env.t.request({
      method: 'POST',
      url: '/v1/payments',
      headers: {
        'api-key': suite.env.apiKey,
        'merchant-id': suite.env.merchantId,
        'pay-version': '2026-02-19.preview',
      },
      payload: {
        referenceId: 'order-paid',
        amount: { unit: 'iso4217/USD', value: '300' },
        checkout: { successUrl: 'https://shop.example/thanks', errorUrl: 'https://shop.example/sorry' },
      },
    })
    expect(created.statusCode, created.body).toBe(201)
    const { paymentId } = created.json
    const { option, results } = await suite.env.prepare(paymentId, createBuyer(), isBaseOption)
    expect(
      (await suite.env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })).json.status,
    ).toBe('succeeded')
    const page = await suite.browser.newPage()
    await page.goto(`${suite.env.baseUrl}/pay/${paymentId}`)
    expect(await page.locator('#status').textContent()).toBe('Paid')
    expect(await page.locator('#txid').textContent()).toBe(`test:${paymentId}`)
    expect(await page.locator('#done-text').textContent()).toBe('Payment received. You can close this page.')
    expect(await page.locator('#qr').count()).toBe(0)
    expect(await page.locator('#return').getAttribute('href')).toBe('https://shop.example/thanks')
    expect(await page.locator('#return').isVisible()).toBe(true)
    await page.close()
  })
})
