import pg from 'pg'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { JobRunner } from '../../src/server/jobs/runner.js'
import { type Buyer, createEvmEnv, type EvmEnv, isKind } from './support.js'

/**
 * A live gasless confirm writes the payment's move to processing, its event, the relay job and the
 * runners' wake-up. With fast paths on (fastPath.ts) that is one statement (gateway/confirm.ts,
 * ChainDriver.planConfirm); off, a transaction of several. Both must leave the same rows and pay once.
 * In the fast-path suites (vitest.config.ts), so CI runs it both ways.
 */
let env: EvmEnv
let buyer: Buyer
let runner: JobRunner
beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(2)
  runner = env.startRunner()
})
afterAll(() => env?.close())

/** Every query any pooled client sends while `run` runs, with its parameters (the runner's jobs too). */
async function queriesDuring<T>(
  run: () => Promise<T>,
): Promise<{ result: T; queries: { text: string; values: unknown[]; named: boolean }[] }> {
  const queries: { text: string; values: unknown[]; named: boolean }[] = []
  const original = pg.Client.prototype.query
  pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
    const first = args[0] as string | { name?: string; text?: string; values?: unknown[] }
    const text = typeof first === 'string' ? first : String(first.text)
    const values = (typeof first === 'string' ? args[1] : first.values) as unknown[] | undefined
    queries.push({ text, values: values ?? [], named: typeof first !== 'string' && first.name !== undefined })
    return (original as (...a: unknown[]) => unknown).apply(this, args)
  } as typeof original
  try {
    return { result: await run(), queries }
  } finally {
    pg.Client.prototype.query = original
  }
}

