/**
 * caipay as the facilitator of an unmodified `@x402/hono` resource server on Anvil, paid by the
 * unmodified `@x402/fetch` client; balances read from the chain.
 */
import { ExactEvmScheme as ExactEvmClient } from '@x402/evm/exact/client'
import { wrapFetchWithPayment, x402Client } from '@x402/fetch'
import type { Address } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { anvilControl, anvilPrivateKeys } from '../anvil.js'
import { createEvmEnv, type EvmEnv, usdc } from '../evm/support.js'
import { headers } from '../server/helpers.js'
import {
  decodeHeader,
  exactRequirements,
  facilitatorBody,
  facilitatorPost,
  listenX402,
  type ResourceServer,
  startWeatherServer,
} from './support.js'

let env: EvmEnv
let facilitatorUrl: string
let resource: ResourceServer
const price = usdc(0.01)

const requirements = (overrides: Record<string, unknown> = {}) => exactRequirements(env, price, overrides)

/** A payload the buyer signed for `signed` (what the x402 client makes), claimed for `requirements()`. */
async function payload(key: `0x${string}`, signed: Record<string, unknown> = {}) {
  const accepted = requirements(signed)
  const created = await new ExactEvmClient(privateKeyToAccount(key)).createPaymentPayload(
    2,
    accepted as never,
  )
  return { x402Version: 2, accepted: requirements(), payload: created.payload }
}

/** The published client, allowed to spend the test token (not one of x402's default assets). */
function x402Buyer(key: `0x${string}`) {
  const network = env.anvil.caip2 as `${string}:${string}`
  const client = x402Client.fromConfig({
    schemes: [{ network, client: new ExactEvmClient(privateKeyToAccount(key)) }],
    spendControls: { allowedAssets: [{ network, asset: env.token, maxAmountPerPayment: '1000000' }] },
  })
  return wrapFetchWithPayment(fetch, client)
}

const post = facilitatorPost(
  () => env.t,
  () => env.liveKey,
)

async function balances(...who: Address[]) {
  return Promise.all(who.map((a) => env.balance(a)))
}

beforeAll(async () => {
  env = await createEvmEnv()
  env.startRunner()
  facilitatorUrl = await listenX402(env.t.app)
  resource = await weatherServer(env.liveKey)
}, 60_000)

function weatherServer(apiKey: string | undefined) {
  return startWeatherServer(env, facilitatorUrl, apiKey, price)
}

afterAll(async () => {
  await resource?.close()
  await env?.close()
})

