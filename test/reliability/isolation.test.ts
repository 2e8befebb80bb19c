import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PaymentOption } from '../../src/contract/gateway.js'
import type { Mode } from '../../src/server/store/schema.js'
import {
  createBuyer,
  isBaseOption,
  isSolanaOption,
  buildData as optionBuildData,
  usdc,
} from '../gateway/support.js'
import { createTestServer, type TestServer } from '../server/harness.js'
import { headers, idem, succeedPayment } from '../server/helpers.js'

/**
 * The full crossing matrix: partner-role keys of two partners in both modes (four actors) try every
 * endpoint (merchant API rows 1-17, simulate, gateway rows 18-23) on the objects of each of the four
 * (the diagonal being the owner's own positive control); so do a wallet-role key (test) and an App-Id
 * (live) of partner B, which reach the gateway only. One `it` per (actor, owner, endpoint).
 *
 * The rules (docs/architecture.md, section 4; src/server/gateway/payment.ts):
 * - merchant API: another partner's or the other mode's merchant/payment is 404, never 403;
 * - gateway: payments are found by id across partners (a payment link reaches any wallet), but only in
 *   the credential's own mode: a test credential never sees a live payment, nor a live one a test payment.
 *
 * test/server/isolation.test.ts covers the merchant API for one owner in depth; this is the whole table.
 */

type Partner = 'A' | 'B'
interface Actor {
  name: string
  partner: Partner
  mode: Mode
  /** Partner-role keys own objects; a wallet-role key and an App-Id only ever reach the gateway. */
  credential: 'partner' | 'wallet' | 'app'
  /** Auth headers of the credential. */
  auth: Record<string, string>
  /** The partner-role key (owners only). */
  key: string
  /** A merchant of the actor's own, for rows that need a valid Merchant-Id of the caller. */
  ownMerchant: string
}

/** What one owner made for one cell: fresh per cell, since the diagonal and the gateway do mutate. */
interface Objects {
  merchantId: string
  merchantIdemKey: string
  settlementId: string
  /** requires_action, for reads and options. */
  read: string
  /** For the merchant cancel, the gateway cancel, confirm and simulate, one payment each. */
  merchantCancel: string
  gatewayCancel: string
  confirm: string
  simulate: string
  /** succeeded, for the refund. */
  refund: string
  /** Test mode: a build option of `read` (for fetch) and a signed confirm body for `confirm`. */
  fetchBody: { optionId: string; data: string }
  confirmBody: { optionId: string; results: string[] }
}

const merchantBody = { merchantName: 'Owner Shop', merchantEmail: 'owner@example.com' }

let t: TestServer
const actors: Actor[] = []
const buyer = createBuyer()

beforeAll(async () => {
  t = await createTestServer()
  const partners: Record<Partner, string> = { A: t.partnerId, B: await t.createPartner() }
  for (const partner of ['A', 'B'] as const) {
    for (const mode of ['test', 'live'] as const) {
      const { apiKey } = await t.createKey(mode, 'partner', partners[partner])
      const own = await send({
        method: 'POST',
        url: '/v1/merchants',
        headers: headers(apiKey, undefined, { 'idempotency-key': idem() }),
        payload: { merchantName: `${partner} ${mode} own`, merchantEmail: 'own@example.com' },
      })
      actors.push({
        name: `${partner} ${mode}`,
        partner,
        mode,
        credential: 'partner',
        auth: { 'api-key': apiKey },
        key: apiKey,
        ownMerchant: own.json.merchant.id,
      })
    }
  }
  const bTest = actors.find((a) => a.name === 'B test')!
  const bLive = actors.find((a) => a.name === 'B live')!
  const { apiKey: walletKey } = await t.createKey('test', 'wallet', partners.B)
  actors.push({
    ...bTest,
    name: 'B test wallet key',
    credential: 'wallet',
    auth: { 'api-key': walletKey },
    key: '',
  })
  const { appId } = await t.createAppId('live', partners.B)
  actors.push({
    ...bLive,
    name: 'B live App-Id',
    credential: 'app',
    auth: { 'app-id': appId, 'client-id': 'wallet-install-1' },
    key: '',
  })
})

/** The actor's auth headers, plus Merchant-Id and others. */
function authOf(actor: Actor, merchantId?: string, extra: Record<string, string> = {}) {
  return { ...actor.auth, ...(merchantId ? { 'merchant-id': merchantId } : {}), ...extra }
}
afterAll(() => t.close())

function send(options: Parameters<TestServer['request']>[0]) {
  return t.request(options)
}

