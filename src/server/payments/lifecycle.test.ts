import { sql } from 'kysely'
import pgDriver from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { statementsOf } from '../../../test/gateway/support.js'
import { createTestDatabase, type TestDatabase } from '../../../test/postgres.js'
import { insertMerchant, insertPayment } from '../../../test/rows.js'
import { type PaymentStatus, paymentStatuses } from '../../contract/common.js'
import { isPayError } from '../../errors/PayError.js'
import { jobsChannel } from '../jobs/notify.js'
import { FinalStatuses } from './finalStatuses.js'
import { createPaymentFinisher } from './finisher.js'
import {
  canTransition,
  changePaymentInSteps,
  confirmWithJob,
  expireDuePayments,
  type PaymentStep,
  paymentTransitions,
  settlePayment,
  succeedPayment,
  succeedPayments,
  transitionPayment,
  withExpiryApplied,
} from './lifecycle.js'
import { findPaymentStatus } from './views.js'

let pg: TestDatabase
let owner: { partnerId: string; merchantId: string }
const now = new Date('2026-03-01T00:00:00Z')

beforeAll(async () => {
  pg = await createTestDatabase()
  owner = await insertMerchant(pg.db, now)
})
afterAll(() => pg.drop())

const payment = (status: PaymentStatus, expiresAt = new Date(now.getTime() + 60_000)) =>
  insertPayment(pg.db, owner, now, { status, expires_at: expiresAt })

const legal: [PaymentStatus, PaymentStatus][] = [
  ['requires_action', 'processing'],
  ['requires_action', 'cancelled'],
  ['requires_action', 'expired'],
  ['processing', 'succeeded'],
  ['processing', 'failed'],
]

describe('the transition table', () => {
  it('holds exactly the legal moves', () => {
    for (const from of paymentStatuses) {
      for (const to of paymentStatuses) {
        expect(canTransition(from, to), `${from} -> ${to}`).toBe(
          legal.some(([a, b]) => a === from && b === to),
        )
      }
    }
  })
  it('final states have no way out', () => {
    for (const s of ['succeeded', 'failed', 'cancelled', 'expired'] as const)
      expect(paymentTransitions[s]).toEqual([])
  })
})

describe('transitionPayment', () => {
  it('makes every legal move and writes the extra columns', async () => {
    for (const [from, to] of legal) {
      const id = await payment(from)
      const row = await transitionPayment(pg.db, { paymentId: id, from, to, set: { tx_id: 'tx' }, now })
      expect(row.status).toBe(to)
      expect(row.tx_id).toBe('tx')
    }
  })

  it('throws 409 invalid_state when the payment is elsewhere', async () => {
    const id = await payment('succeeded')
    const error = await transitionPayment(pg.db, { paymentId: id, from: 'processing', to: 'failed' }).catch(
      (e) => e,
    )
    expect(isPayError(error, 'invalid_state')).toBe(true)
    expect(error.status).toBe(409)
    expect(error.context).toMatchObject({ status: 'succeeded', to: 'failed' })
  })

  it('throws 404 payment_not_found for an unknown id', async () => {
    const error = await transitionPayment(pg.db, {
      paymentId: 'pay_none',
      from: 'processing',
      to: 'failed',
    }).catch((e) => e)
    expect(isPayError(error, 'payment_not_found')).toBe(true)
  })

  it('refuses an illegal move in code before touching the database', async () => {
    const id = await payment('succeeded')
    await expect(
      transitionPayment(pg.db, { paymentId: id, from: 'succeeded', to: 'processing' }),
    ).rejects.toThrow(/Illegal/)
  })

  it('lets exactly one of many racing callers win', async () => {
    const id = await payment('requires_action')
    const results = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) =>
        transitionPayment(pg.db, {
          paymentId: id,
          from: 'requires_action',
          to: i % 2 ? 'processing' : 'cancelled',
        }),
      ),
    )
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(1)
  })

  it('notExpiredAt refuses an expired payment', async () => {
    const id = await payment('requires_action', new Date(now.getTime() - 1))
    await expect(
      transitionPayment(pg.db, {
        paymentId: id,
        from: 'requires_action',
        to: 'processing',
        notExpiredAt: now,
      }),
    ).rejects.toMatchObject({ code: 'invalid_state' })
  })
})

