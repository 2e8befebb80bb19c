import { type Address, type Hash, parseAbiItem } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmJobKinds } from '../../src/server/chains/evm/index.js'
import { enqueueJob } from '../../src/server/jobs/queue.js'
import { mintTestToken } from '../anvil.js'
import { headers } from '../server/helpers.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv, fastRuntime, usdc } from './support.js'

/**
 * Batched settlements on Anvil: the payments that succeed within an interval are settled to the
 * merchant's destination by ONE transfer of their sum (less what refunds took before the batch closed),
 * and each payment's settlement names that transaction. The interval is an hour here, so the test
 * decides when a batch is due (its job's run_at).
 */
let env: EvmEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createEvmEnv({ config: { settlement: { intervalMs: 3_600_000 } } })
  buyer = await env.buyer(2, usdc(1000))
})
afterAll(() => env?.close())

const handlers = () => fastRuntime(env).jobHandlers
const only = (...kinds: string[]) => Object.fromEntries(kinds.map((kind) => [kind, handlers()[kind]!]))

async function settlementsTo(to: Address) {
  const logs = await env.publicClient.getLogs({
    address: env.token,
    event: parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
    args: { from: env.collection, to },
    fromBlock: 0n,
    toBlock: 'latest',
  })
  return logs.map((l) => ({ hash: l.transactionHash as Hash, value: l.args.value! }))
}

/** Gasless payments of `cents` each, relayed (succeeded), their settlements waiting in the open batch. */
async function paid(...cents: string[]): Promise<string[]> {
  const ids: string[] = []
  for (const c of cents) ids.push((await confirmGasless(env, buyer, c)).paymentId)
  const relay = env.startRunner(only(evmJobKinds.relay))
  for (const id of ids) await env.waitJob(id, evmJobKinds.relay)
  await relay.stop()
  return ids
}

