import { sql } from 'kysely'
import { createWalletClient, type Hash, http } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { anvilPrivateKeys } from '../anvil.js'
import {
  type Buyer,
  confirmGasless,
  createEvmEnv,
  type EvmEnv,
  fastRuntime,
  relayRows,
  usdc,
} from './support.js'

async function rpc(env: EvmEnv, method: string, params: unknown[] = []) {
  return env.publicClient.request({ method, params } as never)
}

async function waitForRelayRow(env: EvmEnv, paymentId: string) {
  const deadline = Date.now() + 10_000
  for (;;) {
    const [row] = await relayRows(env, paymentId)
    if (row) return row
    if (Date.now() > deadline) throw new Error('no relay transaction was recorded')
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
}

/** What a runner that died mid-step leaves behind: its claim, with the lease run out. */
async function leaseRunsOut(env: EvmEnv, paymentId: string) {
  await env.t.db
    .updateTable('jobs')
    .set({ state: 'running', locked_until: new Date(Date.now() - 1000) })
    .where('payment_id', '=', paymentId)
    .execute()
}

/**
 * Relay submitted, then the runner is gone before it records completion (automine off keeps the relay
 * in flight); a fresh runner must finish the payment from what was recorded, never transferring twice.
 */
describe('a relay interrupted between submission and receipt', () => {
  let env: EvmEnv
  let buyer: Buyer
  beforeAll(async () => {
    env = await createEvmEnv()
    buyer = await env.buyer(2)
  })
  afterAll(() => env?.close())

  async function interrupted() {
    const { paymentId } = await confirmGasless(env, buyer)
    const before = await env.balance(buyer.address)
    await rpc(env, 'evm_setAutomine', [false])
    const first = env.startRunner(fastRuntime(env, { receiptTimeoutMs: 60_000 }).jobHandlers)
    const row = await waitForRelayRow(env, paymentId)
    await first.stop()
    await leaseRunsOut(env, paymentId)
    const payment = await env.t.db
      .selectFrom('payments')
      .select('status')
      .where('id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(payment.status).toBe('processing')
    return { paymentId, row, before }
  }

  async function finishes(paymentId: string, before: bigint) {
    const second = env.startRunner(fastRuntime(env).jobHandlers)
    const final = await env.waitFinal(paymentId)
    // Let the settlement finish too, so no job of this payment is left for the next test's runners.
    await env.waitSettled(paymentId)
    await second.stop()
    expect(final.status).toBe('succeeded')
    expect((await env.balance(buyer.address)) - before).toBe(-usdc(10))
    const job = await env.waitJob(paymentId, 'evm.relay')
    // At least the interrupted run and the finishing one; a loaded machine can add a retry (a slow RPC
    // answer hands the job back), which must change nothing: one relay row and one transfer, checked here
    // and by the callers.
    expect(job.state).toBe('succeeded')
    expect(job.attempts).toBeGreaterThanOrEqual(2)
    return final.txId as Hash
  }

  it('finds the recorded transaction in the mempool and finishes with it', async () => {
    const { paymentId, row, before } = await interrupted()
    expect((await env.publicClient.getTransaction({ hash: row.hash as Hash })).blockNumber).toBeNull()
    await rpc(env, 'evm_setAutomine', [true])
    await rpc(env, 'evm_mine')
    expect(await finishes(paymentId, before)).toBe(row.hash)
    expect((await relayRows(env, paymentId)).map((r) => r.status)).toEqual(['succeeded'])
  })

  it('broadcasts the same signed bytes again when the node lost them', async () => {
    const { paymentId, row, before } = await interrupted()
    await rpc(env, 'anvil_dropTransaction', [row.hash])
    await expect(env.publicClient.getTransaction({ hash: row.hash as Hash })).rejects.toThrow()
    await rpc(env, 'evm_setAutomine', [true])
    expect(await finishes(paymentId, before)).toBe(row.hash)
    expect((await relayRows(env, paymentId)).map((r) => [r.hash, r.status])).toEqual([
      [row.hash, 'succeeded'],
    ])
  })

  it('signs anew only when the recorded transaction can never land (its nonce went elsewhere)', async () => {
    const { paymentId, row, before } = await interrupted()
    await rpc(env, 'anvil_dropTransaction', [row.hash])
    const executor = createWalletClient({
      account: privateKeyToAccount(anvilPrivateKeys[1]),
      transport: http(env.anvil.rpcUrl),
    })
    await executor.sendTransaction({
      chain: null,
      to: executor.account.address,
      value: 0n,
      nonce: Number(row.nonce),
    })
    await rpc(env, 'evm_setAutomine', [true])
    await rpc(env, 'evm_mine')
    const txId = await finishes(paymentId, before)
    const rows = await relayRows(env, paymentId)
    expect(rows.map((r) => r.status)).toEqual(['dropped', 'succeeded'])
    expect(txId).toBe(rows[1]!.hash)
    expect(txId).not.toBe(row.hash)
  })
})

describe('an unreachable node', () => {
  let env: EvmEnv
  beforeAll(async () => {
    env = await createEvmEnv()
  })
  afterAll(() => env?.close())

  it('delays the relay (retried with backoff) and never fails or double-pays it', async () => {
    const buyer = await env.buyer(2)
    const { paymentId } = await confirmGasless(env, buyer)
    const config = env.t.app.config
    const chain = config.chains[env.anvil.caip2]!
    const down = fastRuntime(env, {
      config: { ...config, chains: { [env.anvil.caip2]: { ...chain, rpcUrl: 'http://127.0.0.1:9' } } },
    })
    const offline = env.startRunner(down.jobHandlers)
    const deadline = Date.now() + 10_000
    let job = await env.t.db
      .selectFrom('jobs')
      .selectAll()
      .where('payment_id', '=', paymentId)
      .executeTakeFirstOrThrow()
    while (job.last_error === null && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 20))
      job = await env.t.db
        .selectFrom('jobs')
        .selectAll()
        .where('payment_id', '=', paymentId)
        .executeTakeFirstOrThrow()
    }
    await offline.stop()
    job = await env.t.db
      .selectFrom('jobs')
      .selectAll()
      .where('payment_id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(job).toMatchObject({ state: 'pending', attempts: 1 })
    expect(job.last_error).toMatch(/HTTP request failed|fetch failed|ECONNREFUSED/i)
    expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('processing')

    // The node is back (a runner that reaches it): the payment completes once.
    const before = await env.balance(buyer.address)
    await env.t.db
      .updateTable('jobs')
      .set({ run_at: new Date(0) })
      .where('payment_id', '=', paymentId)
      .execute()
    env.startRunner(fastRuntime(env).jobHandlers)
    expect((await env.waitFinal(paymentId)).status).toBe('succeeded')
    expect((await env.balance(buyer.address)) - before).toBe(-usdc(10))
    expect((await relayRows(env, paymentId)).map((r) => r.status)).toEqual(['succeeded'])
  })
})

describe('several runners (instances) on one executor', () => {
  let env: EvmEnv
  beforeAll(async () => {
    env = await createEvmEnv()
  })
  afterAll(() => env?.close())

  it('serialise its nonces: every payment relays once and settles in exactly one batch of one transfer', async () => {
    const buyers: Buyer[] = []
    for (const index of [2, 3, 4]) buyers.push(await env.buyer(index))
    const paymentIds: string[] = []
    for (const buyer of [...buyers, ...buyers])
      paymentIds.push((await confirmGasless(env, buyer, '100')).paymentId)
    const before = await env.balance(env.merchant.destination)
    env.startRunner(fastRuntime(env).jobHandlers)
    env.startRunner(fastRuntime(env).jobHandlers)
    for (const id of paymentIds) expect((await env.waitFinal(id)).status).toBe('succeeded')
    const deadline = Date.now() + 20_000
    const settled = () =>
      env.t.db.selectFrom('payments').select('id').where('settlement_status', '=', 'succeeded').execute()
    while ((await settled()).length < paymentIds.length && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    expect((await env.balance(env.merchant.destination)) - before).toBe(usdc(6))
    const rows = await env.t.db.selectFrom('evm_transactions').selectAll().execute()
    const payments = await env.t.db
      .selectFrom('payments')
      .select(['id', 'settlement_tx_id'])
      .where('id', 'in', paymentIds)
      .execute()
    const settlements = new Set(payments.map((p) => p.settlement_tx_id))
    const items = await env.t.db
      .selectFrom('settlement_items')
      .selectAll()
      .where('payment_id', 'in', paymentIds)
      .execute()
    const batches = await env.t.db.selectFrom('settlement_batches').selectAll().execute()
    // Each payment in one batch, each batch one succeeded transfer, each payment settled by its batch's.
    expect(items).toHaveLength(paymentIds.length)
    expect(batches.map((b) => b.status)).toEqual(batches.map(() => 'succeeded'))
    for (const item of items) {
      const batch = batches.find((b) => b.id === item.batch_id)
      expect(payments.find((p) => p.id === item.payment_id)?.settlement_tx_id).toBe(batch?.tx_id)
    }
    expect(new Set(batches.map((b) => b.tx_id))).toEqual(settlements)
    const succeeded = rows.filter((r) => r.status === 'succeeded')
    expect(succeeded.filter((r) => r.purpose === 'relay')).toHaveLength(paymentIds.length)
    expect(new Set(succeeded.filter((r) => r.purpose === 'settle').map((r) => r.hash))).toEqual(settlements)
    expect(new Set(rows.map((r) => r.nonce)).size).toBe(rows.length)
  })
})

describe('an authorization that expired before the relay', () => {
  let env: EvmEnv
  beforeAll(async () => {
    env = await createEvmEnv()
  })
  afterAll(() => env?.close())

  it('is refused by the token; the payment fails and nothing moves', async () => {
    const buyer = await env.buyer(2)
    const { paymentId, typed } = await confirmGasless(env, buyer)
    const before = await Promise.all([env.balance(buyer.address), env.balance(env.collection)])
    // The chain's clock passes validBefore while the job waits (a long outage, say).
    await rpc(env, 'evm_setNextBlockTimestamp', [Number(typed.message.validBefore) + 1])
    await rpc(env, 'evm_mine')
    env.startRunner()
    expect((await env.waitFinal(paymentId)).status).toBe('failed')
    expect(await Promise.all([env.balance(buyer.address), env.balance(env.collection)])).toEqual(before)
    const job = await env.waitJob(paymentId, 'evm.relay')
    expect(JSON.stringify(job.result)).toContain('ERC3009InvalidAuthorizationTime')
    const count = await sql<{ n: string }>`SELECT count(*) AS n FROM evm_transactions`.execute(env.t.db)
    expect(count.rows[0]!.n).toBe('0')
  })
})
