import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { defaultApiVersion } from '../../src/contract/errors.js'
import type { AuthContext } from '../../src/server/context.js'
import { fail } from '../../src/server/errors.js'
import { runIdempotent } from '../../src/server/idempotency.js'
import { processRegistry } from '../../src/server/metrics/counters.js'
import { transitionPayment } from '../../src/server/payments/lifecycle.js'
import { inTransaction } from '../../src/server/store/db.js'
import { createTestServer, type TestServer } from '../server/harness.js'
import { createMerchant, createPayment } from '../server/helpers.js'

/**
 * `caipay_payment_transitions_total` counts changes that committed (docs/operations.md, "Metrics"): a
 * change made in a transaction that rolls back afterwards is not counted, one that commits counts once,
 * at its commit. On the embedded PostgreSQL, through the transactions the domain code opens.
 */
let t: TestServer
let apiKey: string
let merchantId: string
beforeAll(async () => {
  t = await createTestServer()
  apiKey = (await t.createKey('test')).apiKey
  merchantId = await createMerchant(t, apiKey)
})
afterAll(() => t.close())

/** This process's count of test payments that became cancelled. */
async function cancelledCount(): Promise<number> {
  const metric = await processRegistry.getSingleMetric('caipay_payment_transitions_total')!.get()
  return metric.values
    .filter((value) => value.labels.to === 'cancelled' && value.labels.mode === 'test')
    .reduce((sum, value) => sum + value.value, 0)
}

async function statusOf(paymentId: string): Promise<string> {
  const row = await t.db
    .selectFrom('payments')
    .select('status')
    .where('id', '=', paymentId)
    .executeTakeFirstOrThrow()
  return row.status
}

const cancel = (db: TestServer['db'], paymentId: string) =>
  transitionPayment(db, { paymentId, from: 'requires_action', to: 'cancelled' })

describe('caipay_payment_transitions_total', () => {
  it('does not count a change whose transaction rolls back', async () => {
    const paymentId = await createPayment(t, apiKey, merchantId)
    const before = await cancelledCount()
    await expect(
      inTransaction(t.db, async (trx) => {
        await cancel(trx, paymentId)
        throw new Error('a later step of the transaction failed')
      }),
    ).rejects.toThrow('a later step')
    expect(await statusOf(paymentId)).toBe('requires_action')
    expect(await cancelledCount()).toBe(before)
  })

  it('counts a change in a transaction once, when the transaction commits', async () => {
    const paymentId = await createPayment(t, apiKey, merchantId)
    const before = await cancelledCount()
    await inTransaction(t.db, async (trx) => {
      await cancel(trx, paymentId)
      // Made, not committed yet: not counted yet.
      expect(await cancelledCount()).toBe(before)
    })
    expect(await statusOf(paymentId)).toBe('cancelled')
    expect(await cancelledCount()).toBe(before + 1)
  })

  it('counts a change made outside a transaction (it committed with its statement)', async () => {
    const paymentId = await createPayment(t, apiKey, merchantId)
    const before = await cancelledCount()
    await cancel(t.db, paymentId)
    expect(await cancelledCount()).toBe(before + 1)
  })

  it('under an Idempotency-Key: a refused request is not counted, a committed one once, its replay not again', async () => {
    const auth: AuthContext = {
      partnerId: t.partnerId,
      mode: 'test',
      role: 'partner',
      credentialId: 'key_metrics_test',
      clientId: null,
      pinnedVersion: defaultApiVersion,
    }
    const run = (key: string, paymentId: string, refuse: boolean) =>
      runIdempotent({
        db: t.db,
        auth,
        key,
        fingerprint: `cancel:${paymentId}`,
        now: new Date(),
        ttlSeconds: 60,
        successStatus: 200,
        handler: async (trx) => {
          const row = await cancel(trx, paymentId)
          if (refuse) fail('invalid_params', 'Refused after the change: the change rolls back.')
          return { status: row.status }
        },
      })

    const refused = await createPayment(t, apiKey, merchantId)
    const before = await cancelledCount()
    await expect(run('refused-key', refused, true)).rejects.toMatchObject({ code: 'invalid_params' })
    expect(await statusOf(refused)).toBe('requires_action')
    expect(await cancelledCount()).toBe(before)

    const committed = await createPayment(t, apiKey, merchantId)
    expect(await run('committed-key', committed, false)).toMatchObject({ replayed: false })
    expect(await run('committed-key', committed, false)).toMatchObject({ replayed: true })
    expect(await statusOf(committed)).toBe('cancelled')
    expect(await cancelledCount()).toBe(before + 1)
  })
})
