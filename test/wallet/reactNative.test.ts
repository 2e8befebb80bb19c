import { webcrypto } from 'node:crypto'
import path from 'node:path'
import vm from 'node:vm'
import { build } from 'esbuild'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { anvilPrivateKeys } from '../anvil.js'
import { type BrowserEnv, startBrowserEnv } from '../browser/support.js'
import { chains } from '../gateway/support.js'

/**
 * The wallet library, both adapters, viem and @solana/web3.js (or @solana/kit alone), bundled the way Metro would (browser
 * fields, one script) and run in a fresh JavaScript realm that has only what a React Native app on Hermes
 * has: no `crypto.randomUUID` (only `crypto.getRandomValues`, as `react-native-get-random-values` installs
 * it), React Native's partial `URL`/`URLSearchParams` (their accessors throw), no `Object.hasOwn`, no
 * `TextDecoder`, no `Buffer`, no `structuredClone`, no `process`. It pays test-mode payments through the
 * real server over HTTP.
 */

const notImplemented = (what: string) => () => {
  throw new Error(`${what} is not implemented`)
}

/** React Native's URLSearchParams (Libraries/Blob/URL.js): append and toString, nothing that reads. */
class ReactNativeURLSearchParams {
  #pairs: [string, string][] = []
  constructor(init?: unknown) {
    if (init && typeof init === 'object') for (const [k, v] of Object.entries(init)) this.append(k, String(v))
  }
  append(key: string, value: string) {
    this.#pairs.push([key, value])
  }
  get = notImplemented('URLSearchParams.get')
  has = notImplemented('URLSearchParams.has')
  set = notImplemented('URLSearchParams.set')
  delete = notImplemented('URLSearchParams.delete')
  toString() {
    return this.#pairs.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join('&')
  }
}

/** React Native's URL: keeps the string; `host`, `hostname`, `pathname`, `search`... throw. */
class ReactNativeURL {
  #href: string
  constructor(url: string, base?: string) {
    this.#href = base === undefined ? url : `${base.replace(/\/$/, '')}/${url.replace(/^\//, '')}`
  }
  get href() {
    return this.#href
  }
  toString() {
    return this.#href
  }
  get searchParams() {
    return new ReactNativeURLSearchParams()
  }
}
for (const name of [
  'host',
  'hostname',
  'pathname',
  'search',
  'origin',
  'protocol',
  'port',
  'hash',
  'username',
  'password',
])
  Object.defineProperty(ReactNativeURL.prototype, name, { get: notImplemented(`URL.${name}`) })

function hermesRealm(): vm.Context {
  const realm = vm.createContext({
    console,
    setTimeout,
    clearTimeout,
    setInterval,
    clearInterval,
    queueMicrotask,
    fetch,
    Headers,
    Request,
    Response,
    AbortController,
    AbortSignal,
    TextEncoder,
    atob,
    btoa,
    URL: ReactNativeURL,
    URLSearchParams: ReactNativeURLSearchParams,
    navigator: { product: 'ReactNative' },
    performance: { now: () => performance.now() },
    // What react-native-get-random-values installs: getRandomValues and nothing else.
    crypto: {
      getRandomValues: <T extends ArrayBufferView>(array: T) =>
        webcrypto.getRandomValues(array as never) as T,
    },
  })
  vm.runInContext(
    'globalThis.global = globalThis; globalThis.window = globalThis; delete Object.hasOwn',
    realm,
  )
  return realm
}

type Pay = (input: Record<string, unknown>) => Promise<{ status: string; txId?: string; account: string }>

/**
 * Bundles one entry the way Metro would and loads it into a fresh Hermes-like realm. `reactNative`:
 * resolve packages by their `react-native` export condition and field first, as Metro does (kit ships
 * a native build there).
 */
async function loadInRealm(
  entry: string,
  extraGlobals: Record<string, unknown> = {},
  { reactNative = false } = {},
): Promise<{ realm: vm.Context; pay: Pay; inputs: string[] }> {
  const bundled = await build({
    entryPoints: [path.resolve(entry)],
    bundle: true,
    format: 'iife',
    globalName: 'wallet',
    ...(reactNative
      ? {
          platform: 'neutral' as const,
          conditions: ['react-native', 'import'],
          mainFields: ['react-native', 'browser', 'module', 'main'],
        }
      : { platform: 'browser' as const }),
    target: 'es2020',
    define: { 'process.env.NODE_ENV': '"production"' },
    write: false,
    metafile: true,
    logLevel: 'silent',
  })
  const realm = hermesRealm()
  Object.assign(realm, extraGlobals)
  vm.runInContext(bundled.outputFiles[0]!.text, realm, { filename: path.basename(entry) })
  return { realm, pay: (realm.wallet as { pay: Pay }).pay, inputs: Object.keys(bundled.metafile.inputs) }
}

