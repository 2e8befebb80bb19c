import { createHash, randomFillSync } from 'node:crypto'
import type { Mode } from './store/schema.js'

const base62 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'

// One CSPRNG call per 4 KiB instead of one per id; each byte is still used once.
const randomPool = Buffer.alloc(4096)
let randomPoolOffset = randomPool.length

function randomByte(): number {
  if (randomPoolOffset === randomPool.length) {
    randomFillSync(randomPool)
    randomPoolOffset = 0
  }
  return randomPool[randomPoolOffset++]!
}

/** Uniform random base62 text (rejection sampling: no modulo bias). */
export function randomBase62(length: number): string {
  let out = ''
  while (out.length < length) {
    const byte = randomByte()
    if (byte < 248) out += base62[byte % 62]
  }
  return out
}

const idPrefixes = {
  partner: 'ptr_',
  apiKey: 'key_',
  merchant: 'mrch_',
  cryptoSettlement: 'crypto_',
  payment: 'pay_',
  refund: 'ref_',
  request: 'req_',
  /** With the default 24 base62 (142 bits), a payment option's id doubles as its hosted form's capability. */
  option: 'opt_',
  webhookEndpoint: 'we_',
  webhookDelivery: 'msgd_',
  subscription: 'sub_',
  testClock: 'clock_',
  /** Test events only: payment events get their id from the outbox row. */
  event: 'evt_',
  /** Pushed money no open payment explains (docs/push-payments.md). */
  deposit: 'dep_',
  /** Money at a deposit address the ledger does not carry, moved by the operator (docs/push-payments.md). */
  recovery: 'rcv_',
} as const

export function newId(kind: keyof typeof idPrefixes, length = 24): string {
  return `${idPrefixes[kind]}${randomBase62(length)}`
}

/** `svc_test_` + 40 base62 (test) or `svc_` + 40 base62 (live). */
export function newApiKey(mode: Mode): string {
  return `${mode === 'test' ? 'svc_test_' : 'svc_'}${randomBase62(40)}`
}

const apiKeyPattern = /^svc_(test_)?[A-Za-z0-9]{32,128}$/

export function modeOfApiKey(key: string): Mode | undefined {
  if (!apiKeyPattern.test(key)) return undefined
  return key.startsWith('svc_test_') ? 'test' : 'live'
}

/** `app_test_` or `app_` + 24 base62: public, so no hash is needed. */
export function newAppId(mode: Mode): string {
  return `${mode === 'test' ? 'app_test_' : 'app_'}${randomBase62(24)}`
}

const appIdPattern = /^app_(test_)?[A-Za-z0-9]{16,64}$/

/**
 * An app id registered from outside, with its mode stored instead of carried in a prefix: WalletKit
 * hands the WalletConnect Pay SDK the wallet's WalletConnect project id (32 lowercase hex) as its app id.
 */
const externalAppIdPattern = /^[0-9a-f]{32}$/

export function isExternalAppId(appId: string): boolean {
  return externalAppIdPattern.test(appId)
}

export function modeOfAppId(appId: string): Mode | undefined {
  if (!appIdPattern.test(appId)) return undefined
  return appId.startsWith('app_test_') ? 'test' : 'live'
}

export function sha256Hex(text: string): string {
  return createHash('sha256').update(text).digest('hex')
}
