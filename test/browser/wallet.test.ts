import http from 'node:http'
import type { AddressInfo } from 'node:net'
import path from 'node:path'
import { build } from 'esbuild'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { anvilPrivateKeys } from '../anvil.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { chains } from '../gateway/support.js'
import { type BrowserEnv, chromiumFlags, startBrowserEnv } from './support.js'
import type { PayInput, PayOutput, SignerKind } from './walletPage.js'

/**
 * The wallet library as a browser wallet runs it: bundled from source, loaded by a page on its own
 * origin, paying through the real server on another origin (another port), so every gateway call is a
 * CORS request with a preflight. `wallet.test` resolves to 127.0.0.1 inside Chromium only: a plain-http
 * origin that is not loopback by name, hence not a secure context (no `crypto.randomUUID`).
 */
const insecureHost = 'wallet.test'

let bundle: string
let browser: Browser
let env: BrowserEnv
let wallet: { port: number; close(): Promise<void> }

async function bundleWallet(): Promise<string> {
  const result = await build({
    entryPoints: [path.resolve('test/browser/walletPage.ts')],
    bundle: true,
    format: 'iife',
    platform: 'browser',
    target: 'es2020',
    write: false,
    logLevel: 'silent',
  })
  return result.outputFiles[0]!.text
}