describe('expiry', () => {
  it('expires due payments only', async () => {
    const due = await payment('requires_action', new Date(now.getTime() - 1000))
    const later = await payment('requires_action', new Date(now.getTime() + 1000))
    const processing = await payment('processing', new Date(now.getTime() - 1000))
    const expired = await expireDuePayments(pg.db, { now, partnerId: owner.partnerId })
    expect(expired).toContain(due)
    expect(expired).not.toContain(later)
    expect(expired).not.toContain(processing)
  })

  it('withExpiryApplied shows the truth on read', async () => {
    const id = await payment('requires_action', new Date(now.getTime() - 1000))
    const row = await pg.db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
    expect((await withExpiryApplied(pg.db, row, now)).status).toBe('expired')
  })
})

describe('changePaymentInSteps', () => {
  const confirmed = {
    selected_option_id: 'opt_1',
    buyer: 'eip155:1:0xabc',
    option_amount: '{"unit":"x","value":"5"}',
  }
  const steps = (settled: boolean): PaymentStep[] => [
    { type: 'payment.processing', set: { processing_at: now, ...confirmed, status: 'processing' } },
    {
      type: 'payment.succeeded',
      set: {
        status: 'succeeded',
        succeeded_at: now,
        tx_id: 'tx',
        ...(settled ? { settlement_status: 'pending' as const } : {}),
      },
    },
    ...(settled
      ? [
          {
            type: 'payment.settled' as const,
            set: {
              settlement_status: 'succeeded' as const,
              settlement_tx_id: 'tx-settlement',
              settlement_unit: 'caip19/eip155:1/erc20:0xabc',
              settlement_value: '123456789012345678901234567890',
              settled_at: now,
            },
          },
        ]
      : []),
  ]

  async function eventsOf(paymentId: string) {
    const rows = await pg.db
      .selectFrom('payment_events')
      .select(['type', 'payment_state_version', 'snapshot', 'created_at'])
      .where('payment_id', '=', paymentId)
      .orderBy('payment_state_version')
      .execute()
    return rows.map((r) => ({ ...r, snapshot: { ...(r.snapshot as object), id: 'the payment' } }))
  }

  it('writes the row and every step’s event exactly as the changes made one after another do', async () => {
    for (const settled of [false, true]) {
      const expiresAt = new Date(now.getTime() + 60_000)
      const oneByOne = await payment('requires_action', expiresAt)
      const atOnce = await payment('requires_action', expiresAt)
      await transitionPayment(pg.db, {
        paymentId: oneByOne,
        from: 'requires_action',
        to: 'processing',
        set: confirmed,
        notExpiredAt: now,
        now,
      })
      await succeedPayment(pg.db, {
        paymentId: oneByOne,
        txId: 'tx',
        now,
        settlement: settled ? {} : undefined,
      })
      if (settled) {
        await settlePayment(pg.db, {
          paymentId: oneByOne,
          txId: 'tx-settlement',
          assetId: 'eip155:1/erc20:0xabc',
          value: '123456789012345678901234567890',
          now,
        })
      }
      const row = await changePaymentInSteps(pg.db, {
        paymentId: atOnce,
        from: 'requires_action',
        notExpiredAt: now,
        steps: steps(settled),
        now,
      })
      expect(row.status).toBe('succeeded')
      expect(row.payment_state_version).toBe(settled ? 3 : 2)
      const [a, b] = await Promise.all([eventsOf(oneByOne), eventsOf(atOnce)])
      expect(b.map((e) => e.type)).toEqual([
        'payment.processing',
        'payment.succeeded',
        ...(settled ? ['payment.settled'] : []),
      ])
      expect(b).toEqual(a)
      const final = (id: string) =>
        pg.db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
      expect({ ...(await final(atOnce)), id: '' }).toEqual({ ...(await final(oneByOne)), id: '' })
    }
  })

  it('moves nothing and refuses like transitionPayment when the payment is not in the state, or expired', async () => {
    const processing = await payment('processing')
    const refused = changePaymentInSteps(pg.db, {
      paymentId: processing,
      from: 'requires_action',
      steps: steps(false),
      now,
    })
    await expect(refused).rejects.toMatchObject({ code: 'invalid_state' })
    await expect(refused).rejects.toThrow('The payment is processing; it cannot become processing.')
    const expired = await payment('requires_action', now)
    await expect(
      changePaymentInSteps(pg.db, {
        paymentId: expired,
        from: 'requires_action',
        notExpiredAt: now,
        steps: steps(false),
        now,
      }),
    ).rejects.toMatchObject({ code: 'invalid_state' })
    await expect(
      changePaymentInSteps(pg.db, {
        paymentId: 'pay_missing',
        from: 'requires_action',
        steps: steps(false),
        now,
      }),
    ).rejects.toMatchObject({ code: 'payment_not_found' })
    for (const id of [processing, expired]) {
      expect(
        await pg.db.selectFrom('payment_events').select('id').where('payment_id', '=', id).execute(),
      ).toEqual([])
    }
  })

  it('refuses an illegal chain of steps in code', async () => {
    const id = await payment('requires_action')
    await expect(
      changePaymentInSteps(pg.db, {
        paymentId: id,
        from: 'requires_action',
        steps: [{ type: 'payment.succeeded', set: { status: 'succeeded' } }],
        now,
      }),
    ).rejects.toThrow(/Illegal payment transition/)
  })
})