const whatHermesLacks = `[typeof crypto.randomUUID, typeof Object.hasOwn, typeof TextDecoder, typeof Buffer,
  typeof structuredClone, typeof process,
  (() => { try { return new URL('https://a.example/x').hostname } catch (e) { return e.message } })()]`

let env: BrowserEnv
beforeAll(async () => {
  env = await startBrowserEnv()
})
afterAll(() => env?.close())

function link(paymentId: string) {
  return { baseUrl: env.baseUrl, apiKey: env.walletKey, link: `${env.baseUrl}/pay/${paymentId}` }
}

describe('React Native (Hermes globals only)', () => {
  it('with @solana/web3.js: pays a test-mode payment (built transaction, signed, never broadcast)', async () => {
    const { realm, pay } = await loadInRealm('test/wallet/reactNativeSolana.ts')
    expect(vm.runInContext(whatHermesLacks, realm)).toEqual([
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'URL.hostname is not implemented',
    ])
    const paymentId = await env.pay('700')
    const result = await pay({ ...link(paymentId), chain: chains.solana })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
    const row = await env.t.db
      .selectFrom('payments')
      .select('buyer')
      .where('id', '=', paymentId)
      .executeTakeFirst()
    expect(row?.buyer).toBe(result.account)
  })

  it('with @solana/kit only (caipay/adapters/solana-kit): no web3.js and no Node built-in in the bundle; pays a test-mode payment', async () => {
    // Kit signs with WebCrypto's Ed25519, which Hermes lacks: an app installs a WebCrypto polyfill
    // (kit's own @solana/webcrypto-ed25519-polyfill, or react-native-quick-crypto). Here: Node's, its
    // byte arguments copied out of the realm (Node checks they are its own typed arrays).
    const hostBytes = (value: unknown) =>
      ArrayBuffer.isView(value)
        ? Uint8Array.from(new Uint8Array(value.buffer, value.byteOffset, value.byteLength))
        : Object.prototype.toString.call(value) === '[object ArrayBuffer]'
          ? Uint8Array.from(new Uint8Array(value as ArrayBuffer))
          : value
    const subtle = new Proxy(webcrypto.subtle, {
      get: (target, name) => {
        const member = Reflect.get(target, name)
        return typeof member === 'function'
          ? (...args: unknown[]) => member.apply(target, args.map(hostBytes))
          : member
      },
    })
    const withPolyfill = {
      crypto: {
        getRandomValues: <T extends ArrayBufferView>(array: T) =>
          webcrypto.getRandomValues(array as never) as T,
        subtle,
      },
    }
    const { realm, pay, inputs } = await loadInRealm('test/wallet/reactNativeSolanaKit.ts', withPolyfill, {
      reactNative: true,
    })
    expect(inputs.filter((input) => input.includes('@solana/web3.js'))).toEqual([])
    expect(
      inputs.filter((input) => input.startsWith('node:') || /(^|\/)node_modules\/buffer\//.test(input)),
    ).toEqual([])
    expect(inputs.some((input) => input.includes('@solana/kit/dist/index.native'))).toBe(true)
    expect(vm.runInContext(whatHermesLacks, realm)).toEqual([
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'undefined',
      'URL.hostname is not implemented',
    ])
    const paymentId = await env.pay('800')
    const result = await pay({ ...link(paymentId), chain: chains.solana })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
    const row = await env.t.db
      .selectFrom('payments')
      .select('buyer')
      .where('id', '=', paymentId)
      .executeTakeFirst()
    expect(row?.buyer).toBe(result.account)
  })

  it('viem needs TextDecoder (at load, via ox) and Object.hasOwn; with those it pays a test-mode payment', async () => {
    await expect(loadInRealm('test/wallet/reactNativeEvm.ts')).rejects.toThrow(/TextDecoder is not defined/)
    const withDecoder = await loadInRealm('test/wallet/reactNativeEvm.ts', { TextDecoder })
    await expect(
      withDecoder.pay({ ...link(await env.pay('1250')), key: anvilPrivateKeys[6]!, chain: chains.base }),
    ).rejects.toThrow(/Object.hasOwn is not a function/)
    // What an app gets from polyfills (a TextDecoder such as fast-text-encoding; Object.hasOwn from Hermes
    // itself in current React Native, or core-js on older engines).
    const { realm, pay } = await loadInRealm('test/wallet/reactNativeEvm.ts', { TextDecoder })
    vm.runInContext('Object.hasOwn = (o, k) => Object.prototype.hasOwnProperty.call(o, k)', realm)
    expect(vm.runInContext(whatHermesLacks, realm)[0]).toBe('undefined')
    const paymentId = await env.pay('1250')
    const result = await pay({ ...link(paymentId), key: anvilPrivateKeys[6]!, chain: chains.base })
    expect(result).toMatchObject({ status: 'succeeded', txId: `test:${paymentId}` })
  })
})
