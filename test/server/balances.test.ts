import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { canonicalCaip } from '../../src/caip/caip.js'
import { createMerchantClient } from '../../src/client/merchant.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { acknowledgeDifference, reconcile } from '../../src/server/ledger/reconcile.js'
import { allocateFloat, creditTopUps } from '../../src/server/ledger/topUps.js'
import { addSettlementItems } from '../../src/server/payments/settlementItems.js'
import { createTestServer, type TestServer } from './harness.js'
import { createMerchant, createPayment, headers } from './helpers.js'

/**
 * GET /v1/balances on PostgreSQL, its ledger rows written by the ledger's own functions (top-ups, a float
 * allocation, settlement items' `payment.collected` entries, reconciliation): a partner reads its own
 * accounts and nothing of another partner's, and an open difference with the words saying sends stopped.
 */
const chain = 'eip155:8453'
const asset = canonicalCaip('eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913')
const holder = holderOf(chain, '0x2222222222222222222222222222222222222222')
/** A second collection address only partner B has money at. */
const otherHolder = holderOf(chain, '0x3333333333333333333333333333333333333333')
const usdcDisplay = { assetName: 'USD Coin', assetSymbol: 'USDC', decimals: 6 }

let t: TestServer
const a = { key: '', testKey: '', merchant: '', partner: '' }
const b = { key: '', merchant: '', partner: '' }

async function collect(apiKey: string, merchantId: string, amount: bigint, fee: bigint, at = holder) {
  const paymentId = await createPayment(t, apiKey, merchantId)
  await addSettlementItems(
    t.db,
    [
      {
        paymentId,
        chain,
        asset,
        destination: holderOf(chain, '0x4444444444444444444444444444444444444444'),
        amount,
        fee,
        intervalMs: 3_600_000,
        jobKind: 'balances.test.settle',
        holder: at,
      },
    ],
    new Date(),
  )
}

const getBalances = (apiKey: string, query = '') =>
  t.request({ method: 'GET', url: `/v1/balances${query}`, headers: headers(apiKey) })

beforeAll(async () => {
  t = await createTestServer()
  a.partner = t.partnerId
  a.key = (await t.createKey('live')).apiKey
  a.testKey = (await t.createKey('test')).apiKey
  a.merchant = await createMerchant(t, a.key)
  b.partner = await t.createPartner()
  b.key = (await t.createKey('live', 'partner', b.partner)).apiKey
  b.merchant = await createMerchant(t, b.key)

  const now = new Date()
  await creditTopUps(t.db, {
    mode: 'live',
    holder,
    asset,
    block: 10n,
    transfers: [{ txId: '0xtopup:0', value: 1_000_000n }],
    now,
  })
  await allocateFloat(t.db, { mode: 'live', holder, asset, partnerId: a.partner, amount: 300_000n, now })
  await allocateFloat(t.db, { mode: 'live', holder, asset, partnerId: b.partner, amount: 200_000n, now })
  await collect(a.key, a.merchant, 9_000_000n, 1_000_000n)
  await collect(b.key, b.merchant, 4_000_000n, 0n)
  await collect(b.key, b.merchant, 5_000_000n, 0n, otherHolder)
})
afterAll(() => t.close())

