import pgDriver from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { statementsOf } from '../../../test/gateway/support.js'
import { createTestDatabase, type TestDatabase } from '../../../test/postgres.js'
import { insertMerchant, insertPayment } from '../../../test/rows.js'
import { inTransaction } from '../store/db.js'
import { FenceLost, holdFences } from './fence.js'
import { jobsChannel } from './notify.js'
import { claimJobs, completeJob, enqueueJob, failJob, rearmJob } from './queue.js'

let pg: TestDatabase
const now = new Date('2026-03-01T00:00:00Z')
const paymentIds: string[] = []

beforeAll(async () => {
  pg = await createTestDatabase()
  const owner = await insertMerchant(pg.db, now)
  for (let i = 0; i < 20; i++) paymentIds.push(await insertPayment(pg.db, owner, now))
})
afterAll(() => pg.drop())

describe('jobs queue', () => {
  it('enqueues once per (kind, payment)', async () => {
    await enqueueJob(pg.db, { kind: 'settle', paymentId: paymentIds[0]!, payload: { a: 1 }, now })
    await enqueueJob(pg.db, { kind: 'settle', paymentId: paymentIds[0]!, payload: { a: 2 }, now })
    const rows = await pg.db.selectFrom('jobs').selectAll().where('kind', '=', 'settle').execute()
    expect(rows).toHaveLength(1)
    expect(rows[0]!.payload).toEqual({ a: 1 })
  })

  it('enqueues and wakes the runners in one round trip, the wake-up delivered at commit', async () => {
    const listener = new pgDriver.Client({ connectionString: pg.url })
    await listener.connect()
    const heard: string[] = []
    listener.on('notification', (n) => heard.push(`${n.channel}:${n.payload}`))
    await listener.query(`LISTEN ${jobsChannel}`)
    try {
      const enqueue = () => enqueueJob(pg.db, { kind: 'wake', paymentId: paymentIds[1]!, now })
      const { statements } = await statementsOf(enqueue)
      expect(statements).toHaveLength(1)
      await expect.poll(() => heard).toEqual([`${jobsChannel}:wake`])
      // Already queued: no second row, but the runners are still woken (as before the one statement).
      await enqueue()
      await expect.poll(() => heard).toHaveLength(2)
      // Inside a transaction: nothing is heard before it commits, nothing at all when it rolls back.
      await inTransaction(pg.db, async (trx) => {
        await enqueueJob(trx, { kind: 'wake-later', paymentId: paymentIds[1]!, now })
        await new Promise((resolve) => setTimeout(resolve, 100))
        expect(heard).toHaveLength(2)
      })
      await expect.poll(() => heard.at(-1)).toBe(`${jobsChannel}:wake-later`)
      await inTransaction(pg.db, async (trx) => {
        await enqueueJob(trx, { kind: 'rolled-back', paymentId: paymentIds[1]!, now })
        throw new Error('roll back')
      }).catch(() => {})
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(heard).toHaveLength(3)
      const kinds = await pg.db
        .selectFrom('jobs')
        .select('kind')
        .where('payment_id', '=', paymentIds[1]!)
        .execute()
      expect(kinds.map((k) => k.kind).sort()).toEqual(['wake', 'wake-later'])
    } finally {
      await listener.end()
    }
  })

  it('concurrent workers claim disjoint jobs', async () => {
    for (const id of paymentIds) await enqueueJob(pg.db, { kind: 'broadcast', paymentId: id, now })
    const claims = await Promise.all(
      Array.from({ length: 5 }, () => claimJobs(pg.db, { kinds: ['broadcast'], limit: 6, now })),
    )
    const ids = claims.flat().map((j) => j.id)
    expect(new Set(ids).size).toBe(ids.length)
    expect(ids.length).toBe(20)
    for (const job of claims.flat()) expect(job.attempts).toBe(1)
  })

  it('a lease that ran out makes the job claimable again; complete and fail settle it', async () => {
    const later = new Date(now.getTime() + 120_000)
    const again = await claimJobs(pg.db, { kinds: ['broadcast'], limit: 1, now: later })
    expect(again).toHaveLength(1)
    expect(again[0]!.attempts).toBe(2)
    await completeJob(pg.db, again[0]!, { txId: '0x1' }, later)
    const done = await pg.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', again[0]!.id)
      .executeTakeFirstOrThrow()
    expect(done).toMatchObject({ state: 'succeeded', result: { txId: '0x1' } })

    const [job] = await claimJobs(pg.db, { kinds: ['settle'], now })
    await failJob(pg.db, job!, new Error('rpc down'), { now })
    const retry = await pg.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', job!.id)
      .executeTakeFirstOrThrow()
    expect(retry).toMatchObject({ state: 'pending', last_error: 'rpc down' })
    expect(retry.run_at.getTime()).toBeGreaterThan(now.getTime())
    expect(await claimJobs(pg.db, { kinds: ['settle'], now })).toHaveLength(0)
    await failJob(pg.db, job!, 'gave up', { now, maxAttempts: job!.attempts })
    expect(
      (await pg.db.selectFrom('jobs').select('state').where('id', '=', job!.id).executeTakeFirstOrThrow())
        .state,
    ).toBe('failed')
  })

  it("a claim taken over holds no fence: its writes and its result are refused, the new claim's are not", async () => {
    await enqueueJob(pg.db, { kind: 'refund', paymentId: paymentIds[1]!, now })
    const [first] = await claimJobs(pg.db, { kinds: ['refund'], now })
    const firstFence = { jobId: first!.id, generation: first!.attempts }
    expect(await holdFences(pg.db, [firstFence])).toEqual(new Set([first!.id]))
    // Paused past its lease: another runner claims the job.
    const later = new Date(now.getTime() + 60_000)
    const [second] = await claimJobs(pg.db, { kinds: ['refund'], now: later })
    expect(second!.id).toBe(first!.id)
    const secondFence = { jobId: second!.id, generation: second!.attempts }
    expect(await holdFences(pg.db, [firstFence, secondFence])).toEqual(new Set([second!.id]))
    expect(new FenceLost(firstFence).message).toContain(`claim ${first!.attempts}`)

    // The first claim resumes and reports a result: not recorded.
    await completeJob(pg.db, first!, { stale: true }, later)
    const running = await pg.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', first!.id)
      .executeTakeFirstOrThrow()
    expect(running).toMatchObject({ state: 'running', result: null, attempts: second!.attempts })
    await completeJob(pg.db, second!, { fresh: true }, later)
    const done = await pg.db
      .selectFrom('jobs')
      .selectAll()
      .where('id', '=', first!.id)
      .executeTakeFirstOrThrow()
    expect(done).toMatchObject({ state: 'succeeded', result: { fresh: true } })
    // A finished job holds no fence either.
    expect(await holdFences(pg.db, [secondFence])).toEqual(new Set())
  })

  it('a fence share-locks its job: a claim by another runner waits for the fenced write to commit', async () => {
    await enqueueJob(pg.db, { kind: 'settle', paymentId: paymentIds[2]!, now })
    const [job] = await claimJobs(pg.db, { kinds: ['settle'], now })
    const fence = { jobId: job!.id, generation: job!.attempts }
    const later = new Date(now.getTime() + 60_000)
    let claimedAgain: Awaited<ReturnType<typeof claimJobs>> | undefined
    await pg.db.transaction().execute(async (trx) => {
      expect(await holdFences(trx, [fence])).toEqual(new Set([job!.id]))
      // SKIP LOCKED: the row is skipped while the fenced write is open, never claimed under it.
      claimedAgain = await claimJobs(pg.db, { kinds: ['settle'], now: later })
    })
    expect(claimedAgain).toEqual([])
    expect(await claimJobs(pg.db, { kinds: ['settle'], now: later })).toHaveLength(1)
  })

  it('rearmJob: a job queued again keeps its fence counting up and counts its retries afresh', async () => {
    const paymentId = paymentIds[3]!
    const kind = 'rearm'
    await rearmJob(pg.db, { kind, paymentId, now })
    // Three claims that all fail: with maxAttempts 3 the job gives up.
    for (let i = 0; i < 3; i++) {
      const [job] = await claimJobs(pg.db, {
        kinds: [kind],
        now: new Date(now.getTime() + 3_600_000 * (i + 1)),
      })
      await failJob(pg.db, job!, new Error('node down'), { maxAttempts: 3, now, backoffMs: 0 })
    }
    const gaveUp = await pg.db
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', kind)
      .executeTakeFirstOrThrow()
    expect(gaveUp).toMatchObject({ state: 'failed', attempts: 3 })

    // New work: pending again, the generation not reused, the tries counted from here.
    await rearmJob(pg.db, { kind, paymentId, now })
    const [next] = await claimJobs(pg.db, { kinds: [kind], now })
    expect(next).toMatchObject({ attempts: 4, armed_attempts: 3 })
    await failJob(pg.db, next!, new Error('once more'), { maxAttempts: 3, now, backoffMs: 0 })
    expect(
      await pg.db.selectFrom('jobs').select('state').where('kind', '=', kind).executeTakeFirstOrThrow(),
    ).toEqual({ state: 'pending' })

    // Queued again while it runs: that run's claim is over (nothing it completes is recorded).
    const [running] = await claimJobs(pg.db, { kinds: [kind], now })
    await rearmJob(pg.db, { kind, paymentId, now })
    await completeJob(pg.db, running!, { stale: true }, now)
    const after = await pg.db
      .selectFrom('jobs')
      .selectAll()
      .where('kind', '=', kind)
      .executeTakeFirstOrThrow()
    expect(after).toMatchObject({ state: 'pending', result: null, attempts: running!.attempts + 1 })
    expect(await holdFences(pg.db, [{ jobId: running!.id, generation: running!.attempts }])).toEqual(
      new Set(),
    )
  })
})
