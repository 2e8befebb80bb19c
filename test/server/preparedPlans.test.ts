import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { findGatewayPayment } from '../../src/server/gateway/payment.js'
import { findMerchantPayment } from '../../src/server/payments/views.js'
import { createDb, type Db } from '../../src/server/store/db.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'
import { insertMerchant, insertPayment } from '../rows.js'

interface PlanNode {
  'Node Type': string
  'Index Name'?: string
  'Shared Hit Blocks'?: number
  Plans?: PlanNode[]
}

function indexesOf(node: PlanNode): string[] {
  return [...(node['Index Name'] ? [node['Index Name']] : []), ...(node.Plans ?? []).flatMap(indexesOf)]
}

/**
 * The status reads are prepared: from its sixth run a connection keeps one generic plan, costed when
 * the table was small. After the merchant's payments grow that plan must still be a primary-key
 * lookup, not a walk of one of the merchant's list indexes.
 */
describe('prepared status reads after a write burst', () => {
  let pg: TestDatabase
  // One connection, so the statements prepared by the reads are the ones explained.
  let db: Db
  beforeAll(async () => {
    pg = await createTestDatabase()
    db = createDb(pg.url, 1)
  })
  afterAll(async () => {
    await db?.destroy()
    await pg?.drop()
  })

  it('keep to the primary key on the connection that cached their plans', async () => {
    const now = new Date()
    const owner = await insertMerchant(db, now)
    const paymentId = await insertPayment(db, owner, now)
    for (let run = 0; run < 8; run++) {
      await findMerchantPayment(db, owner.merchantId, paymentId, now)
      await findGatewayPayment(db, paymentId, 'test', now)
    }
    // The burst: the same merchant's payments, each created a moment apart.
    await sql`INSERT INTO payments
      SELECT 'pay_burst_' || n, partner_id, merchant_id, mode, reference_id, amount_unit, amount_value, status,
        failure_code, expires_at, selected_option_id, buyer, option_amount, tx_id, settlement_status,
        settlement_tx_id, settlement_unit, refunded_at, cancelled_at, cancelled_reason, checkout,
        created_at + n * interval '1 ms', updated_at
      FROM payments, generate_series(1, 5000) AS n WHERE id = ${paymentId}`.execute(db)

    const { rows: statements } = await sql<{ name: string; params: number }>`
      SELECT name, cardinality(parameter_types) AS params FROM pg_prepared_statements
      WHERE statement ILIKE 'select %' AND statement ILIKE '%from payments %'`.execute(db)
    expect(statements.length).toBe(2)
    for (const { name, params } of statements) {
      expect(params).toBe(1)
      const { rows } = await sql<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>`
        EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) EXECUTE ${sql.id(name)}(${sql.lit(paymentId)})`.execute(db)
      const plan = rows[0]!['QUERY PLAN'][0].Plan
      expect(indexesOf(plan).filter((index) => !index.endsWith('_pkey'))).toEqual([])
      expect(plan['Shared Hit Blocks']).toBeLessThan(20)
    }
    // Still scoped: another merchant, or the other mode, does not see the payment.
    await expect(findMerchantPayment(db, 'mer_other', paymentId, now)).rejects.toMatchObject({
      code: 'payment_not_found',
    })
    await expect(findGatewayPayment(db, paymentId, 'live', now)).rejects.toMatchObject({
      code: 'payment_not_found',
    })
  })
})
