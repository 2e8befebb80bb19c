import { describe, expect, it } from 'vitest'
import { createDb, type Db } from './db.js'
import { preparedStatement } from './prepared.js'

describe('preparedStatement', () => {
  // Never connects: the misuse is refused before anything runs.
  const db = createDb('postgres://127.0.0.1:9/unused')

  it('refuses a build that does not use its arguments once each, in order', async () => {
    const swapped = preparedStatement((q: Db, paymentId: string, merchantId: string) =>
      q.selectFrom('payments').select('id').where('merchant_id', '=', merchantId).where('id', '=', paymentId),
    )
    await expect(swapped(db, 'pay_1', 'mer_1')).rejects.toThrow(/each argument once, in order/)
    const constant = preparedStatement((q: Db, _paymentId: string) =>
      q.selectFrom('payments').select('id').where('id', '=', 'pay_fixed'),
    )
    await expect(constant(db, 'pay_1')).rejects.toThrow(/each argument once, in order/)
  })
})
