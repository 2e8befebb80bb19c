import { afterAll, beforeAll, expect, it } from 'vitest'
import { createTestDatabase, type TestDatabase } from '../../../test/postgres.js'
import { insertMerchant, insertPayment } from '../../../test/rows.js'
import { newId } from '../ids.js'
import { claimJobs, completeJob } from '../jobs/queue.js'
import { refundDeposit, refundHeldDeposit } from './deposits.js'

/**
 * A deposit asked back while its payment's deposit-refund job is running: that run may have listed the
 * payment's deposits before this one, so it must not be able to end the job with this deposit left
 * `refunding` (the money owed, no job to send it).
 */
let pg: TestDatabase
const now = new Date('2026-03-01T00:00:00Z')
const kind = 'test.deposit_refund'
let owner: { partnerId: string; merchantId: string }

beforeAll(async () => {
  pg = await createTestDatabase()
  owner = await insertMerchant(pg.db, now)
})
afterAll(() => pg.drop())

async function heldDeposit(paymentId: string): Promise<string> {
  const id = newId('deposit')
  await pg.db
    .insertInto('deposits')
    .values({
      id,
      mode: 'test',
      partner_id: owner.partnerId,
      merchant_id: owner.merchantId,
      payment_id: paymentId,
      chain_id: 'eip155:31337',
      asset: 'eip155:31337/erc20:0x0000000000000000000000000000000000000001',
      holder: 'eip155:31337:0x0000000000000000000000000000000000000002',
      sender: 'eip155:31337:0x0000000000000000000000000000000000000003',
      amount: '5',
      reason: 'late',
      status: 'held',
      tx_ids: ['0x01:0'],
      created_at: now,
      updated_at: now,
    })
    .execute()
  return id
}

const jobOf = (paymentId: string) =>
  pg.db
    .selectFrom('jobs')
    .selectAll()
    .where('kind', '=', kind)
    .where('payment_id', '=', paymentId)
    .executeTakeFirstOrThrow()

it('takes over a running refund job, so its run cannot end it with the new deposit left behind', async () => {
  const paymentId = await insertPayment(pg.db, owner, now)
  const first = await heldDeposit(paymentId)
  await refundDeposit(pg.db, { id: first, jobKind: kind, now })
  const [running] = await claimJobs(pg.db, { kinds: [kind], now })
  expect(running).toMatchObject({ state: 'running', attempts: 1 })

  // While that run works (it listed only the first deposit), a second deposit is asked back.
  const second = await heldDeposit(paymentId)
  await refundDeposit(pg.db, { id: second, jobKind: kind, now })
  // The old run finishes: its claim no longer holds, so nothing is recorded.
  await completeJob(pg.db, running!, { sent: ['first only'] }, now)
  expect(await jobOf(paymentId)).toMatchObject({ state: 'pending', result: null })

  // The next claim is a new generation and runs for both deposits.
  const [again] = await claimJobs(pg.db, { kinds: [kind], now })
  expect(again!.attempts).toBeGreaterThan(running!.attempts + 1)
  await completeJob(pg.db, again!, { sent: ['both'] }, now)
  expect(await jobOf(paymentId)).toMatchObject({ state: 'succeeded', result: { sent: ['both'] } })
})

it('queues a finished refund job again: its retries counted afresh, its claims (the fence) never reused', async () => {
  const paymentId = await insertPayment(pg.db, owner, now)
  await refundDeposit(pg.db, { id: await heldDeposit(paymentId), jobKind: kind, now })
  const [run] = await claimJobs(pg.db, { kinds: [kind], now })
  await completeJob(pg.db, run!, { sent: ['one'] }, now)
  await refundDeposit(pg.db, { id: await heldDeposit(paymentId), jobKind: kind, now })
  expect(await jobOf(paymentId)).toMatchObject({ state: 'pending', attempts: 1, armed_attempts: 1 })
})

it("an operator's refund of a test-mode deposit is done at once (no chain job that could never run)", async () => {
  const paymentId = await insertPayment(pg.db, owner, now)
  const id = await heldDeposit(paymentId)
  const row = await refundHeldDeposit(pg.db, { id, now })
  expect(row).toMatchObject({ status: 'refunded', refund_tx_id: `test:${id}` })
  expect(await pg.db.selectFrom('jobs').selectAll().where('payment_id', '=', paymentId).execute()).toEqual([])
  await expect(refundHeldDeposit(pg.db, { id, now })).rejects.toMatchObject({ code: 'invalid_state' })
})
