import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { statementsOf } from '../../../../test/gateway/support.js'
import { createTestDatabase, type TestDatabase } from '../../../../test/postgres.js'
import { insertCryptoSettlement, insertMerchant, insertPayment } from '../../../../test/rows.js'
import { loadPaymentAndSettlement } from '../../payments/settlements.js'
import { findTransaction, loadBroadcast, recordTransaction } from './store.js'

let pg: TestDatabase
const now = new Date('2026-03-01T00:00:00Z')
const asset = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1/token:EPjFWdd5AufqSSqeM2qN1xzybapC8G4wEGGkZwyTDt1v'
const destination = 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1:9xQeWvG816bUx9EPjHmaT23yvVM2ZWbrrpZb9PusVFin'

beforeAll(async () => {
  pg = await createTestDatabase()
})
afterAll(() => pg.drop())

describe('loadBroadcast', () => {
  it('reads what loadPaymentAndSettlement and findTransaction read, in one named statement', async () => {
    const owner = await insertMerchant(pg.db, now)
    const paymentId = await insertPayment(pg.db, owner, now)
    await insertCryptoSettlement(pg.db, owner, { asset, destination, now })
    const signature = '5'.repeat(88)
    await recordTransaction(
      pg.db,
      {
        signature,
        paymentId,
        purpose: 'payment',
        chainId: 'solana:EtWTRABZaYq6iMfeYKouRu166VU2xqa1',
        raw: 'AQID',
        blockhash: '1'.repeat(44),
        lastValidBlockHeight: 123_456,
      },
      now,
    )
    const { result, statements } = await statementsOf(() => loadBroadcast(pg.db, paymentId, asset, signature))
    expect(statements).toEqual(['named'])
    const apart = await loadPaymentAndSettlement(pg.db, paymentId, asset)
    expect(result).toEqual({ ...apart, tx: await findTransaction(pg.db, signature) })
    expect(result.settlementDestination).toBe(destination)
    expect(result.tx).toMatchObject({ signature, payment_id: paymentId, last_valid_block_height: '123456' })
    expect(result.tx?.created_at).toBeInstanceOf(Date)
    // No settlement read without an asset; no transaction recorded under another signature.
    const other = await loadBroadcast(pg.db, paymentId, undefined, '6'.repeat(88))
    expect(other).toEqual({ payment: apart.payment, settlementDestination: undefined, tx: undefined })
  })

  it('fails as loadPaymentAndSettlement does for a payment that does not exist', async () => {
    await expect(loadBroadcast(pg.db, 'pay_missing', asset, '5'.repeat(88))).rejects.toThrow('not found')
  })
})
