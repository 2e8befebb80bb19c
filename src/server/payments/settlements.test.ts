import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { statementsOf } from '../../../test/gateway/support.js'
import { createTestDatabase, type TestDatabase } from '../../../test/postgres.js'
import { insertCryptoSettlement, insertMerchant, insertPayment } from '../../../test/rows.js'
import { loadPayment } from './lifecycle.js'
import { loadPaymentAndSettlement } from './settlements.js'

let pg: TestDatabase
const now = new Date('2026-03-01T00:00:00Z')
const asset = 'eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913'
const destination = 'eip155:8453:0x00000000000000000000000000000000000000aa'

beforeAll(async () => {
  pg = await createTestDatabase()
})
afterAll(() => pg.drop())

describe('loadPaymentAndSettlement', () => {
  it("reads the payment and its merchant's destination for the asset in one statement", async () => {
    const owner = await insertMerchant(pg.db, now)
    const paymentId = await insertPayment(pg.db, owner, now)
    await insertCryptoSettlement(pg.db, owner, { asset, destination, now })
    const { result, statements } = await statementsOf(() => loadPaymentAndSettlement(pg.db, paymentId, asset))
    // One named statement: parsed once per connection, and nothing for kysely to build per job.
    expect(statements).toEqual(['named'])
    expect(result.payment).toEqual(await loadPayment(pg.db, paymentId))
    expect(result.settlementDestination).toBe(destination)
    // The asset spelled in another case is the same asset (its key is canonical).
    expect(
      (await loadPaymentAndSettlement(pg.db, paymentId, asset.toLowerCase())).settlementDestination,
    ).toBe(destination)
    // No settlement for another asset, and none read for a payment with no settlement step.
    const other = 'eip155:8453/erc20:0x0000000000000000000000000000000000000001'
    expect((await loadPaymentAndSettlement(pg.db, paymentId, other)).settlementDestination).toBeUndefined()
    expect(
      (await loadPaymentAndSettlement(pg.db, paymentId, undefined)).settlementDestination,
    ).toBeUndefined()
  })

  it('fails as loadPayment does for a payment that does not exist', async () => {
    await expect(loadPaymentAndSettlement(pg.db, 'pay_missing', asset)).rejects.toThrow()
  })
})