async function ok(options: Parameters<TestServer['request']>[0], status = 200) {
  const res = await send(options)
  expect(res.statusCode, `${options.method} ${options.url}: ${res.body}`).toBe(status)
  return res.json
}

async function makeObjects(owner: Actor): Promise<Objects> {
  const key = owner.key
  const merchantIdemKey = idem()
  const merchantId = (
    await ok(
      {
        method: 'POST',
        url: '/v1/merchants',
        headers: headers(key, undefined, { 'idempotency-key': merchantIdemKey }),
        payload: merchantBody,
      },
      201,
    )
  ).merchant.id as string
  const settlementId = (
    await ok(
      {
        method: 'POST',
        url: `/v1/merchants/${merchantId}/settlements/crypto`,
        headers: headers(key, undefined, { 'idempotency-key': idem() }),
        payload: { settlements: [{ asset: usdc.base, destination: buyer.accounts.base }] },
      },
      201,
    )
  ).settlements[0].id as string
  const pay = async (referenceId: string) =>
    (
      await ok(
        {
          method: 'POST',
          url: '/v1/payments',
          headers: headers(key, merchantId),
          payload: { referenceId, amount: { unit: 'iso4217/USD', value: '700' } },
        },
        201,
      )
    ).paymentId as string
  const objects: Objects = {
    merchantId,
    merchantIdemKey,
    settlementId,
    read: await pay('read'),
    merchantCancel: await pay('merchant-cancel'),
    gatewayCancel: await pay('gateway-cancel'),
    confirm: await pay('confirm'),
    simulate: await pay('simulate'),
    refund: await pay('refund'),
    // Live mode has no chains configured here, so no options: an unknown option id still tells a found
    // payment (400 on the option) from a hidden one (404 on the payment).
    fetchBody: { optionId: 'opt_unknown', data: 'x' },
    confirmBody: { optionId: 'opt_unknown', results: ['0x00'] },
  }
  await succeedPayment(t, objects.refund)
  // Paid by a wallet, as every succeeded payment is: a live refund sends the paid asset back to it.
  await t.db
    .updateTable('payments')
    .set({
      buyer: 'eip155:8453:0x1111111111111111111111111111111111111111',
      option_amount: JSON.stringify({
        unit: 'caip19/eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
        value: '7000000',
        display: { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 },
      }),
    })
    .where('id', '=', objects.refund)
    .execute()
  if (owner.mode === 'test') {
    const options = async (paymentId: string): Promise<PaymentOption[]> =>
      (
        await ok({
          method: 'POST',
          url: `/v1/gateway/payment/${paymentId}/options`,
          headers: headers(key),
          payload: { accounts: Object.values(buyer.accounts) },
        })
      ).options
    const solana = (await options(objects.read)).find(isSolanaOption)!
    objects.fetchBody = { optionId: solana.id, data: optionBuildData(solana) }
    const base = (await options(objects.confirm)).find(isBaseOption)!
    const results: string[] = []
    for (const action of base.actions) results.push(await buyer.sign(action))
    objects.confirmBody = { optionId: base.id, results }
  }
  return objects
}

/** What a row observed: status and code, plus for listings whether the owner's object showed up. */
interface Seen {
  status: number
  code?: string
  sees?: boolean
}

interface Row {
  /** Spec row number(s) and a name. */
  name: string
  run(actor: Actor, o: Objects): Promise<Seen>
  /** For partner-role actors; on merchant API rows the other credentials are refused outright. */
  expected(actor: Actor, owner: Actor): Seen
  gateway?: true
}

function expectedFor(row: Row, actor: Actor, owner: Actor): Seen {
  if (row.gateway || actor.credential === 'partner') return row.expected(actor, owner)
  return actor.credential === 'wallet'
    ? { status: 403, code: 'forbidden' }
    : { status: 401, code: 'missing_api_key' }
}

const seen = (res: { statusCode: number; json: { code?: string } | undefined }): Seen =>
  res.statusCode >= 400 ? { status: res.statusCode, code: res.json?.code } : { status: res.statusCode }

const notFound = (code: 'merchant_not_found' | 'payment_not_found' | 'settlement_not_found'): Seen => ({
  status: 404,
  code,
})
const same = (a: Actor, b: Actor) => a.partner === b.partner && a.mode === b.mode

