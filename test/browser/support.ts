import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { type Browser, chromium } from 'playwright-core'
import { afterAll, beforeAll } from 'vitest'
import { createGatewayEnv, type GatewayEnv } from '../gateway/support.js'

/** `UPDATE_SCREENSHOTS=1` rewrites docs/checkout.png and docs/collect-data.png; plain runs leave docs alone. */
export const updateScreenshots = process.env.UPDATE_SCREENSHOTS === '1'

/** Debian's Chromium, never a downloaded one (TOOLING.md). */
export const chromiumFlags = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]

export function launchChromium(): Promise<Browser> {
  return chromium.launch({ executablePath: '/usr/bin/chromium', args: chromiumFlags })
}

export interface BrowserEnv extends GatewayEnv {
  /** The server on 127.0.0.1, random port, e.g. http://127.0.0.1:40123. */
  baseUrl: string
  close(): Promise<void>
}

/** The app listening for real (pages are fetched by the browser, not injected). */
export async function startBrowserEnv(config: Record<string, unknown> = {}): Promise<BrowserEnv> {
  const env = await createGatewayEnv({ config })
  const baseUrl = await env.t.app.listen({ host: '127.0.0.1', port: 0 })
  // Links the server hands out (gatewayUrl, collectData.url) must point where it listens.
  env.t.app.config.publicBaseUrl = baseUrl
  return { ...env, baseUrl, close: () => env.t.close() }
}

/** The server and Chromium for one test file: started before its tests, closed after them. */
export function useBrowserEnv(config: Record<string, unknown> = {}): { env: BrowserEnv; browser: Browser } {
  const suite = {} as { env: BrowserEnv; browser: Browser }
  beforeAll(async () => {
    ;[suite.env, suite.browser] = await Promise.all([startBrowserEnv(config), launchChromium()])
  })
  afterAll(async () => {
    await suite.browser?.close()
    await suite.env?.close()
  })
  return suite
}

/**
 * A wallet's page on another origin that shows the hosted form in an iframe and records every message
 * the form posts to it (in `window.messages`).
 */
export async function startHostPage(): Promise<{ url(formUrl: string): string; close(): Promise<void> }> {
  const server = http.createServer((request, response) => {
    const src = new URL(request.url ?? '/', 'http://host').searchParams.get('form') ?? ''
    response.setHeader('content-type', 'text/html; charset=utf-8')
    response.end(`<!doctype html><html><body>
<h1>Wallet</h1>
<iframe id="form" src="${src.replace(/"/g, '&quot;')}" style="width:420px;height:720px;border:0"></iframe>
<script>
window.messages = [];
window.addEventListener('message', function (event) { window.messages.push(event.data); });
</script>
</body></html>`)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: (formUrl) => `http://127.0.0.1:${port}/?form=${encodeURIComponent(formUrl)}`,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  }
}
