import http from 'node:http'
import type { AddressInfo } from 'node:net'
import type { WalletConnectPay } from '@walletconnect/pay'
import { build } from 'esbuild'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { chromiumFlags } from '../browser/support.js'
import { createBuyer, createGatewayEnv, type GatewayEnv } from '../gateway/support.js'
import { type PayClient, signAll } from './support.js'

// The SDK in Chromium, on a wallet page of another origin: every call to /wcp is a CORS request with
// non-simple headers (WCP-Version, Api-Key, ...), so this pays only if the preflights pass.

let env: GatewayEnv
let origin: string
let walletPage: http.Server
let walletUrl: string
let browser: Browser
let page: Page
const blocked: string[] = []
const pageErrors: string[] = []

/** The wallet page's globals: the bundle's exports, and the client a step made. */
type WalletWindow = { WalletConnectPaySdk: { WalletConnectPay: typeof WalletConnectPay }; pay: PayClient }

/**
 * The SDK as a web wallet ships it: its ESM build bundled for the browser, with the `Buffer` its WASM
 * loader needs (brotli). Its own UMD file (dist/index.umd.js, 1.1.0) does not parse: "Unexpected token
 * 'function'".
 */
async function sdkBundle(): Promise<string> {
  const result = await build({
    stdin: {
      contents: [
        "import { Buffer } from 'buffer'",
        'globalThis.Buffer = Buffer',
        "export { WalletConnectPay } from '@walletconnect/pay'",
      ].join('\n'),
      resolveDir: process.cwd(),
    },
    bundle: true,
    format: 'iife',
    globalName: 'WalletConnectPaySdk',
    platform: 'browser',
    write: false,
    logLevel: 'error',
  })
  return result.outputFiles[0]!.text
}

beforeAll(async () => {
  env = await createGatewayEnv()
  origin = await env.t.app.listen({ host: '127.0.0.1', port: 0 })
  const bundle = await sdkBundle()
  walletPage = http.createServer((request, response) => {
    if (request.url === '/pay.js') {
      response.setHeader('content-type', 'text/javascript')
      response.end(bundle)
      return
    }
    response.setHeader('content-type', 'text/html; charset=utf-8')
    response.end('<!doctype html><html><body><h1>Wallet</h1><script src="/pay.js"></script></body></html>')
  })
  await new Promise<void>((resolve) => walletPage.listen(0, '127.0.0.1', resolve))
  walletUrl = `http://127.0.0.1:${(walletPage.address() as AddressInfo).port}/`
  // Nothing leaves the machine: every name but loopback fails to resolve, so the SDK's telemetry
  // (ingest.walletconnect.org) fails in the browser's own network stack. No request interception: with
  // it, Playwright answers CORS preflights itself and the server's CORS would go untested.
  browser = await chromium.launch({
    executablePath: '/usr/bin/chromium',
    args: [...chromiumFlags, '--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1'],
  })
  page = await browser.newPage()
  page.on('requestfailed', (request) => {
    if (new URL(request.url()).hostname !== '127.0.0.1') blocked.push(request.url())
  })
  page.on('pageerror', (error) => pageErrors.push(error.message))
  await page.goto(walletUrl)
})

afterAll(async () => {
  await browser?.close()
  await new Promise((resolve) => walletPage?.close(resolve))
  await env?.t.close()
})

describe('the SDK in a browser, cross-origin', () => {
  it('pays a test-mode EVM option', async () => {
    expect(pageErrors).toEqual([])
    const paymentId = await env.pay('1250')
    const buyer = createBuyer()
    const config = {
      baseUrl: `${origin}/wcp`,
      apiKey: env.walletKey,
      paymentId,
      account: buyer.accounts.base,
    }
    const prepared = await page.evaluate(async (c) => {
      const wallet = window as unknown as WalletWindow
      const pay = new wallet.WalletConnectPaySdk.WalletConnectPay({
        apiKey: c.apiKey,
        baseUrl: c.baseUrl,
        logger: 'silent',
      })
      wallet.pay = pay
      const { options } = await pay.getPaymentOptions({ paymentLink: c.paymentId, accounts: [c.account] })
      const actions = await pay.getRequiredPaymentActions({ paymentId: c.paymentId, optionId: options[0].id })
      return { optionId: options[0].id as string, actions }
    }, config)
    const signatures = await signAll(buyer, prepared.actions)
    const result = await page.evaluate(
      (c) =>
        (window as unknown as WalletWindow).pay.confirmPayment({
          paymentId: c.paymentId,
          optionId: c.optionId,
          signatures: c.signatures,
        }),
      { paymentId, optionId: prepared.optionId, signatures },
    )
    expect(result).toMatchObject({ status: 'succeeded', isFinal: true, info: { txId: `test:${paymentId}` } })
    expect(blocked.length).toBeGreaterThan(0)
    expect(blocked.every((url) => new URL(url).hostname.endsWith('walletconnect.org'))).toBe(true)
  })
})