describe('live gasless confirm', () => {
  it('is one statement with fast paths on, a transaction off; the relay pays exactly once either way', async () => {
    const { paymentId } = await env.pay('250')
    const options = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
    const option = options.json.options.find(isKind('eip3009'))
    const results = [await buyer.sign(option.actions[0])]
    // Every query from the confirm to the payment final: the runner's relay job starts at the confirm's commit.
    let final: { status?: string } = {}
    const { result: confirmed, queries } = await queriesDuring(async () => {
      const confirming = await queriesDuring(() =>
        env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }),
      )
      final = await env.waitFinal(paymentId)
      return confirming
    })
    const { result: confirm, queries: statements } = confirmed
    expect(confirm.statusCode, confirm.body).toBe(200)
    expect(confirm.json).toEqual({ status: 'processing', isFinal: false, pollInMs: expect.any(Number) })
    const texts = statements.map((s) => s.text.toLowerCase())
    const moves = statements.filter((s) => /update "?payments"?/i.test(s.text))
    expect(moves).toHaveLength(1)
    const move = moves[0]!.text.toLowerCase()
    const transaction = texts.filter((s) => /^\s*(begin|commit)\b/.test(s))
    if (env.t.app.fastPath.enabled) {
      // The move carries the job and the wake-up; nothing else is written, and no transaction is opened.
      // It is a named statement, the same text every time (lifecycle.ts confirmWithJob).
      expect(move).toContain('insert into jobs')
      expect(move).toContain('pg_notify')
      expect(moves[0]!.named).toBe(true)
      expect(transaction).toEqual([])
      // The relay guard (cool-downs, budgets) rides in the move (migration 037), not a read of its own.
      expect(move).toContain('caipay_relay_guard_or_raise')
      expect(texts.filter((s) => s.includes('from payer_cooldowns'))).toEqual([])
    } else {
      expect(move).not.toContain('insert into jobs')
      expect(moves[0]!.named).toBe(false)
      expect(move).not.toContain('caipay_relay_guard_or_raise')
      expect(texts.filter((s) => s.includes('from payer_cooldowns'))).toHaveLength(1)
      expect(transaction).toEqual(['begin', 'commit'])
    }
    const jobs = await env.t.db
      .selectFrom('jobs')
      .select(['kind', 'payload'])
      .where('payment_id', '=', paymentId)
      .where('kind', 'like', 'evm.relay%')
      .execute()
    expect(jobs.map((j) => j.kind)).toEqual(['evm.relay'])
    expect(jobs[0]!.payload).toMatchObject({
      chain: env.anvil.caip2,
      asset: env.asset,
      signature: results[0],
    })

    expect(final.status).toBe('succeeded')
    // The relay job's first claim, first send: no record of its step can exist yet, so with fast paths on
    // it does not look for one (transactions.ts noPriorRecord); off, it does, once.
    const priorRecordReads = queries.filter(
      (q) =>
        /select \* from "evm_transactions" .*order by "id" desc/i.test(q.text) &&
        q.values.includes(paymentId) &&
        q.values.includes('relay'),
    )
    expect(priorRecordReads).toHaveLength(env.t.app.fastPath.enabled ? 0 : 1)
    // The relay reserved its worst-case fee (relayGuards.ts); once the payer's money moved the reservation
    // is given back: with fast paths on by the finisher's transaction that succeeds the payment (one
    // statement for the block's payments), off by a statement of its own before it.
    // With fast paths on, the relay's reservation is the sender's, in the transaction that records the relay
    // (one call per group: sender.ts); off, a call of its own before it.
    const reservationCalls = queries.filter((q) => q.text.includes('caipay_reserve_executor_fee'))
    expect(reservationCalls.map((q) => /caipay_reserve_executor_fees\(/.test(q.text))).toEqual([
      env.t.app.fastPath.enabled,
    ])
    const releases = queries.filter(
      (q) => /delete from "executor_gas_charges"/i.test(q.text) && q.values.includes(paymentId),
    )
    expect(releases).toHaveLength(1)
    expect(releases[0]!.text).toMatch(
      env.t.app.fastPath.enabled ? /"payment_id" in \(/ : /"payment_id" = \$1/,
    )
    const reserved = await env.t.db
      .selectFrom('executor_gas_charges')
      .select('state')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(reserved).toEqual([])
    // A second confirm loses the move: 409, and no second job or event.
    const again = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect([again.statusCode, again.json.code]).toEqual([409, 'invalid_state'])
    const events = await env.t.db
      .selectFrom('payment_events')
      .select('type')
      .where('payment_id', '=', paymentId)
      .orderBy('payment_state_version')
      .execute()
    expect(events.map((e) => e.type).slice(0, 3)).toEqual([
      'payment.created',
      'payment.processing',
      'payment.succeeded',
    ])
    const relays = await env.t.db
      .selectFrom('evm_transactions')
      .select('purpose')
      .where('payment_id', '=', paymentId)
      .where('purpose', '=', 'relay')
      .execute()
    expect(relays).toHaveLength(1)
  })

  it('a relay the reservation refuses (its payer cooled down after the confirm) fails payer_cooling_down with nothing signed or reserved, either way', async () => {
    const cooled = await env.buyer(2)
    const { paymentId } = await env.pay('100')
    const options = await env.gw('POST', paymentId, '/options', { accounts: [cooled.account] })
    const option = options.json.options.find(isKind('eip3009'))
    const results = [await cooled.sign(option.actions[0])]
    // The relay job waits while the payer is cooled down behind the confirm's back.
    await runner.stop()
    const confirm = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect(confirm.statusCode, confirm.body).toBe(200)
    const now = new Date()
    await env.t.db
      .insertInto('payer_cooldowns')
      .values({
        chain_id: env.anvil.caip2,
        subject: cooled.address.toLowerCase(),
        kind: 'address',
        until: new Date(now.getTime() + 3_600_000),
        reason: 'a test cooled it down',
        payment_id: paymentId,
        created_at: now,
      })
      .execute()
    const { result: final, queries } = await queriesDuring(() => {
      runner = env.startRunner()
      return env.waitFinal(paymentId)
    })
    expect(final).toMatchObject({ status: 'failed', isFinal: true })
    const row = await env.t.db
      .selectFrom('payments')
      .select(['failure_code', 'tx_id'])
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect([row.failure_code, row.tx_id]).toEqual(['payer_cooling_down', null])
    const refusals = queries.filter((q) => q.text.includes('caipay_reserve_executor_fee'))
    expect(refusals.map((q) => /caipay_reserve_executor_fees\(/.test(q.text))).toEqual([
      env.t.app.fastPath.enabled,
    ])
    const sent = await env.t.db
      .selectFrom('evm_transactions')
      .select('id')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(sent).toEqual([])
    const reserved = await env.t.db
      .selectFrom('executor_gas_charges')
      .select('state')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(reserved).toEqual([])
  })

  it('a payer cooled down before the confirm: 429 rate_limited with the same words either way, the payment not moved, no job; confirmable once the cool-down is gone', async () => {
    // Another key than the other tests' (a cool-down is per payer and stays).
    const cooled = await env.buyer(3)
    const { paymentId } = await env.pay('100')
    const options = await env.gw('POST', paymentId, '/options', { accounts: [cooled.account] })
    const option = options.json.options.find(isKind('eip3009'))
    const results = [await cooled.sign(option.actions[0])]
    const until = new Date('2099-01-01T00:00:00Z')
    const now = new Date()
    await env.t.db
      .insertInto('payer_cooldowns')
      .values({
        chain_id: env.anvil.caip2,
        subject: cooled.address.toLowerCase(),
        kind: 'address',
        until,
        reason: 'a test cooled it down',
        payment_id: paymentId,
        created_at: now,
      })
      .execute()
    const refused = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect([refused.statusCode, refused.json]).toEqual([
      429,
      {
        code: 'rate_limited',
        message: `The payer ${cooled.address.toLowerCase()} is refused until ${until.toISOString()}: a test cooled it down`,
      },
    ])
    const moved = await env.t.db
      .selectFrom('payments')
      .select('status')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(moved.status).toBe('requires_action')
    const jobs = await env.t.db
      .selectFrom('jobs')
      .select('kind')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(jobs.map((j) => j.kind).filter((k) => k.startsWith('evm.'))).toEqual([])
    const events = await env.t.db
      .selectFrom('payment_events')
      .select('type')
      .where('payment_id', '=', paymentId)
      .execute()
    expect(events.map((e) => e.type)).toEqual(['payment.created'])
    await env.t.db.deleteFrom('payer_cooldowns').where('payment_id', '=', paymentId).execute()
    const confirmed = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results })
    expect(confirmed.statusCode, confirmed.body).toBe(200)
    expect(await env.waitFinal(paymentId)).toMatchObject({ status: 'succeeded' })
  })
})