describe('caipay as the x402 facilitator on EVM', () => {
  it('lists exact on the configured chain, the executor among the signers', async () => {
    const res = await env.t.request({ method: 'GET', url: '/x402/supported' })
    expect(res.statusCode).toBe(200)
    expect(res.json.kinds).toEqual([{ x402Version: 2, scheme: 'exact', network: env.anvil.caip2 }])
    expect(res.json.signers['eip155:*']).toEqual([env.collection])
    expect(res.json.extensions).toContain('payment-identifier')
  })

  it('the published client pays the published resource server; a payment of the merchant, paid on chain', async () => {
    const buyer = await env.buyer(2)
    const pay = x402Buyer(buyer.key)
    const [buyerBefore, merchantBefore, executorBefore] = await balances(
      buyer.address,
      env.merchant.destination,
      env.collection,
    )
    const res = await pay(`${resource.url}/weather`)
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ weather: 'sunny' })
    const settled = decodeHeader(res.headers.get('PAYMENT-RESPONSE'))
    expect(settled).toMatchObject({ success: true, network: env.anvil.caip2, payer: buyer.address })
    expect(settled.transaction).toMatch(/^0x[0-9a-f]{64}$/)

    const [buyerAfter, merchantAfter, executorAfter] = await balances(
      buyer.address,
      env.merchant.destination,
      env.collection,
    )
    expect(buyerBefore - buyerAfter).toBe(price)
    expect(merchantAfter - merchantBefore).toBe(price)
    expect(executorAfter).toBe(executorBefore)
    const receipt = await env.publicClient.getTransactionReceipt({ hash: settled.transaction })
    expect(receipt.from.toLowerCase()).toBe(env.collection.toLowerCase())

    // In the merchant API, next to checkout payments, with its events.
    const record = await env.t.db
      .selectFrom('x402_payments')
      .selectAll()
      .where('payer', '=', buyer.address)
      .executeTakeFirstOrThrow()
    const view = await env.merchantView(record.payment_id)
    expect(view).toMatchObject({
      status: 'succeeded',
      info: { txId: settled.transaction },
      amount: { unit: `caip19/${env.asset}`, value: price.toString() },
      settlement: null,
    })
    const listed = await env.t.request({
      method: 'GET',
      url: `/v1/payments?merchantId=${env.merchant.id}`,
      headers: headers(env.liveKey),
    })
    expect(listed.json.data).toContainEqual(
      expect.objectContaining({ paymentId: record.payment_id, buyer: `${env.anvil.caip2}:${buyer.address}` }),
    )
    const events = await env.t.db
      .selectFrom('payment_events')
      .select('type')
      .where('payment_id', '=', record.payment_id)
      .orderBy('payment_state_version')
      .execute()
    expect(events.map((e) => e.type)).toEqual(['payment.created', 'payment.processing', 'payment.succeeded'])
  })

  it('a payload settled twice is settled once and answers the same transaction', async () => {
    const buyer = await env.buyer(3)
    const body = facilitatorBody(await payload(buyer.key), requirements() as never)
    const [before] = await balances(buyer.address)
    const first = await post('settle', body)
    expect(first.statusCode).toBe(200)
    expect(first.json).toMatchObject({ success: true, payer: buyer.address })
    const second = await post('settle', body)
    expect(second.json).toMatchObject({ success: true, transaction: first.json.transaction })
    const [after] = await balances(buyer.address)
    expect(before - after).toBe(price)
    // Replayed to the resource server: the authorization is spent, so nothing is served or moved.
    const replay = await fetch(`${resource.url}/weather`, {
      headers: { 'PAYMENT-SIGNATURE': Buffer.from(JSON.stringify(body.paymentPayload)).toString('base64') },
    })
    expect(replay.status).toBe(402)
    expect((await balances(buyer.address))[0]).toBe(after)
  })

  it('a payment-identifier replays only its own payload: another payer, amount or nonce under it is refused, nothing moved', async () => {
    const honest = await env.buyer(4)
    const hostile = await env.buyer(6)
    const id = 'pay_bound_0123456789abcdef'
    const withId = async (key: `0x${string}`, signed: Record<string, unknown> = {}) => ({
      ...(await payload(key, signed)),
      extensions: { 'payment-identifier': { info: { required: false, id } } },
    })
    const paid = facilitatorBody(await withId(honest.key), requirements() as never)
    const [honestBefore, hostileBefore] = await balances(honest.address, hostile.address)
    const first = await post('settle', paid)
    expect(first.json).toMatchObject({ success: true, payer: honest.address })

    // Another payer's fresh payload, the same payer's new nonce, another amount: each under the used id.
    const reused = [
      facilitatorBody(await withId(hostile.key), requirements() as never),
      facilitatorBody(await withId(honest.key), requirements() as never),
      facilitatorBody(
        await withId(hostile.key, { amount: (price * 2n).toString() }),
        requirements({ amount: (price * 2n).toString() }) as never,
      ),
    ]
    for (const body of reused) {
      const verified = await post('verify', body)
      expect(verified.json).toMatchObject({ isValid: false, invalidReason: 'payment_identifier_conflict' })
      const settled = await post('settle', body)
      expect(settled.statusCode).toBe(200)
      expect(settled.json).toMatchObject({
        success: false,
        errorReason: 'payment_identifier_conflict',
        transaction: '',
      })
      expect(settled.json.transaction).not.toBe(first.json.transaction)
    }
    // The identical payload still replays its answer.
    expect((await post('settle', paid)).json).toMatchObject({
      success: true,
      transaction: first.json.transaction,
      payer: honest.address,
    })
    const [honestAfter, hostileAfter] = await balances(honest.address, hostile.address)
    expect(honestBefore - honestAfter).toBe(price)
    expect(hostileAfter).toBe(hostileBefore)
    const rows = await env.t.db
      .selectFrom('x402_payments')
      .select('key')
      .where('payment_identifier', '=', id)
      .execute()
    expect(rows).toHaveLength(1)
  })

  it('a settled payload claimed for other terms (a dearer price) is refused, not answered with its success', async () => {
    const buyer = await env.buyer(4)
    const cheap = await payload(buyer.key)
    const first = await post('settle', facilitatorBody(cheap, requirements() as never))
    expect(first.json.success).toBe(true)
    const dearer = requirements({ amount: (price * 100n).toString() })
    const replayed = await post('settle', facilitatorBody({ ...cheap, accepted: dearer }, dearer as never))
    expect(replayed.json).toMatchObject({ success: false, transaction: '' })
  })

  const refusals: [string, (key: `0x${string}`) => Promise<unknown>, string][] = [
    [
      'underpaid',
      (k) => payload(k, { amount: (price - 1n).toString() }),
      'invalid_exact_evm_payload_authorization_value_mismatch',
    ],
    [
      'paid to another address',
      (k) => payload(k, { payTo: privateKeyToAccount(generatePrivateKey()).address }),
      'invalid_exact_evm_recipient_mismatch',
    ],
    [
      'expired',
      (k) =>
        payload(k, { maxTimeoutSeconds: 1 }).then(async (p) => {
          await new Promise((r) => setTimeout(r, 100))
          return p
        }),
      'invalid_exact_evm_payload_authorization_valid_before',
    ],
    [
      'signed by another key than from',
      async (k) => {
        const p = (await payload(anvilPrivateKeys[6]!)) as unknown as {
          payload: { authorization: { from: string } }
        }
        p.payload.authorization.from = privateKeyToAccount(k).address
        return p
      },
      'invalid_exact_evm_signature',
    ],
  ]
  it.each(refusals)('%s: refused by verify and settle, nothing moved', async (_name, make, reason) => {
    const buyer = await env.buyer(5)
    const body = facilitatorBody(await make(buyer.key), requirements() as never)
    const [before, merchantBefore] = await balances(buyer.address, env.merchant.destination)
    const verified = await post('verify', body)
    expect(verified.statusCode).toBe(200)
    expect(verified.json).toMatchObject({ isValid: false, invalidReason: reason })
    const settled = await post('settle', body)
    expect(settled.statusCode).toBe(200)
    expect(settled.json).toMatchObject({ success: false, errorReason: reason, transaction: '' })
    expect(await balances(buyer.address, env.merchant.destination)).toEqual([before, merchantBefore])
  })

  it('an asset the chain is not configured with, and a payTo of no merchant of the key, are refused', async () => {
    const buyer = await env.buyer(5)
    const other = privateKeyToAccount(generatePrivateKey()).address
    const unconfigured = await post(
      'verify',
      facilitatorBody(await payload(buyer.key), requirements({ asset: other }) as never),
    )
    expect(unconfigured.json).toMatchObject({ isValid: false, invalidReason: 'unsupported_asset' })
    const stranger = facilitatorBody(
      await payload(buyer.key, { payTo: other }),
      requirements({ payTo: other }) as never,
    )
    expect((await post('verify', stranger)).json).toMatchObject({
      isValid: false,
      invalidReason: 'pay_to_not_a_merchant_destination',
    })
    expect((await post('settle', stranger)).json).toMatchObject({ success: false, transaction: '' })
    expect(await env.balance(other)).toBe(0n)
  })

  it('no key, an unknown key, a test key: 401/403, nothing moved', async () => {
    const buyer = await env.buyer(5)
    const body = facilitatorBody(await payload(buyer.key), requirements() as never)
    const { apiKey: testKey } = await env.t.createKey('test')
    const [before] = await balances(buyer.address)
    expect((await post('settle', body, '')).statusCode).toBe(401)
    expect((await post('settle', body, 'svc_unknown')).statusCode).toBe(401)
    const test = await post('settle', body, testKey)
    expect(test.statusCode).toBe(403)
    expect(test.json.code).toBe('forbidden')
    expect((await post('verify', body, env.walletKey)).statusCode).toBe(403)
    expect((await balances(buyer.address))[0]).toBe(before)

    // The resource server without a key: the buyer is asked to pay, nothing settles.
    const keyless = await weatherServer(undefined)
    try {
      const res = await x402Buyer(buyer.key)(`${keyless.url}/weather`).catch((e: Error) => e)
      expect(res instanceof Error ? 402 : res.status).not.toBe(200)
    } finally {
      await keyless.close()
    }
    expect((await balances(buyer.address))[0]).toBe(before)
  })

  it('not mined by the deadline: a pending answer with its transaction, then success when polled', async () => {
    const buyer = await env.buyer(7)
    const control = anvilControl(env.anvil.rpcUrl)
    const body = facilitatorBody(await payload(buyer.key), requirements({ maxTimeoutSeconds: 1 }) as never)
    await control.setAutomine(false)
    let pending: Awaited<ReturnType<typeof post>>
    try {
      pending = await post('settle', body)
    } finally {
      await control.setAutomine(true)
    }
    expect(pending.json).toMatchObject({ success: false, errorReason: 'settlement_pending' })
    expect(pending.json.transaction).toMatch(/^0x[0-9a-f]{64}$/)
    await control.mine()
    const polled = await post('settle', body)
    expect(polled.json).toMatchObject({ success: true, transaction: pending.json.transaction })
    const view = await env.t.request({
      method: 'GET',
      url: `/v1/payments/${polled.json.extra.paymentId}`,
      headers: headers(env.liveKey, env.merchant.id),
    })
    expect(view.json.status).toBe('succeeded')
  })
})