describe('GET /v1/balances', () => {
  it("answers the partner's own accounts, per chain, asset and holding address, in minor units with display", async () => {
    const res = await getBalances(a.key)
    expect(res.statusCode, res.body).toBe(200)
    expect(res.headers['pay-version']).toBeDefined()
    const amount = (value: string) => ({
      unit: `caip19/${asset}`,
      value,
      display: expect.objectContaining(usdcDisplay),
    })
    expect(res.json).toEqual({
      data: [
        {
          chainId: chain,
          asset,
          holder,
          account: 'collected',
          merchantId: a.merchant,
          amount: amount('10000000'),
          sendsStopped: false,
        },
        {
          chainId: chain,
          asset,
          holder,
          account: 'float',
          merchantId: null,
          amount: amount('300000'),
          sendsStopped: false,
        },
      ],
      differences: [],
    })
  })

  it("never shows another partner's accounts, nor the operator's unallocated top-ups", async () => {
    const ofB = (await getBalances(b.key)).json
    expect(
      ofB.data.map((row: { account: string; holder: string; amount: { value: string } }) => row),
    ).toEqual([
      expect.objectContaining({ holder, account: 'collected', merchantId: b.merchant }),
      expect.objectContaining({ holder, account: 'float', merchantId: null }),
      expect.objectContaining({ holder: otherHolder, account: 'collected', merchantId: b.merchant }),
    ])
    expect(ofB.data.map((row: { amount: { value: string } }) => row.amount.value)).toEqual([
      '4000000',
      '200000',
      '5000000',
    ])
    const ofA = JSON.stringify((await getBalances(a.key)).json)
    expect(ofA).not.toContain(b.merchant)
    expect(ofA).not.toContain(otherHolder)
    expect(ofA).not.toContain('200000')
    expect(ofA).not.toContain('500000') // the unallocated rest of the top-up
  })

  it("?merchantId narrows to that merchant; another partner's merchant is 404 merchant_not_found", async () => {
    const mine = await getBalances(a.key, `?merchantId=${a.merchant}`)
    expect(mine.json.data.map((row: { account: string }) => row.account)).toEqual(['collected'])
    const theirs = await getBalances(a.key, `?merchantId=${b.merchant}`)
    expect([theirs.statusCode, theirs.json.code]).toEqual([404, 'merchant_not_found'])
    expect(typeof theirs.json.message).toBe('string')
    const unknown = await getBalances(a.key, '?merchantId=x&other=1')
    expect([unknown.statusCode, unknown.json.code]).toEqual([400, 'params_validation'])
  })

  it('a test key reads the test-mode book, which holds nothing (test mode books no money)', async () => {
    const res = await getBalances(a.testKey)
    expect([res.statusCode, res.json]).toEqual([200, { data: [], differences: [] }])
  })

  it('shows an open reconciliation difference at its holding addresses, with sends stopped, until acknowledged', async () => {
    // The chain holds 0.25 USDC less at `holder` than the ledger (nothing in flight), and B's other address
    // has a difference of its own that A must not see.
    const ledgerAtHolder = 1_000_000n + 10_000_000n + 4_000_000n
    const now = new Date()
    const common = { mode: 'live' as const, asset, block: 42n, now }
    expect(await reconcile(t.db, { ...common, holder, chainBalance: ledgerAtHolder - 250_000n })).toBe(
      -250_000n,
    )
    expect(await reconcile(t.db, { ...common, holder: otherHolder, chainBalance: 5_000_001n })).toBe(1n)

    const res = await getBalances(a.key)
    expect(res.json.data.every((row: { sendsStopped: boolean }) => row.sendsStopped)).toBe(true)
    expect(res.json.differences).toEqual([
      {
        id: expect.any(String),
        chainId: chain,
        asset,
        holder,
        block: '42',
        difference: '-250000',
        detectedAt: now.toISOString(),
        message: expect.stringContaining(`Settlements and refunds from ${holder} are stopped`),
      },
    ])
    const [difference] = res.json.differences
    expect(difference.message).toContain('0.25 USDC less than the ledger explains')
    expect(difference.message).toContain(`difference ${difference.id}`)
    expect(JSON.stringify(res.json)).not.toContain(otherHolder)

    const ofB = (await getBalances(b.key)).json
    expect(ofB.differences.map((d: { holder: string }) => d.holder)).toEqual([holder, otherHolder])

    await acknowledgeDifference(t.db, { id: difference.id, note: null, now })
    const after = (await getBalances(a.key)).json
    expect(after.differences).toEqual([])
    expect(after.data.some((row: { sendsStopped: boolean }) => row.sendsStopped)).toBe(false)
  })

  it('the merchant client reads it (getBalances), parsed by the contract schema', async () => {
    const url = await t.app.listen({ host: '127.0.0.1', port: 0 })
    const client = createMerchantClient({ baseUrl: url, apiKey: a.key })
    const balances = await client.getBalances({ query: { merchantId: a.merchant } })
    expect(balances.data).toEqual([
      expect.objectContaining({ account: 'collected', merchantId: a.merchant, sendsStopped: false }),
    ])
    expect(balances.data[0]!.amount.value).toBe('10000000')
    await expect(client.getBalances({ query: { merchantId: b.merchant } })).rejects.toMatchObject({
      code: 'merchant_not_found',
    })
  })
})
