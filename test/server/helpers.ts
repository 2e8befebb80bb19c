import { expect } from 'vitest'
import { transitionPayment } from '../../src/server/payments/lifecycle.js'
import type { TestServer } from './harness.js'

let counter = 0
/** A fresh Idempotency-Key. */
export function idem(): string {
  counter += 1
  return `idem-${Date.now()}-${counter}-${Math.random().toString(36).slice(2)}`
}

export async function createMerchant(
  t: TestServer,
  apiKey: string,
  body: Record<string, unknown> = { merchantName: 'Coffee Shop', merchantEmail: 'shop@example.com' },
): Promise<string> {
  const res = await t.request({
    method: 'POST',
    url: '/v1/merchants',
    headers: { 'api-key': apiKey, 'idempotency-key': idem() },
    payload: body,
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json.merchant.id
}

export async function createPayment(
  t: TestServer,
  apiKey: string,
  merchantId: string,
  body: Record<string, unknown> = { referenceId: 'order-1', amount: { unit: 'iso4217/USD', value: '1250' } },
): Promise<string> {
  const res = await t.request({
    method: 'POST',
    url: '/v1/payments',
    headers: { 'api-key': apiKey, 'merchant-id': merchantId },
    payload: body,
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json.paymentId
}

/** Drives a payment to succeeded the way the gateway does (through the lifecycle). */
export async function succeedPayment(
  t: TestServer,
  paymentId: string,
  txId = `test:${paymentId}`,
): Promise<void> {
  await transitionPayment(t.db, { paymentId, from: 'requires_action', to: 'processing' })
  await transitionPayment(t.db, { paymentId, from: 'processing', to: 'succeeded', set: { tx_id: txId } })
}

export function headers(apiKey: string, merchantId?: string, extra: Record<string, string> = {}) {
  return { 'api-key': apiKey, ...(merchantId ? { 'merchant-id': merchantId } : {}), ...extra }
}
