import { type Address, parseAbiItem } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmJobKinds } from '../../src/server/chains/evm/index.js'
import { mintTestToken } from '../anvil.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv, fastRuntime, usdc } from '../evm/support.js'

/**
 * The exact states a SIGKILL leaves between two writes of a live EVM job, rebuilt deterministically
 * (crash.test.ts finds them by chance): the step's transaction landed and is recorded `succeeded`, but
 * the process died before the payment row learnt of it. A restarted job must finish the payment from
 * that record: neither fail a payment whose money moved, nor move the money again.
 */
let env: EvmEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(2, usdc(1000))
})
afterAll(() => env?.close())

/** Token Transfer logs of `from` (all blocks). */
async function transfersFrom(from: Address) {
  const logs = await env.publicClient.getLogs({
    address: env.token,
    event: parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)'),
    args: { from },
    fromBlock: 0n,
    toBlock: 'latest',
  })
  return logs.map((l) => ({ hash: l.transactionHash, to: l.args.to, value: l.args.value }))
}

async function row(paymentId: string) {
  return env.t.db.selectFrom('payments').selectAll().where('id', '=', paymentId).executeTakeFirstOrThrow()
}

/** The job as a dead runner leaves it: claimed once, lease run out. */
async function jobReclaimable(paymentId: string, kind: string) {
  await env.t.db
    .updateTable('jobs')
    .set({ state: 'running', locked_until: new Date(Date.now() - 1000), result: null })
    .where('payment_id', '=', paymentId)
    .where('kind', '=', kind)
    .execute()
}

async function waitSettled(paymentId: string) {
  const deadline = Date.now() + 20_000
  for (;;) {
    const r = await row(paymentId)
    if (r.status === 'failed' || (r.status === 'succeeded' && r.settlement_status === 'succeeded')) return r
    if (Date.now() > deadline) {
      const jobs = await env.t.db.selectFrom('jobs').selectAll().where('payment_id', '=', paymentId).execute()
      throw new Error(`${paymentId} still ${r.status}/${r.settlement_status}: ${JSON.stringify(jobs)}`)
    }
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

describe('a kill between recording a landed transaction and updating the payment', () => {
  it('relay: the payment still succeeds, with the one relay transfer', async () => {
    const paymentId = (await confirmGasless(env, buyer, '1100')).paymentId
    // Only the relay runs, so the state after it is exactly "relay landed, settlement not begun".
    const relayOnly = env.startRunner({
      [evmJobKinds.relay]: fastRuntime(env).jobHandlers[evmJobKinds.relay]!,
    })
    await env.waitJob(paymentId, evmJobKinds.relay)
    await relayOnly.stop()
    const done = await row(paymentId)
    expect([done.status, done.settlement_status]).toEqual(['succeeded', 'pending'])
    const relayTx = done.tx_id!

    // Rewind the payment to just before the step's final transaction: still processing, no settlement
    // item or batch queued; the relay's record stays `succeeded`, as written before the kill.
    await env.t.db
      .deleteFrom('jobs')
      .where('payment_id', '=', paymentId)
      .where('kind', '=', evmJobKinds.settle)
      .execute()
    await env.t.db.deleteFrom('settlement_items').where('payment_id', '=', paymentId).execute()
    await env.t.db.deleteFrom('settlement_batches').where('payment_id', '=', paymentId).execute()
    await env.t.db
      .updateTable('payments')
      .set({ status: 'processing', tx_id: null, settlement_status: null })
      .where('id', '=', paymentId)
      .execute()
    await jobReclaimable(paymentId, evmJobKinds.relay)

    const runner = env.startRunner(fastRuntime(env).jobHandlers)
    const final = await waitSettled(paymentId)
    await runner.stop()
    expect([final.status, final.failure_code, final.tx_id]).toEqual(['succeeded', null, relayTx])
    const relays = (await transfersFrom(buyer.address)).filter((t) => t.hash === relayTx)
    expect(relays).toHaveLength(1)
  })

  it('settlement: the merchant is paid once', async () => {
    const paymentId = (await confirmGasless(env, buyer, '1300')).paymentId
    const runner = env.startRunner(fastRuntime(env).jobHandlers)
    const settled = await waitSettled(paymentId)
    await runner.stop()
    expect(settled.settlement_status).toBe('succeeded')
    const before = await env.balance(env.merchant.destination)
    const toMerchant = async () =>
      (await transfersFrom(env.collection))
        .filter((t) => t.to === env.merchant.destination)
        .map((t) => t.hash)
    const settledBefore = await toMerchant()
    expect(settledBefore).toContain(settled.settlement_tx_id)

    // Rewind: the batch's transfer landed and recorded `succeeded`, the batch and its payment not yet
    // updated (one database transaction updates both).
    await env.t.db
      .updateTable('payments')
      .set({ settlement_status: 'pending', settlement_tx_id: null, settlement_unit: null })
      .where('id', '=', paymentId)
      .execute()
    await env.t.db
      .updateTable('settlement_batches')
      .set({ status: 'closed', tx_id: null })
      .where('payment_id', '=', paymentId)
      .execute()
    await jobReclaimable(paymentId, evmJobKinds.settle)
    // Other payments' money waits at the collection address, as it does on a busy service: a second
    // transfer would go through.
    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(500))

    const again = env.startRunner(fastRuntime(env).jobHandlers)
    const final = await waitSettled(paymentId)
    await again.stop()
    expect(final.settlement_tx_id).toBe(settled.settlement_tx_id)
    expect((await env.balance(env.merchant.destination)) - before).toBe(0n)
    expect(await toMerchant()).toEqual(settledBefore)
  })
})
