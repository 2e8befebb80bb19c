import path from 'node:path'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createBuyer, isBaseOption } from '../gateway/support.js'
import {
  type BrowserEnv,
  launchChromium,
  startBrowserEnv,
  startHostPage,
  updateScreenshots,
} from './support.js'

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url')
const details = { fullName: 'Grace Hopper', dateOfBirth: '1990-12-09', country: 'US' }

let env: BrowserEnv
let browser: Browser
let host: Awaited<ReturnType<typeof startHostPage>>
beforeAll(async () => {
  ;[env, browser, host] = await Promise.all([
    startBrowserEnv({ collectDataAtMinor: '100000' }),
    launchChromium(),
    startHostPage(),
  ])
})
afterAll(async () => {
  await browser?.close()
  await host?.close()
  await env?.close()
})

/** A payment above the threshold and the option the buyer picked. */
async function pickedOption() {
  const paymentId = await env.pay('250000')
  const res = await env.gw('POST', paymentId, '/options', { accounts: [createBuyer().accounts.base] })
  const option = res.json.options.find(isBaseOption)
  expect(option.collectData.url).toBe(`${env.baseUrl}/collect/${paymentId}?option=${option.id}`)
  return { paymentId, option }
}

async function messages(page: Page): Promise<unknown[]> {
  return page.evaluate(() => (window as unknown as { messages: unknown[] }).messages)
}

async function waitForMessage(page: Page, type: string) {
  await page.waitForFunction(
    (t) => (window as unknown as { messages: { type?: string }[] }).messages.some((m) => m?.type === t),
    type,
    { timeout: 15_000 },
  )
  return (await messages(page)).find((m) => (m as { type?: string }).type === type) as Record<string, unknown>
}

async function fetchOption(paymentId: string, optionId: string) {
  return env.gw('POST', paymentId, '/fetch', { optionId, data: '' })
}

describe('hosted data-collection form in real Chromium', () => {
  it('filled by hand in an iframe (light theme): IC_COMPLETE reaches the wallet page; fetch is unblocked', async () => {
    const { paymentId, option } = await pickedOption()
    expect((await fetchOption(paymentId, option.id)).statusCode).toBe(409)
    const page = await browser.newPage()
    await page.goto(host.url(`${option.collectData.url}&theme=light`))
    const form = page.frameLocator('#form')
    await form.locator('#fullName').fill(details.fullName)
    await form.locator('#dateOfBirth').fill(details.dateOfBirth)
    await form.locator('#country').fill('us')
    await form.locator('#submit').click()
    expect(await waitForMessage(page, 'IC_COMPLETE')).toEqual({ type: 'IC_COMPLETE' })
    await expect.poll(() => form.locator('#done').isVisible()).toBe(true)
    const stored = await env.t.db
      .selectFrom('collected_data')
      .select('fields')
      .where('option_id', '=', option.id)
      .executeTakeFirst()
    expect(stored?.fields).toEqual(details)
    expect((await fetchOption(paymentId, option.id)).statusCode).toBe(200)
    await page.close()
  })

  it('prefilled (dark theme, theme variables): one click completes it', async () => {
    const { option } = await pickedOption()
    const page = await browser.newPage()
    const url = `${option.collectData.url}&prefill=${b64(details)}&theme=dark&themeVariables=${b64({ '--accent': '#ff7a00' })}`
    await page.goto(host.url(url))
    const form = page.frameLocator('#form')
    expect(await form.locator('#fullName').inputValue()).toBe(details.fullName)
    expect(await form.locator('#country').inputValue()).toBe('US')
    expect(await form.locator('html').getAttribute('data-theme')).toBe('dark')
    const accent = await form.locator('#submit').evaluate((el) => getComputedStyle(el).backgroundColor)
    expect(accent).toBe('rgb(255, 122, 0)')
    await form.locator('#submit').click()
    expect(await waitForMessage(page, 'IC_COMPLETE')).toEqual({ type: 'IC_COMPLETE' })
    await page.close()
  })

  it('checks the fields before sending anything', async () => {
    const { option } = await pickedOption()
    const page = await browser.newPage()
    await page.goto(host.url(option.collectData.url))
    const form = page.frameLocator('#form')
    await form.locator('#fullName').fill('   ')
    await form.locator('#dateOfBirth').fill('1990-01-01')
    await form.locator('#country').fill('D1')
    await form.locator('#submit').click()
    await expect.poll(() => form.locator('#country-error').textContent()).toContain('two-letter')
    expect(await form.locator('#fullName-error').textContent()).toContain('full name')
    expect(await form.locator('#fullName').getAttribute('aria-invalid')).toBe('true')
    expect(await messages(page)).toEqual([])
    const stored = await env.t.db
      .selectFrom('collected_data')
      .select('fields')
      .where('option_id', '=', option.id)
      .execute()
    expect(stored).toEqual([])
    await page.close()
  })

  it('a failed submission posts IC_ERROR with the service message, and the buyer can see it', async () => {
    const { paymentId, option } = await pickedOption()
    const page = await browser.newPage()
    await page.goto(host.url(`${option.collectData.url}&prefill=${b64(details)}`))
    // The payment stops waiting while the form is open: the service refuses the data.
    await env.gw('POST', paymentId, '/cancel')
    const form = page.frameLocator('#form')
    await form.locator('#submit').click()
    const error = await waitForMessage(page, 'IC_ERROR')
    expect(error.error).toMatch(/cancelled/)
    await expect.poll(() => form.locator('#banner').textContent()).toMatch(/cancelled/)
    await page.close()
  })

  it('inside a React Native WebView it posts a JSON string to ReactNativeWebView', async () => {
    const { option } = await pickedOption()
    const page = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2 })
    await page.addInitScript(() => {
      const sent: string[] = []
      ;(window as unknown as { rnSent: string[] }).rnSent = sent
      ;(window as unknown as { ReactNativeWebView: unknown }).ReactNativeWebView = {
        postMessage: (text: string) => sent.push(text),
      }
    })
    await page.goto(`${option.collectData.url}&prefill=${b64(details)}`)
    if (updateScreenshots) await page.screenshot({ path: path.resolve('docs/collect-data.png') })
    await page.locator('#submit').click()
    await page.waitForFunction(() => (window as unknown as { rnSent: string[] }).rnSent.length > 0)
    const sent = await page.evaluate(() => (window as unknown as { rnSent: string[] }).rnSent)
    expect(sent.map((s) => JSON.parse(s))).toEqual([{ type: 'IC_COMPLETE' }])
    await page.close()
  })
})