describe('succeedPayments (a block of payments at once)', () => {
  it('equals succeedPayment one by one: each its own transaction, settlement and event; one no longer processing is left as it is', async () => {
    const settlement = {
      chain: 'eip155:1',
      asset: 'eip155:1/erc20:0xabc',
      destination: '0x00000000000000000000000000000000000000d1',
      amount: 5n,
      intervalMs: 60_000,
      jobKind: 'test.settle_batch',
    }
    const oneByOne = [await payment('processing'), await payment('processing')]
    const atOnce = [await payment('processing'), await payment('processing')]
    const done = await payment('failed')
    await succeedPayment(pg.db, {
      paymentId: oneByOne[0]!,
      txId: 'tx-a',
      now,
      settlement: { batched: settlement },
    })
    await succeedPayment(pg.db, { paymentId: oneByOne[1]!, txId: 'tx-b', now })
    const rows = await succeedPayments(
      pg.db,
      [
        { paymentId: atOnce[0]!, txId: 'tx-a', settlement },
        { paymentId: atOnce[1]!, txId: 'tx-b' },
        { paymentId: done, txId: 'tx-c' },
      ],
      now,
    )
    expect(rows.map((r) => r.id).sort()).toEqual([...atOnce].sort())
    const read = (id: string) =>
      pg.db.selectFrom('payments').selectAll().where('id', '=', id).executeTakeFirstOrThrow()
    const snapshots = async (id: string) =>
      (
        await pg.db
          .selectFrom('payment_events')
          .select(['type', 'payment_state_version', 'snapshot'])
          .where('payment_id', '=', id)
          .execute()
      ).map((e) => ({ ...e, snapshot: { ...(e.snapshot as object), id: '' } }))
    for (const i of [0, 1]) {
      expect({ ...(await read(atOnce[i]!)), id: '' }).toEqual({ ...(await read(oneByOne[i]!)), id: '' })
      expect(await snapshots(atOnce[i]!)).toEqual(await snapshots(oneByOne[i]!))
    }
    expect((await read(done)).status).toBe('failed')
    // Both settled payments in the one open batch of their destination, its job queued once.
    const items = await pg.db
      .selectFrom('settlement_items')
      .select('batch_id')
      .where('payment_id', 'in', [oneByOne[0]!, atOnce[0]!])
      .execute()
    expect(items).toHaveLength(2)
    expect(new Set(items.map((i) => i.batch_id)).size).toBe(1)
    const jobs = await pg.db
      .selectFrom('jobs')
      .select('payment_id')
      .where('kind', '=', 'test.settle_batch')
      .execute()
    expect(jobs.map((j) => j.payment_id)).toEqual([oneByOne[0]])
  })
})

