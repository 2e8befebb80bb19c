import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { statementsOf } from '../../../test/gateway/support.js'
import { createTestDatabase, type TestDatabase } from '../../../test/postgres.js'
import { insertMerchant, insertPayment } from '../../../test/rows.js'
import { enqueueJob } from './queue.js'
import { type JobHandler, RetryLater, startJobRunner } from './runner.js'

let pg: TestDatabase
let owner: { partnerId: string; merchantId: string }

beforeAll(async () => {
  pg = await createTestDatabase()
  owner = await insertMerchant(pg.db, new Date())
})
afterAll(() => pg.drop())

const payment = () => insertPayment(pg.db, owner, new Date())

const job = (paymentId: string, kind: string) =>
  pg.db
    .selectFrom('jobs')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('kind', '=', kind)
    .executeTakeFirstOrThrow()

/** Makes a job due again now (the runner's backoff would otherwise wait seconds). */
const dueNow = (paymentId: string) =>
  pg.db
    .updateTable('jobs')
    .set({ run_at: new Date(0) })
    .where('payment_id', '=', paymentId)
    .execute()

describe('startJobRunner', () => {
  it('runs due jobs of its kinds and stores their result', async () => {
    const id = await payment()
    await enqueueJob(pg.db, { kind: 'test.ok', paymentId: id, payload: { n: 2 } })
    const seen: unknown[] = []
    const runner = startJobRunner({
      db: pg.db,
      intervalMs: 60_000,
      handlers: {
        'test.ok': {
          run: async (j) => {
            seen.push(j.payload)
            return { doubled: 4 }
          },
        },
      },
    })
    expect(await runner.runOnce()).toBe(1)
    await runner.stop()
    expect(seen).toEqual([{ n: 2 }])
    expect(await job(id, 'test.ok')).toMatchObject({
      state: 'succeeded',
      result: { doubled: 4 },
      attempts: 1,
    })
  })

  it('records the results of steps that end in the same turn in one statement', async () => {
    const ids = [await payment(), await payment(), await payment()]
    for (const id of ids) await enqueueJob(pg.db, { kind: 'test.together', paymentId: id })
    // The steps end together, as a block's relays do when the chain's watcher wakes them.
    let release!: () => void
    const landed = new Promise<void>((resolve) => {
      release = resolve
    })
    let started = 0
    const runner = startJobRunner({
      db: pg.db,
      intervalMs: 60_000,
      handlers: {
        'test.together': {
          run: async (j) => {
            if (++started === ids.length) release()
            await landed
            return { paymentId: j.payment_id }
          },
        },
      },
    })
    const { statements } = await statementsOf(() => runner.runOnce())
    await runner.stop()
    // The claim and one UPDATE of the three jobs.
    expect(statements.filter((s) => /UPDATE jobs SET state = 'succeeded'/.test(s))).toHaveLength(1)
    for (const id of ids) {
      expect(await job(id, 'test.together')).toMatchObject({ state: 'succeeded', result: { paymentId: id } })
    }
  })

  it('retries a failing job with backoff, then gives up and calls onGiveUp', async () => {
    const id = await payment()
    await enqueueJob(pg.db, { kind: 'test.flaky', paymentId: id })
    const gaveUp: string[] = []
    const handler: JobHandler = {
      maxAttempts: 2,
      run: async () => {
        throw new Error('node unreachable')
      },
      onGiveUp: async (j, error) => {
        gaveUp.push(`${j.attempts}:${(error as Error).message}`)
      },
    }
    const runner = startJobRunner({ db: pg.db, intervalMs: 60_000, handlers: { 'test.flaky': handler } })
    await runner.runOnce()
    const first = await job(id, 'test.flaky')
    expect(first).toMatchObject({ state: 'pending', attempts: 1, last_error: 'node unreachable' })
    expect(first.run_at.getTime()).toBeGreaterThan(Date.now())
    await dueNow(id)
    await runner.runOnce()
    await runner.stop()
    expect(await job(id, 'test.flaky')).toMatchObject({ state: 'failed', attempts: 2 })
    expect(gaveUp).toEqual(['2:node unreachable'])
  })

  it('never gives up on RetryLater (a step in flight on the chain)', async () => {
    const id = await payment()
    await enqueueJob(pg.db, { kind: 'test.later', paymentId: id })
    let calls = 0
    const runner = startJobRunner({
      db: pg.db,
      intervalMs: 60_000,
      handlers: {
        'test.later': {
          maxAttempts: 1,
          run: async () => {
            calls += 1
            if (calls < 3) throw new RetryLater('no receipt yet')
            return 'mined'
          },
        },
      },
    })
    for (let i = 0; i < 3; i++) {
      await dueNow(id)
      await runner.runOnce()
    }
    await runner.stop()
    expect(await job(id, 'test.later')).toMatchObject({ state: 'succeeded', attempts: 3, result: 'mined' })
  })

  it('stop() aborts running jobs and hands their claim back untouched', async () => {
    const id = await payment()
    await enqueueJob(pg.db, { kind: 'test.slow', paymentId: id })
    let started!: () => void
    const running = new Promise<void>((resolve) => {
      started = resolve
    })
    const runner = startJobRunner({
      db: pg.db,
      intervalMs: 10,
      handlers: {
        'test.slow': {
          run: (_j, ctx) =>
            new Promise((_, reject) => {
              started()
              ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason))
            }),
        },
      },
    })
    await running
    await runner.stop()
    expect(await job(id, 'test.slow')).toMatchObject({
      state: 'pending',
      locked_until: null,
      result: null,
      last_error: null,
    })
  })

  it('a claim still waiting for the database when stop() begins hands its jobs back instead of running them, and stop() returns', async () => {
    const id = await payment()
    let started = 0
    const runner = startJobRunner({
      db: pg.db,
      intervalMs: 20,
      handlers: {
        'test.late': {
          async run(_job, ctx) {
            started++
            await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve))
            throw new Error('stopped')
          },
        },
      },
    })
    let stopping: Promise<void> | undefined
    await pg.db.transaction().execute(async (trx) => {
      // The next poll's claim waits for this lock, so it returns only after stop() has begun.
      await sql`LOCK TABLE jobs IN EXCLUSIVE MODE`.execute(trx)
      for (let waiting = 0; waiting === 0; ) {
        await new Promise((resolve) => setTimeout(resolve, 10))
        const blocked = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query LIKE '%UPDATE jobs SET state = ''running''%'`.execute(
          pg.db,
        )
        waiting = blocked.rows[0]!.n
      }
      await enqueueJob(trx, { kind: 'test.late', paymentId: id, runAt: new Date(0) })
      stopping = runner.stop()
    })
    const outcome = await Promise.race([
      stopping!.then(() => 'stopped'),
      new Promise((resolve) => setTimeout(() => resolve('still waiting'), 5_000)),
    ])
    expect(outcome).toBe('stopped')
    expect(started).toBe(0)
    expect(await job(id, 'test.late')).toMatchObject({ state: 'pending', locked_until: null })
  })

  it('with listenUrl, starts a job as soon as its transaction commits (no poll needed)', async () => {
    const id = await payment()
    let ran!: () => void
    const done = new Promise<void>((resolve) => {
      ran = resolve
    })
    const runner = startJobRunner({
      db: pg.db,
      intervalMs: 60_000,
      listenUrl: pg.url,
      handlers: { 'test.notified': { run: async () => ran() } },
    })
    await new Promise((resolve) => setTimeout(resolve, 200)) // the LISTEN connection is up
    const started = Date.now()
    await pg.db.transaction().execute((trx) => enqueueJob(trx, { kind: 'test.notified', paymentId: id }))
    await done
    expect(Date.now() - started).toBeLessThan(2_000)
    await runner.stop()
  })

  it('two runners never run one job twice', async () => {
    const ids: string[] = []
    for (let i = 0; i < 12; i++) {
      const id = await payment()
      ids.push(id)
      await enqueueJob(pg.db, { kind: 'test.count', paymentId: id })
    }
    const runs = new Map<string, number>()
    const handlers = {
      'test.count': {
        run: async (j: { payment_id: string }) => {
          runs.set(j.payment_id, (runs.get(j.payment_id) ?? 0) + 1)
          await new Promise((resolve) => setTimeout(resolve, 5))
        },
      },
    }
    const a = startJobRunner({ db: pg.db, intervalMs: 5, handlers })
    const b = startJobRunner({ db: pg.db, intervalMs: 5, handlers })
    const deadline = Date.now() + 10_000
    while (ids.some((id) => !runs.has(id)) && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 10))
    await Promise.all([a.stop(), b.stop()])
    expect(ids.map((id) => runs.get(id))).toEqual(ids.map(() => 1))
  })
})
