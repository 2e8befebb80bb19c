import { createRequire } from 'node:module'
import { parseURL, type TransactionRequestURL, type TransferRequestURL } from '@solana/pay'
import { parse as parseEip681 } from 'eth-url-parser'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createEvmEnv, type EvmEnv } from '../evm/support.js'
import { type SolanaLive, startSolanaLive } from '../solana-live/live.js'
import { launchChromium } from './support.js'

/**
 * The checkout page shows each push option's links as QR codes (docs/push-payments.md). Chromium renders
 * the page; jsQR reads the codes from Chromium's own screenshot pixels, and the text it reads must be a
 * link @solana/pay's parseURL takes, for the transfer request and the transaction request alike, and on
 * EVM an EIP-681 link the published eth-url-parser reads as the token's transfer to the deposit address.
 */
let live: SolanaLive
let evm: EvmEnv
let browser: Browser
let listening: string
let evmListening: string
beforeAll(async () => {
  ;[live, evm, browser] = await Promise.all([startSolanaLive(), createEvmEnv(), launchChromium()])
  listening = await live.t.app.listen({ host: '127.0.0.1', port: 0 })
  evmListening = await evm.t.app.listen({ host: '127.0.0.1', port: 0 })
  // Buyers reach the server over https (TLS is the proxy's job); the browser here reads it over loopback.
  live.t.app.config.publicBaseUrl = listening.replace('http://', 'https://')
})
afterAll(async () => {
  await browser?.close()
  await Promise.all([live?.close(), evm?.close()])
})

const jsQrSource = createRequire(import.meta.url).resolve('jsqr/dist/jsQR.js')

/** The text of the QR code in `selector`, read by jsQR from the pixels Chromium rendered. */
async function decodeQr(page: Page, selector: string): Promise<string | null> {
  const png = await page.locator(selector).screenshot()
  // A blank page (no CSP) turns the screenshot back into pixels for jsQR.
  const reader = await browser.newPage()
  try {
    await reader.addScriptTag({ path: jsQrSource })
    return await reader.evaluate(async (base64) => {
      const image = new Image()
      image.src = `data:image/png;base64,${base64}`
      await image.decode()
      const canvas = document.createElement('canvas')
      canvas.width = image.width
      canvas.height = image.height
      const context = canvas.getContext('2d')!
      context.drawImage(image, 0, 0)
      const pixels = context.getImageData(0, 0, image.width, image.height)
      // biome-ignore lint/suspicious/noExplicitAny: jsQR is a global of the script tag
      const found = (window as any).jsQR(pixels.data, image.width, image.height)
      return (found?.data as string | undefined) ?? null
    }, png.toString('base64'))
  } finally {
    await reader.close()
  }
}

describe('checkout page push QR codes in real Chromium', () => {
  it('decode to the transaction request and the transfer request, both accepted by @solana/pay', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const options = await live.gateway(paymentId, 'options', { accounts: [] })
    const [push] = options.json.options.filter((o: { source?: string }) => o.source === 'push')

    const page = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 })
    await page.goto(`${listening}/pay/${paymentId}`)
    const figures = page.locator('#push figure')
    expect(await figures.count()).toBe(2)
    const captions = await page.locator('#push figcaption').allTextContents()
    expect(captions).toEqual([`USDC on ${live.caip2}: Solana Pay`, `USDC on ${live.caip2}: transfer request`])
    // Nothing overflows sideways on a phone.
    expect(await page.evaluate(() => document.documentElement.scrollWidth)).toBeLessThanOrEqual(390)

    const transactionLink = await decodeQr(page, '#push-qr-0')
    expect(transactionLink).toBe(push.push.transactionUrl)
    const transaction = parseURL(transactionLink!) as TransactionRequestURL
    expect(transaction.link.toString()).toBe(
      `${live.t.app.config.publicBaseUrl}/v1/solana-pay/${paymentId}/${live.mint.toBase58()}`,
    )

    const transferLink = await decodeQr(page, '#push-qr-1')
    expect(transferLink).toBe(push.push.url)
    const transfer = parseURL(transferLink!) as TransferRequestURL
    expect(transfer.recipient.toBase58()).toBe(live.service.publicKey.toBase58())
    expect(transfer.splToken?.toBase58()).toBe(live.mint.toBase58())
    expect(transfer.amount?.toString()).toBe('12.5')
    expect(transfer.reference?.map((r) => r.toBase58())).toEqual([push.push.reference])
    await page.close()
  })

  it('shows no push codes once the payment is final, nor for a test-mode payment', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const cancelled = await live.t.request({
      method: 'POST',
      url: `/v1/gateway/payment/${paymentId}/cancel`,
      headers: { 'api-key': live.liveKey },
    })
    expect(cancelled.statusCode, cancelled.body).toBe(200)
    const page = await browser.newPage()
    await page.goto(`${listening}/pay/${paymentId}`)
    expect(await page.locator('#push').count()).toBe(0)

    const { apiKey } = await live.t.createKey('test')
    const merchant = await live.t.request({
      method: 'POST',
      url: '/v1/merchants',
      headers: { 'api-key': apiKey, 'idempotency-key': `sandbox-${Date.now()}` },
      payload: { merchantName: 'Sandbox Shop', merchantEmail: 'sandbox@example.com' },
    })
    expect(merchant.statusCode, merchant.body).toBe(201)
    const created = await live.t.request({
      method: 'POST',
      url: '/v1/payments',
      headers: { 'api-key': apiKey, 'merchant-id': merchant.json.merchant.id },
      payload: { referenceId: 'sandbox-order', amount: { unit: 'iso4217/USD', value: '500' } },
    })
    await page.goto(`${listening}/pay/${created.json.paymentId}`)
    expect(await page.locator('#qr svg').isVisible()).toBe(true)
    expect(await page.locator('#push').count()).toBe(0)
    await page.close()
  })

  it('decode on EVM to the EIP-681 link eth-url-parser reads as the transfer to the deposit address', async () => {
    const { paymentId } = await evm.pay('1250')
    const options = await evm.gw('POST', paymentId, '/options', { accounts: [] })
    expect(options.statusCode, options.body).toBe(200)
    const [push] = options.json.options.filter((o: { source?: string }) => o.source === 'push')
    const page = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 })
    await page.goto(`${evmListening}/pay/${paymentId}`)
    expect(await page.locator('#push figure').count()).toBe(1)
    const link = await decodeQr(page, '#push-qr-0')
    expect(link).toBe(push.push.url)
    const parsed = parseEip681(link!)
    expect(parsed.target_address.toLowerCase()).toBe(evm.token.toLowerCase())
    expect(`eip155:${parsed.chain_id}`).toBe(evm.asset.slice(0, evm.asset.indexOf('/')))
    expect(parsed.function_name).toBe('transfer')
    expect(parsed.parameters?.address?.toLowerCase()).toBe(push.push.recipient.toLowerCase())
    expect(BigInt(Number(parsed.parameters?.uint256))).toBe(12_500_000n)
    await page.close()
  })
})
