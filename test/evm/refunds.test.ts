import { type Address, type Hash, parseAbiItem } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmJobKinds } from '../../src/server/chains/evm/index.js'
import { refundJobKinds } from '../../src/server/refunds/jobs.js'
import { mintTestToken } from '../anvil.js'
import { headers } from '../server/helpers.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv, fastRuntime, usdc } from './support.js'

/**
 * Live refunds on Anvil: the paid asset goes back from the collection address, before the settlement
 * (which then pays the merchant the rest) or after it (from the float, waiting while the float is
 * short), exactly once even when the process dies between recording the transfer and sending it.
 * Every amount is read from the chain's Transfer logs and balances, to the unit.
 */
let env: EvmEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(2, usdc(1000))
})
afterAll(() => env?.close())

const handlers = () => fastRuntime(env).jobHandlers
const only = (...kinds: string[]) => Object.fromEntries(kinds.map((kind) => [kind, handlers()[kind]!]))

async function transfers(from: Address, to: Address) {
  const logs = await env.publicClient.getLogs({
    address: env.token,
    event: parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
    args: { from, to },
    fromBlock: 0n,
    toBlock: 'latest',
  })
  return logs.map((l) => ({ hash: l.transactionHash as Hash, value: l.args.value! }))
}

async function refund(paymentId: string, body: Record<string, unknown> = {}) {
  const res = await env.t.request({
    method: 'POST',
    url: '/v1/refunds',
    headers: headers(env.liveKey, env.merchant.id),
    payload: { paymentId, ...body },
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json as { refundId: string; status: string; destination: string }
}

async function readRefund(refundId: string) {
  const res = await env.t.request({
    method: 'GET',
    url: `/v1/refunds/${refundId}`,
    headers: headers(env.liveKey, env.merchant.id),
  })
  return res.json
}

async function waitRefund(refundId: string, done: (r: any) => boolean, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const r = await readRefund(refundId)
    if (done(r)) return r
    if (Date.now() > deadline) throw new Error(`refund ${refundId} still ${JSON.stringify(r)}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

async function paid(cents: string): Promise<string> {
  const { paymentId } = await confirmGasless(env, buyer, cents)
  const relay = env.startRunner(only(evmJobKinds.relay))
  await env.waitJob(paymentId, evmJobKinds.relay)
  await relay.stop()
  return paymentId
}

const usd = (cents: string) => ({ unit: 'iso4217/USD', value: cents })

describe('live EVM refunds', () => {
  it('before the settlement: a partial refund from the collected funds, the settlement pays the rest', async () => {
    const paymentId = await paid('1000')
    const before = await Promise.all([env.balance(buyer.address), env.balance(env.merchant.destination)])
    const made = await refund(paymentId, { amount: usd('400'), reason: 'one item back' })
    expect(made).toMatchObject({ status: 'pending', destination: buyer.account })

    const runner = env.startRunner(handlers())
    const done = await waitRefund(made.refundId, (r) => r.status === 'succeeded')
    const view = await (async () => {
      const deadline = Date.now() + 20_000
      for (;;) {
        const v = await env.merchantView(paymentId)
        if (v.settlement?.successful || Date.now() > deadline) return v
        await new Promise((resolve) => setTimeout(resolve, 25))
      }
    })()
    await runner.stop()
    expect(done.txId).toMatch(/^0x[0-9a-f]{64}$/)
    expect(await transfers(env.collection, buyer.address)).toContainEqual({ hash: done.txId, value: usdc(4) })
    const settlement = await transfers(env.collection, env.merchant.destination)
    expect(settlement).toContainEqual({ hash: view.settlement.successful.txId, value: usdc(6) })
    const after = await Promise.all([env.balance(buyer.address), env.balance(env.merchant.destination)])
    expect(after[0] - before[0]).toBe(usdc(4))
    expect(after[1] - before[1]).toBe(usdc(6))
  })

  it('after the settlement: paid from the float; short, it stays pending (insufficient_funds) until funded', async () => {
    const paymentId = await paid('700')
    const runner = env.startRunner(handlers())
    await env.waitSettled(paymentId)
    const float = await env.balance(env.collection)
    // The settlement took what was collected: the float is what earlier tests left (none), short of 7.
    const before = await env.balance(buyer.address)
    const made = await refund(paymentId)
    if (float >= usdc(7)) throw new Error(`the collection address already holds ${float}`)
    const short = await waitRefund(made.refundId, (r) => r.failureCode === 'insufficient_funds')
    expect(short.status).toBe('pending')
    expect(short.txId).toBeUndefined()
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(await env.balance(buyer.address)).toBe(before)

    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(7) - float)
    const done = await waitRefund(made.refundId, (r) => r.status === 'succeeded')
    await runner.stop()
    expect(done.failureCode).toBeUndefined()
    expect((await env.balance(buyer.address)) - before).toBe(usdc(7))
    expect(await transfers(env.collection, buyer.address)).toContainEqual({ hash: done.txId, value: usdc(7) })
    const payment = await env.t.db
      .selectFrom('payments')
      .select('refunded_at')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(payment.refunded_at).not.toBeNull()
    const again = await env.t.request({
      method: 'POST',
      url: '/v1/refunds',
      headers: headers(env.liveKey, env.merchant.id),
      payload: { paymentId },
    })
    expect([again.statusCode, again.json.code]).toEqual([409, 'already_refunded'])
  })

  it('a kill between recording the transfer and sending it: the same bytes are sent once, nothing twice', async () => {
    const paymentId = await paid('500')
    const settle = env.startRunner(only(evmJobKinds.settle))
    await env.waitSettled(paymentId)
    await settle.stop()
    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(50))
    const before = await env.balance(buyer.address)
    const made = await refund(paymentId, { amount: usd('300') })

    // Automine off: the first runner records and broadcasts, then dies; the node then loses the
    // transaction (dropped from its pool), which is what a kill right after the record leaves.
    await env.publicClient.request({ method: 'evm_setAutomine', params: [false] } as never)
    const first = env.startRunner(only(refundJobKinds.evm))
    const row = await (async () => {
      const deadline = Date.now() + 10_000
      for (;;) {
        const r = await env.t.db
          .selectFrom('evm_transactions')
          .selectAll()
          .where('refund_id', '=', made.refundId)
          .executeTakeFirst()
        if (r) return r
        if (Date.now() > deadline) throw new Error('no refund transaction was recorded')
        await new Promise((resolve) => setTimeout(resolve, 20))
      }
    })()
    await first.stop()
    await env.publicClient.request({ method: 'anvil_dropTransaction', params: [row.hash] } as never)
    await env.t.db
      .updateTable('jobs')
      .set({ state: 'running', locked_until: new Date(Date.now() - 1000) })
      .where('refund_id', '=', made.refundId)
      .execute()
    await env.publicClient.request({ method: 'evm_setAutomine', params: [true] } as never)

    const second = env.startRunner(only(refundJobKinds.evm))
    const done = await waitRefund(made.refundId, (r) => r.status === 'succeeded')
    await second.stop()
    expect(done.txId).toBe(row.hash)
    const rows = await env.t.db
      .selectFrom('evm_transactions')
      .select(['hash', 'status'])
      .where('refund_id', '=', made.refundId)
      .execute()
    expect(rows).toEqual([{ hash: row.hash, status: 'succeeded' }])
    const sent = (await transfers(env.collection, buyer.address)).filter((t) => t.hash === row.hash)
    expect(sent).toEqual([{ hash: row.hash, value: usdc(3) }])
    expect((await env.balance(buyer.address)) - before).toBe(usdc(3))
  })
})