describe('writes along a state change (a live confirm in one statement)', () => {
  const along = (tag: string) => ({
    job: { kind: `along-${tag}`, payload: { tag }, now },
    inserts: [
      (changed: string) =>
        sql`INSERT INTO jobs (kind, payment_id, run_at, payload, created_at, updated_at)
          SELECT ${`record-${tag}`}, ${sql.table(changed)}.id, ${now}, '{}', ${now}, ${now} FROM ${sql.table(changed)}`,
    ],
  })
  const jobsOf = async (paymentId: string) =>
    (
      await pg.db
        .selectFrom('jobs')
        .select('kind')
        .where('payment_id', '=', paymentId)
        .orderBy('kind')
        .execute()
    ).map((j) => j.kind)

  it('makes the move, its event, the job, the inserts and the wake-up in one statement', async () => {
    const id = await payment('requires_action')
    const listener = new pgDriver.Client({ connectionString: pg.url })
    await listener.connect()
    const heard: string[] = []
    listener.on('notification', (n) => heard.push(`${n.channel}:${n.payload}`))
    await listener.query(`LISTEN ${jobsChannel}`)
    try {
      const { result: row, statements } = await statementsOf(() =>
        transitionPayment(pg.db, {
          paymentId: id,
          from: 'requires_action',
          to: 'processing',
          notExpiredAt: now,
          now,
          along: along('a'),
        }),
      )
      expect(statements).toHaveLength(1)
      expect(row.status).toBe('processing')
      expect(row).not.toHaveProperty('woke')
      expect(await jobsOf(id)).toEqual(['along-a', 'record-a'])
      const events = await pg.db
        .selectFrom('payment_events')
        .select('type')
        .where('payment_id', '=', id)
        .execute()
      expect(events.map((e) => e.type)).toEqual(['payment.processing'])
      await expect.poll(() => heard).toEqual([`${jobsChannel}:along-a`])
    } finally {
      await listener.end()
    }
  })

  it('writes nothing along a move that is refused, and wakes nobody', async () => {
    const id = await payment('cancelled')
    const expired = await payment('requires_action', new Date(now.getTime() - 1))
    const listener = new pgDriver.Client({ connectionString: pg.url })
    await listener.connect()
    const heard: string[] = []
    listener.on('notification', (n) => heard.push(n.payload ?? ''))
    await listener.query(`LISTEN ${jobsChannel}`)
    try {
      for (const paymentId of [id, expired]) {
        const move = transitionPayment(pg.db, {
          paymentId,
          from: 'requires_action',
          to: 'processing',
          notExpiredAt: now,
          now,
          along: along('refused'),
        })
        await expect(move).rejects.toMatchObject({ code: 'invalid_state' })
        expect(await jobsOf(paymentId)).toEqual([])
      }
      await new Promise((resolve) => setTimeout(resolve, 100))
      expect(heard).toEqual([])
    } finally {
      await listener.end()
    }
  })

  it('a guard that raises rolls the move and everything along back; nothing changed, it is not evaluated', async () => {
    const id = await payment('requires_action')
    // A guard as the Solana confirm's fee reservation: a volatile expression that raises to refuse (a
    // constant one would be folded, and raise, at plan time, whatever matched).
    const raising = sql`1 / (random() * 0)::int`
    const move = transitionPayment(pg.db, {
      paymentId: id,
      from: 'requires_action',
      to: 'processing',
      notExpiredAt: now,
      now,
      along: { ...along('guarded'), guard: raising },
    })
    await expect(move).rejects.toMatchObject({ code: '22012' })
    expect(await jobsOf(id)).toEqual([])
    const row = await pg.db
      .selectFrom('payments')
      .select('status')
      .where('id', '=', id)
      .executeTakeFirstOrThrow()
    expect(row.status).toBe('requires_action')
    const gone = await payment('cancelled')
    const refused = transitionPayment(pg.db, {
      paymentId: gone,
      from: 'requires_action',
      to: 'processing',
      notExpiredAt: now,
      now,
      along: { ...along('guarded'), guard: raising },
    })
    await expect(refused).rejects.toMatchObject({ code: 'invalid_state' })
    const moved = await transitionPayment(pg.db, {
      paymentId: id,
      from: 'requires_action',
      to: 'processing',
      notExpiredAt: now,
      now,
      along: { ...along('passed'), guard: sql`true` },
    })
    expect(moved).not.toHaveProperty('guarded')
    expect(await jobsOf(id)).toEqual(['along-passed', 'record-passed'])
  })
})