/** The wallet's own origin: a page and its bundle, nothing else. */
async function serveWallet(script: string) {
  const server = http.createServer((request, response) => {
    if (request.url === '/wallet.js') {
      response.setHeader('content-type', 'text/javascript; charset=utf-8')
      response.end(script)
      return
    }
    response.setHeader('content-type', 'text/html; charset=utf-8')
    response.end('<!doctype html><html><body><h1>Wallet</h1><script src="/wallet.js"></script></body></html>')
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  }
}

beforeAll(async () => {
  ;[bundle, browser, env] = await Promise.all([
    bundleWallet(),
    chromium.launch({
      executablePath: '/usr/bin/chromium',
      args: [...chromiumFlags, `--host-resolver-rules=MAP ${insecureHost} 127.0.0.1`],
    }),
    startBrowserEnv({ collectDataAtMinor: '100000' }),
  ])
  wallet = await serveWallet(bundle)
})
afterAll(async () => {
  await browser?.close()
  await wallet?.close()
  await env?.close()
})

async function openWallet(host = '127.0.0.1'): Promise<Page> {
  const page = await browser.newPage()
  await page.goto(`http://${host}:${wallet.port}/`)
  await page.waitForFunction(() => 'caipayWallet' in window)
  return page
}

function payInPage(page: Page, input: PayInput): Promise<PayOutput> {
  return page.evaluate(
    (args) =>
      (window as unknown as { caipayWallet: { pay(i: PayInput): Promise<PayOutput> } }).caipayWallet.pay(
        args,
      ),
    input,
  )
}

function testModeInput(paymentId: string): PayInput {
  return {
    baseUrl: env.baseUrl,
    apiKey: env.walletKey,
    link: `${env.baseUrl}/pay/${paymentId}`,
    privateKey: anvilPrivateKeys[5]!,
    chains: [chains.base],
    method: 'eth_signTypedData_v4',
  }
}

describe('the wallet library in Chromium, against the server on another origin', () => {
  it('pays a test-mode payment from a web wallet page (CORS preflights and all)', async () => {
    const page = await openWallet()
    const origins = new Set<string>()
    page.on('request', (request) => origins.add(new URL(request.url()).origin))
    const paymentId = await env.pay('1250')
    const result = await payInPage(page, testModeInput(paymentId))
    expect(result.status).toBe('succeeded')
    expect(result.txId).toBe(`test:${paymentId}`)
    expect(result.states).toEqual(
      expect.arrayContaining(['loadingOptions', 'signing', 'confirming', 'succeeded']),
    )
    expect(result.formShown).toBe(false)
    expect(origins).toContain(env.baseUrl)
    expect(env.baseUrl).not.toBe(`http://127.0.0.1:${wallet.port}`)
    const status = await env.t.request({
      method: 'GET',
      url: `/v1/payments/${paymentId}`,
      headers: { 'api-key': env.apiKey, 'merchant-id': env.merchantId },
    })
    expect(status.json.status).toBe('succeeded')
    // A second payment from the same page: preflights cached (max-age), connections warm.
    const second = await env.pay('1250')
    const warm = await payInPage(page, testModeInput(second))
    expect(warm.status).toBe('succeeded')
    console.info(
      `browser test-mode payment: first ${result.ms.toFixed(0)} ms, second ${warm.ms.toFixed(0)} ms`,
    )
    await page.close()
  })

  it('shows the hosted form in an iframe; its IC_COMPLETE by postMessage lets the payment go on', async () => {
    const page = await openWallet()
    const paymentId = await env.pay('250000')
    const paying = payInPage(page, testModeInput(paymentId))
    const form = page.frameLocator('#collect')
    await form.locator('#fullName').fill('Grace Hopper')
    await form.locator('#dateOfBirth').fill('1990-12-09')
    await form.locator('#country').fill('US')
    await form.locator('#submit').click()
    const result = await paying
    expect(result.formShown).toBe(true)
    expect(result.states).toContain('collectingData')
    expect(result.status).toBe('succeeded')
    const stored = await env.t.db
      .selectFrom('collected_data')
      .select('fields')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(stored.map((row) => row.fields)).toEqual([
      { fullName: 'Grace Hopper', dateOfBirth: '1990-12-09', country: 'US' },
    ])
    console.info(
      `browser test-mode payment with the hosted form: ${result.ms.toFixed(0)} ms (form filled by the test)`,
    )
    await page.close()
  })

  it('pays from a plain-http, non-secure origin where crypto.randomUUID does not exist', async () => {
    const page = await openWallet(insecureHost)
    const context = await page.evaluate(() => ({
      secure: window.isSecureContext,
      randomUUID: typeof (crypto as { randomUUID?: unknown }).randomUUID,
      getRandomValues: typeof crypto.getRandomValues,
    }))
    expect(context).toEqual({ secure: false, randomUUID: 'undefined', getRandomValues: 'function' })
    const paymentId = await env.pay('990')
    const result = await payInPage(page, testModeInput(paymentId))
    expect(result.status).toBe('succeeded')
    expect(result.txId).toBe(`test:${paymentId}`)
    await page.close()
  })
})

describe('every kind of signer a wallet brings pays in Chromium', () => {
  it.each<[SignerKind, string]>([
    ['evm-provider', chains.base],
    ['evm-account', chains.base],
    ['solana-keypair', chains.solana],
    ['solana-kit', chains.solana],
  ])('%s pays a test-mode payment (%s)', async (signer, chain) => {
    const page = await openWallet()
    const paymentId = await env.pay('1250')
    const result = await payInPage(page, { ...testModeInput(paymentId), chains: [chain], signer })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
    expect(result.account?.startsWith(`${chain}:`)).toBe(true)
    const row = await env.t.db
      .selectFrom('payments')
      .select('buyer')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(row.buyer?.toLowerCase()).toBe(result.account?.toLowerCase())
    await page.close()
  })
})

describe('a live payment on Anvil from the browser wallet', () => {
  let evm: EvmEnv
  let baseUrl: string
  beforeAll(async () => {
    evm = await createEvmEnv()
    baseUrl = await evm.t.app.listen({ host: '127.0.0.1', port: 0 })
    evm.t.app.config.publicBaseUrl = baseUrl
    evm.startRunner()
  })
  afterAll(() => evm?.close())

  it('gasless EIP-3009: signed in the page, relayed and settled by the server', async () => {
    const buyer = await evm.buyer(4, usdc(50))
    const { paymentId } = await evm.pay('1250')
    const before = await evm.balance(buyer.address)
    const page = await openWallet()
    // The flow's status reads ask to be held (Prefer: wait) across origins: the preflight must allow it.
    const statusReads: { prefer: string | undefined; status: number; vary: string | undefined }[] = []
    page.on('response', (response) => {
      if (!response.url().endsWith(`/v1/gateway/payment/${paymentId}/status`)) return
      if (response.request().method() !== 'GET') return
      statusReads.push({
        prefer: response.request().headers().prefer,
        status: response.status(),
        vary: response.headers().vary,
      })
    })
    const result = await payInPage(page, {
      baseUrl,
      apiKey: evm.walletKey,
      link: `${baseUrl}/pay/${paymentId}`,
      privateKey: buyer.key,
      chains: [evm.anvil.caip2],
      rpcUrl: evm.anvil.rpcUrl,
      method: 'eth_signTypedData_v4',
    })
    expect(result.status).toBe('succeeded')
    expect(result.txId).toMatch(/^0x[0-9a-f]{64}$/)
    expect(before - (await evm.balance(buyer.address))).toBe(usdc(12.5))
    const receipt = await evm.publicClient.getTransactionReceipt({ hash: result.txId as `0x${string}` })
    expect(receipt.status).toBe('success')
    expect(statusReads.length).toBeGreaterThan(0)
    for (const read of statusReads) {
      expect(read.prefer).toMatch(/^wait=\d+$/)
      expect(read.status).toBe(200)
      expect(read.vary).toMatch(/Prefer/)
    }
    console.info(`browser live gasless payment on Anvil: ${result.ms.toFixed(0)} ms`)
    await page.close()
  })
})