/** A merchant API call with the Merchant-Id of the owner's merchant ('victim') or the actor's own. */
function merchantCall(
  method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE',
  url: (o: Objects, actor: Actor) => string,
  options: { merchant?: 'victim' | 'own'; payload?: (o: Objects) => object } = {},
) {
  return async (actor: Actor, o: Objects) => {
    const merchant =
      options.merchant === 'victim'
        ? o.merchantId
        : options.merchant === 'own'
          ? actor.ownMerchant
          : undefined
    return seen(
      await send({
        method,
        url: url(o, actor),
        // Row 7 requires a key; the other writes take one as well, as careful clients send it.
        headers: authOf(actor, merchant, method === 'GET' ? {} : { 'idempotency-key': idem() }),
        ...(options.payload ? { payload: options.payload(o) } : {}),
      }),
    )
  }
}

function gatewayCall(method: 'GET' | 'POST', url: (o: Objects) => string, payload?: (o: Objects) => object) {
  return async (actor: Actor, o: Objects) =>
    seen(
      await send({
        method,
        url: url(o),
        headers: authOf(actor),
        ...(payload ? { payload: payload(o) } : {}),
      }),
    )
}

/** Gateway rule: any partner, same mode only. */
function gatewayExpect(found: (actor: Actor) => Seen) {
  return (actor: Actor, owner: Actor): Seen =>
    actor.mode === owner.mode ? found(actor) : notFound('payment_not_found')
}