describe('confirmWithJob (a live confirm with a job alone along, named)', () => {
  const confirmed = {
    selected_option_id: 'opt_confirmed',
    buyer: 'eip155:8453:0x00000000000000000000000000000000000000b1',
    option_amount: JSON.stringify({ unit: 'iso4217/USD', value: '250' }),
  }
  /** What a move left: the row, its events, its jobs, with the payment's own id taken out. */
  const written = async (paymentId: string) => {
    const row = await pg.db
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    const events = await pg.db
      .selectFrom('payment_events')
      .select(['type', 'payment_state_version', 'snapshot', 'created_at', 'dispatched_at'])
      .where('payment_id', '=', paymentId)
      .orderBy('id')
      .execute()
    const jobs = await pg.db
      .selectFrom('jobs')
      .select([
        'kind',
        'run_at',
        'locked_until',
        'payload',
        'state',
        'attempts',
        'trace_parent',
        'created_at',
      ])
      .where('payment_id', '=', paymentId)
      .execute()
    const strip = <T extends object>(value: T) =>
      JSON.parse(
        JSON.stringify(value)
          .replaceAll(paymentId, 'pay_x')
          .replace(/"reference_id":"[^"]*"/g, '"reference_id":"r"'),
      )
    return strip({ row, events, jobs })
  }

  it('writes what transitionPayment with the job along writes, in one named statement, and wakes the runners', async () => {
    const plain = await payment('requires_action')
    const named = await payment('requires_action')
    const job = { kind: 'along-named', payload: { tag: 'named' }, now }
    const viaKysely = await transitionPayment(pg.db, {
      paymentId: plain,
      from: 'requires_action',
      to: 'processing',
      set: confirmed,
      notExpiredAt: now,
      now,
      along: { job },
    })
    const listener = new pgDriver.Client({ connectionString: pg.url })
    await listener.connect()
    const heard: string[] = []
    listener.on('notification', (n) => heard.push(`${n.channel}:${n.payload}`))
    await listener.query(`LISTEN ${jobsChannel}`)
    try {
      const { result: row, statements } = await statementsOf(() =>
        confirmWithJob(pg.db, { paymentId: named, confirmed, job, now }),
      )
      expect(statements).toEqual(['named'])
      expect(row).not.toHaveProperty('woke')
      expect({ ...row, id: plain, reference_id: viaKysely.reference_id }).toEqual(viaKysely)
      expect(await written(named)).toEqual(await written(plain))
      await expect.poll(() => heard).toEqual([`${jobsChannel}:along-named`])
    } finally {
      await listener.end()
    }
  })

  it('refuses like transitionPayment, writing nothing: 409 elsewhere or expired, 404 unknown', async () => {
    const job = { kind: 'along-refused', payload: {}, now }
    const cancelled = await payment('cancelled')
    const expired = await payment('requires_action', new Date(now.getTime() - 1))
    for (const paymentId of [cancelled, expired]) {
      await expect(confirmWithJob(pg.db, { paymentId, confirmed, job, now })).rejects.toMatchObject({
        code: 'invalid_state',
      })
      const jobs = await pg.db.selectFrom('jobs').select('kind').where('payment_id', '=', paymentId).execute()
      expect(jobs).toEqual([])
    }
    expect(
      (
        await pg.db
          .selectFrom('payments')
          .select('status')
          .where('id', '=', expired)
          .executeTakeFirstOrThrow()
      ).status,
    ).toBe('requires_action')
    await expect(
      confirmWithJob(pg.db, { paymentId: 'pay_unknown', confirmed, job, now }),
    ).rejects.toMatchObject({ code: 'payment_not_found' })
  })
})

describe('the finisher keeps what it wrote (FastPath finalStatuses)', () => {
  it('answers the status of the payments it succeeded once committed, with their tx ids; a limit of 0 keeps nothing', async () => {
    const kept = new FinalStatuses(10)
    const off = new FinalStatuses(0)
    const [a, b] = [await payment('processing'), await payment('processing')]
    const gone = await payment('failed')
    const finisher = createPaymentFinisher(pg.db, async () => {}, kept)
    const plain = createPaymentFinisher(pg.db, async () => {}, off)
    const rows = await Promise.all([
      finisher.succeed({ paymentId: a, txId: 'tx-kept-a' }),
      finisher.succeed({ paymentId: gone, txId: 'tx-gone' }),
      plain.succeed({ paymentId: b, txId: 'tx-plain-b' }),
    ])
    expect(rows.map((r) => r?.status)).toEqual(['succeeded', undefined, 'succeeded'])
    expect(kept.get(a)).toEqual({
      merchantId: owner.merchantId,
      mode: 'test',
      answer: { status: 'succeeded', isFinal: true, pollInMs: null, txId: 'tx-kept-a' },
    })
    // The answer kept is the one a status read makes of the row.
    const read = await findPaymentStatus(pg.db, a, { merchantId: owner.merchantId }, now)
    expect(kept.get(a)?.answer).toEqual(read)
    expect(kept.get(gone)).toBeUndefined()
    expect(off.get(b)).toBeUndefined()
  })
})