async function refund(paymentId: string, cents?: string) {
  const res = await env.t.request({
    method: 'POST',
    url: '/v1/refunds',
    headers: headers(env.liveKey, env.merchant.id),
    payload: { paymentId, ...(cents ? { amount: { unit: 'iso4217/USD', value: cents } } : {}) },
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json as { refundId: string }
}

function rows(ids: readonly string[]) {
  return env.t.db
    .selectFrom('payments')
    .select(['id', 'status', 'settlement_status', 'settlement_tx_id', 'settlement_value'])
    .where('id', 'in', ids)
    .orderBy('id')
    .execute()
}

async function batchesOf(ids: readonly string[]) {
  return env.t.db
    .selectFrom('settlement_items')
    .innerJoin('settlement_batches', 'settlement_batches.id', 'settlement_items.batch_id')
    .select([
      'settlement_items.payment_id',
      'settlement_batches.id',
      'settlement_batches.payment_id as first',
    ])
    .where('settlement_items.payment_id', 'in', ids)
    .execute()
}

/** The batch's interval is over now: its job becomes due. */
async function due(firstPaymentId: string) {
  await env.t.db
    .updateTable('jobs')
    .set({ run_at: new Date(0) })
    .where('payment_id', '=', firstPaymentId)
    .where('kind', '=', evmJobKinds.settle)
    .execute()
}

describe('batched EVM settlements', () => {
  it('four payments, one partly and one wholly refunded before the close: one transfer of what remains, named by every payment it settles', async () => {
    const ids = await paid('1000', '1000', '1000', '1000')
    const [a, b, c, d] = ids as [string, string, string, string]
    const batches = await batchesOf(ids)
    expect(new Set(batches.map((x) => x.id)).size).toBe(1)
    // Its first payment: whichever relay finished first.
    const first = batches[0]!.first
    expect(ids).toContain(first)
    expect((await rows(ids)).map((r) => r.settlement_status)).toEqual([
      'pending',
      'pending',
      'pending',
      'pending',
    ])
    // One settlement job for the batch, under its first payment.
    const jobs = await env.t.db
      .selectFrom('jobs')
      .select('payment_id')
      .where('kind', '=', evmJobKinds.settle)
      .where('payment_id', 'in', ids)
      .execute()
    expect(jobs.map((j) => j.payment_id)).toEqual([first])

    const destinationBefore = await env.balance(env.merchant.destination)
    const transfersBefore = await settlementsTo(env.merchant.destination)
    const runner = env.startRunner(handlers())
    const partial = await refund(b, '400')
    const whole = await refund(c)
    for (const id of [partial.refundId, whole.refundId]) {
      const refunded = await env.t.db
        .selectFrom('refunds')
        .select('paid_from')
        .where('id', '=', id)
        .executeTakeFirstOrThrow()
      expect(refunded.paid_from).toBe('collected')
    }
    await due(first)
    await env.waitSettled(a)
    await runner.stop()

    const settled = await rows(ids)
    const byId = new Map(settled.map((r) => [r.id, r]))
    const transfers = (await settlementsTo(env.merchant.destination)).filter(
      (t) => !transfersBefore.some((x) => x.hash === t.hash),
    )
    // 10 + 6 + 0 + 10 USDC: one Transfer, in the batch's one transaction.
    expect(transfers).toEqual([{ hash: byId.get(a)!.settlement_tx_id, value: usdc(26) }])
    expect((await env.balance(env.merchant.destination)) - destinationBefore).toBe(usdc(26))
    for (const id of [a, b, d]) expect(byId.get(id)!.settlement_tx_id).toBe(transfers[0]!.hash)
    expect([a, b, c, d].map((id) => byId.get(id)!.settlement_value)).toEqual([
      String(usdc(10)),
      String(usdc(6)),
      '0',
      String(usdc(10)),
    ])
    // Refunds took all of c's: settled with nothing sent.
    expect([byId.get(c)!.settlement_status, byId.get(c)!.settlement_tx_id]).toEqual(['succeeded', null])
    const batch = await env.t.db
      .selectFrom('settlement_batches')
      .selectAll()
      .where('payment_id', '=', first)
      .executeTakeFirstOrThrow()
    expect([batch.status, batch.amount, batch.tx_id]).toEqual([
      'succeeded',
      String(usdc(26)),
      transfers[0]!.hash,
    ])
    const settleTxs = await env.t.db
      .selectFrom('evm_transactions')
      .select(['payment_id', 'status'])
      .where('purpose', '=', 'settle')
      .where('payment_id', 'in', ids)
      .execute()
    expect(settleTxs).toEqual([{ payment_id: first, status: 'succeeded' }])

    // A refund after the close comes from the float: the merchant keeps what the batch paid.
    const late = await refund(d, '100')
    const lateRow = await env.t.db
      .selectFrom('refunds')
      .select('paid_from')
      .where('id', '=', late.refundId)
      .executeTakeFirstOrThrow()
    expect(lateRow.paid_from).toBe('float')
    // The operator funds the float, so that refund never takes the next tests' collected funds.
    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(1))
  })

  it('a payment that succeeds after its destination’s batch closed opens the next batch, with its own transfer', async () => {
    const [first] = await paid('500')
    const runner = env.startRunner(handlers())
    await due(first!)
    await env.waitSettled(first!)
    await runner.stop()
    const [next] = await paid('700')
    const batches = await batchesOf([first!, next!])
    expect(new Set(batches.map((b) => b.id)).size).toBe(2)
    expect(batches.find((b) => b.payment_id === next)!.first).toBe(next)
    const again = env.startRunner(handlers())
    await due(next!)
    await env.waitSettled(next!)
    await again.stop()
    const settled = await rows([first!, next!])
    const x = settled.find((r) => r.id === first)
    const y = settled.find((r) => r.id === next)
    expect(x!.settlement_tx_id).not.toBe(y!.settlement_tx_id)
    const transfers = await settlementsTo(env.merchant.destination)
    expect(transfers.filter((t) => t.hash === y!.settlement_tx_id)).toEqual([
      { hash: y!.settlement_tx_id, value: usdc(7) },
    ])
  })

  it('a settlement job queued before batches (one payment’s settlement in its payload) still pays that payment once', async () => {
    const [id] = await paid('300')
    // As a server before batches left it: no item, the job's payload the whole settlement.
    await env.t.db
      .deleteFrom('jobs')
      .where('payment_id', '=', id!)
      .where('kind', '=', evmJobKinds.settle)
      .execute()
    await env.t.db.deleteFrom('settlement_items').where('payment_id', '=', id!).execute()
    await env.t.db.deleteFrom('settlement_batches').where('payment_id', '=', id!).execute()
    await enqueueJob(env.t.db, {
      kind: evmJobKinds.settle,
      paymentId: id!,
      payload: {
        chain: env.anvil.caip2,
        asset: env.asset,
        destination: env.merchant.destination,
        amount: String(usdc(3)),
      },
    })
    const before = await env.balance(env.merchant.destination)
    const runner = env.startRunner(handlers())
    await env.waitSettled(id!)
    await runner.stop()
    const [row] = await rows([id!])
    expect(row!.settlement_status).toBe('succeeded')
    expect((await env.balance(env.merchant.destination)) - before).toBe(usdc(3))
    expect(await settlementsTo(env.merchant.destination)).toContainEqual({
      hash: row!.settlement_tx_id,
      value: usdc(3),
    })
  })
})