// Reads first, then writes, the owner's merchant deleted last: on the diagonal each row sees the objects
// as the previous rows left them.
const rows: Row[] = [
  {
    name: '1 list merchants (search by the owner merchant id)',
    async run(actor, o) {
      const res = await send({
        method: 'GET',
        url: `/v1/merchants?search=${o.merchantId}`,
        headers: authOf(actor),
      })
      if (res.statusCode >= 400) return seen(res)
      return {
        status: res.statusCode,
        sees: res.json.data.some((m: { id: string }) => m.id === o.merchantId),
      }
    },
    expected: (a, b) => ({ status: 200, sees: same(a, b) }),
  },
  {
    name: "2 create merchant with the owner's Idempotency-Key",
    async run(actor, o) {
      const res = await send({
        method: 'POST',
        url: '/v1/merchants',
        headers: authOf(actor, undefined, { 'idempotency-key': o.merchantIdemKey }),
        payload: merchantBody,
      })
      if (res.statusCode >= 400) return seen(res)
      // Keys are scoped to (partner, mode): only the owner gets its merchant back as a replay.
      return { status: res.statusCode, sees: res.json.merchant?.id === o.merchantId }
    },
    expected: (a, b) => ({ status: 201, sees: same(a, b) }),
  },
  {
    name: '3 read merchant',
    run: merchantCall('GET', (o) => `/v1/merchants/${o.merchantId}`),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '6 list settlements',
    run: merchantCall('GET', (o) => `/v1/merchants/${o.merchantId}/settlements`),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '11 list payments (sees the owner payment?)',
    async run(actor, o) {
      const res = await send({ method: 'GET', url: '/v1/payments?limit=200', headers: authOf(actor) })
      if (res.statusCode >= 400) return seen(res)
      return {
        status: res.statusCode,
        sees: res.json.data.some((p: { paymentId: string }) => p.paymentId === o.read),
      }
    },
    expected: (a, b) => ({ status: 200, sees: same(a, b) }),
  },
  {
    name: '11 list payments filtered by the owner merchant',
    run: merchantCall('GET', (o) => `/v1/payments?merchantId=${o.merchantId}`),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '12 read payment (Merchant-Id: own merchant)',
    run: merchantCall('GET', (o) => `/v1/payments/${o.read}`, { merchant: 'own' }),
    // On the diagonal "own" is another merchant of the same partner: still not this payment's merchant.
    expected: () => notFound('payment_not_found'),
  },
  {
    name: '12 read payment (Merchant-Id: owner merchant)',
    run: merchantCall('GET', (o) => `/v1/payments/${o.read}`, { merchant: 'victim' }),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '13 payment status (Merchant-Id: own merchant)',
    run: merchantCall('GET', (o) => `/v1/payments/${o.read}/status`, { merchant: 'own' }),
    expected: () => notFound('payment_not_found'),
  },
  {
    name: '13 payment status (Merchant-Id: owner merchant)',
    run: merchantCall('GET', (o) => `/v1/payments/${o.read}/status`, { merchant: 'victim' }),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '14 merchant payments (Merchant-Id: owner merchant)',
    run: merchantCall('GET', () => '/v1/merchants/payments', { merchant: 'victim' }),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '14 merchant payments (Merchant-Id: own merchant; sees the owner payment?)',
    async run(actor, o) {
      const res = await send({
        method: 'GET',
        url: '/v1/merchants/payments?limit=200',
        headers: authOf(actor, actor.ownMerchant),
      })
      if (res.statusCode >= 400) return seen(res)
      if (res.statusCode >= 400) return seen(res)
      return {
        status: res.statusCode,
        sees: res.json.data.some((p: { paymentId: string }) => p.paymentId === o.read),
      }
    },
    expected: () => ({ status: 200, sees: false }),
  },
  {
    name: '15 merchant payments, deprecated path',
    run: merchantCall('GET', (o) => `/v1/merchants/${o.merchantId}/payments`),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '18 gateway payment',
    gateway: true,
    run: gatewayCall('GET', (o) => `/v1/gateway/payment/${o.read}`),
    expected: gatewayExpect(() => ({ status: 200 })),
  },
  {
    name: '19 gateway status',
    gateway: true,
    run: gatewayCall('GET', (o) => `/v1/gateway/payment/${o.read}/status`),
    expected: gatewayExpect(() => ({ status: 200 })),
  },
  {
    name: '20 gateway options',
    gateway: true,
    run: gatewayCall(
      'POST',
      (o) => `/v1/gateway/payment/${o.read}/options`,
      () => ({ accounts: Object.values(buyer.accounts) }),
    ),
    expected: gatewayExpect(() => ({ status: 200 })),
  },
  {
    name: '21 gateway fetch',
    gateway: true,
    run: gatewayCall(
      'POST',
      (o) => `/v1/gateway/payment/${o.read}/fetch`,
      (o) => o.fetchBody,
    ),
    expected: gatewayExpect((a) =>
      a.mode === 'test' ? { status: 200 } : { status: 400, code: 'params_validation' },
    ),
  },
  {
    name: '4 update merchant',
    run: merchantCall('PATCH', (o) => `/v1/merchants/${o.merchantId}`, {
      payload: () => ({ merchantName: 'Taken Over' }),
    }),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '7 register crypto settlement',
    run: merchantCall('POST', (o) => `/v1/merchants/${o.merchantId}/settlements/crypto`, {
      payload: () => ({ settlements: [{ asset: usdc.ethereum, destination: buyer.accounts.ethereum }] }),
    }),
    expected: (a, b) => (same(a, b) ? { status: 201 } : notFound('merchant_not_found')),
  },
  {
    name: '8 change settlement destination',
    run: merchantCall('PUT', (o) => `/v1/merchants/${o.merchantId}/settlements/crypto/${o.settlementId}`, {
      payload: () => ({ destination: 'eip155:8453:0x000000000000000000000000000000000000dEaD' }),
    }),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: "8 change the owner's settlement under the actor's own merchant",
    run: merchantCall(
      'PUT',
      (o, a) => `/v1/merchants/${a.ownMerchant}/settlements/crypto/${o.settlementId}`,
      {
        payload: () => ({ destination: 'eip155:8453:0x000000000000000000000000000000000000dEaD' }),
      },
    ),
    // The settlement is looked up under the merchant in the path: never found through another merchant.
    expected: () => notFound('settlement_not_found'),
  },
  {
    name: '9 remove settlement',
    run: merchantCall('DELETE', (o) => `/v1/merchants/${o.merchantId}/settlements/crypto/${o.settlementId}`),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '10 create payment (Merchant-Id: owner merchant)',
    run: merchantCall('POST', () => '/v1/payments', {
      merchant: 'victim',
      payload: () => ({ referenceId: 'intruder', amount: { unit: 'iso4217/USD', value: '1' } }),
    }),
    expected: (a, b) => (same(a, b) ? { status: 201 } : notFound('merchant_not_found')),
  },
  {
    name: '16 merchant cancel (Merchant-Id: own merchant)',
    run: merchantCall('POST', (o) => `/v1/payments/${o.merchantCancel}/cancel`, { merchant: 'own' }),
    expected: () => notFound('payment_not_found'),
  },
  {
    name: '16 merchant cancel (Merchant-Id: owner merchant)',
    run: merchantCall('POST', (o) => `/v1/payments/${o.merchantCancel}/cancel`, { merchant: 'victim' }),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
  {
    name: '17 refund (Merchant-Id: own merchant)',
    run: merchantCall('POST', () => '/v1/refunds', {
      merchant: 'own',
      payload: (o) => ({ paymentId: o.refund }),
    }),
    expected: () => notFound('payment_not_found'),
  },
  {
    name: '17 refund (Merchant-Id: owner merchant)',
    run: merchantCall('POST', () => '/v1/refunds', {
      merchant: 'victim',
      payload: (o) => ({ paymentId: o.refund }),
    }),
    expected: (a, b) => (same(a, b) ? { status: 201 } : notFound('merchant_not_found')),
  },
  {
    name: 'simulate (Merchant-Id: own merchant)',
    run: merchantCall('POST', (o) => `/v1/test/payments/${o.simulate}/simulate`, {
      merchant: 'own',
      payload: () => ({ outcome: 'succeeded' }),
    }),
    // A live key is refused for being live before anything is looked up.
    expected: (a) =>
      a.mode === 'live' ? { status: 403, code: 'not_sandbox_api_key' } : notFound('payment_not_found'),
  },
  {
    name: 'simulate (Merchant-Id: owner merchant)',
    run: merchantCall('POST', (o) => `/v1/test/payments/${o.simulate}/simulate`, {
      merchant: 'victim',
      payload: () => ({ outcome: 'succeeded' }),
    }),
    expected: (a, b) =>
      !same(a, b)
        ? notFound('merchant_not_found')
        : a.mode === 'live'
          ? { status: 403, code: 'not_sandbox_api_key' }
          : { status: 200 },
  },
  {
    name: '22 gateway cancel',
    gateway: true,
    run: gatewayCall('POST', (o) => `/v1/gateway/payment/${o.gatewayCancel}/cancel`),
    expected: gatewayExpect(() => ({ status: 200 })),
  },
  {
    name: '23 gateway confirm',
    gateway: true,
    run: gatewayCall(
      'POST',
      (o) => `/v1/gateway/payment/${o.confirm}/confirm`,
      (o) => o.confirmBody,
    ),
    expected: gatewayExpect((a) =>
      a.mode === 'test' ? { status: 200 } : { status: 400, code: 'params_validation' },
    ),
  },
  {
    name: '5 delete merchant',
    run: merchantCall('DELETE', (o) => `/v1/merchants/${o.merchantId}`),
    expected: (a, b) => (same(a, b) ? { status: 200 } : notFound('merchant_not_found')),
  },
]

/** The owner's rows, as a comparable snapshot. */
async function snapshot(o: Objects) {
  const merchant = await t.db
    .selectFrom('merchants')
    .select(['name', 'email', 'deleted_at', 'updated_at'])
    .where('id', '=', o.merchantId)
    .executeTakeFirstOrThrow()
  const settlements = await t.db
    .selectFrom('crypto_settlements')
    .select(['id', 'asset', 'destination'])
    .where('merchant_id', '=', o.merchantId)
    .orderBy('id')
    .execute()
  const payments = await t.db
    .selectFrom('payments')
    .select(['id', 'status', 'refunded_at', 'cancelled_at', 'tx_id', 'updated_at'])
    .where('merchant_id', '=', o.merchantId)
    .orderBy('id')
    .execute()
  return { merchant, settlements, payments }
}

describe('crossing matrix: 6 credentials x 4 owners x every endpoint', () => {
  for (const ownerName of ['A test', 'A live', 'B test', 'B live']) {
    for (const actorName of ['A test', 'A live', 'B test', 'B live', 'B test wallet key', 'B live App-Id']) {
      describe(`${actorName} on ${ownerName}'s objects`, () => {
        let owner: Actor
        let actor: Actor
        let objects: Objects
        let before: Awaited<ReturnType<typeof snapshot>>
        beforeAll(async () => {
          owner = actors.find((a) => a.name === ownerName)!
          actor = actors.find((a) => a.name === actorName)!
          objects = await makeObjects(owner)
          before = await snapshot(objects)
        })

        for (const row of rows) {
          it(row.name, async () => {
            expect(await row.run(actor, objects)).toEqual(expectedFor(row, actor, owner))
          })
        }

        if (actorName !== ownerName) {
          it('left nothing of the owner changed (but what the gateway lets any wallet of that mode do)', async () => {
            const after = await snapshot(objects)
            const gatewayTouched =
              actor.mode === owner.mode
                ? new Set([objects.gatewayCancel, objects.confirm])
                : new Set<string>()
            expect({
              ...after,
              payments: after.payments.filter((p) => !gatewayTouched.has(p.id)),
            }).toEqual({ ...before, payments: before.payments.filter((p) => !gatewayTouched.has(p.id)) })
          })
        }
      })
    }
  }
})
