import { sql } from 'kysely'
import { createWalletClient, erc20Abi, http } from 'viem'
import { privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmJobKinds } from '../../src/server/chains/evm/index.js'
import { reconcileEvmChain } from '../../src/server/chains/evm/ledger.js'
import { holderOf } from '../../src/server/ledger/entries.js'
import { acknowledgeDifference, listDifferences } from '../../src/server/ledger/reconcile.js'
import { refundJobKinds } from '../../src/server/refunds/jobs.js'
import { anvilChain, anvilPrivateKeys, mintTestToken } from '../anvil.js'
import { headers } from '../server/helpers.js'
import { type Buyer, confirmGasless, createEvmEnv, type EvmEnv, fastRuntime, usdc } from './support.js'

/**
 * The ledger on Anvil and PostgreSQL: each flow's entries, the database refusing money that is not
 * there, a refund after settlement waiting for the float (nothing sent) and paid once it is topped up,
 * and reconciliation stopping sends until an operator acknowledges a difference.
 */
let env: EvmEnv
let buyer: Buyer
let holder: string
beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(2, usdc(1000))
  holder = holderOf(env.anvil.caip2, env.collection)
})
afterAll(() => env?.close())

const runtime = () => fastRuntime(env)
const only = (...kinds: string[]) =>
  Object.fromEntries(kinds.map((kind) => [kind, runtime().jobHandlers[kind]!]))

async function entries(where: { paymentId?: string; refundId?: string; batchId?: string }) {
  let query = env.t.db
    .selectFrom('ledger_entries')
    .select(['flow', 'debit_kind', 'debit_owner', 'credit_kind', 'credit_owner', 'amount'])
    .orderBy('id')
  if (where.paymentId) query = query.where('payment_id', '=', where.paymentId)
  if (where.refundId) query = query.where('refund_id', '=', where.refundId)
  if (where.batchId) query = query.where('batch_id', '=', where.batchId)
  return query.execute()
}

async function balance(kind: string, owner: string): Promise<bigint> {
  const row = await env.t.db
    .selectFrom('ledger_accounts')
    .select('balance')
    .where('holder', '=', holder)
    .where('kind', '=', kind as never)
    .where('owner', '=', owner)
    .executeTakeFirst()
  return BigInt(row?.balance ?? 0)
}

/** Every stored balance is the sum of its entries (credits less debits). */
async function expectBalancesAreTheirEntries() {
  const { rows } = await sql<{ kind: string; owner: string; balance: string; sum: string }>`
    SELECT a.kind, a.owner, a.balance::text, (
      coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.holder = a.holder AND e.asset = a.asset
        AND e.credit_kind = a.kind AND e.credit_owner = a.owner), 0) -
      coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.holder = a.holder AND e.asset = a.asset
        AND e.debit_kind = a.kind AND e.debit_owner = a.owner), 0))::text AS sum
    FROM ledger_accounts a`.execute(env.t.db)
  for (const row of rows) expect(row.balance, `${row.kind} ${row.owner}`).toBe(row.sum)
}

async function settledPayment(cents: string): Promise<string> {
  const { paymentId } = await confirmGasless(env, buyer, cents)
  const runner = env.startRunner(only(evmJobKinds.relay, evmJobKinds.settle))
  await env.waitSettled(paymentId)
  await runner.stop()
  return paymentId
}

async function refund(paymentId: string) {
  const res = await env.t.request({
    method: 'POST',
    url: '/v1/refunds',
    headers: headers(env.liveKey, env.merchant.id),
    payload: { paymentId },
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json.refundId as string
}

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`still ${JSON.stringify(value)}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const readRefund = (refundId: string) =>
  env.t
    .request({
      method: 'GET',
      url: `/v1/refunds/${refundId}`,
      headers: headers(env.liveKey, env.merchant.id),
    })
    .then((res) => res.json)

const readBalances = () =>
  env.t.request({ method: 'GET', url: '/v1/balances', headers: headers(env.liveKey) }).then((res) => {
    expect(res.statusCode, res.body).toBe(200)
    return res.json
  })

describe('the ledger', () => {
  it('a gasless payment and its settlement: collected, settling, paid; each entry once', async () => {
    const paymentId = await settledPayment('1000')
    expect(await entries({ paymentId })).toEqual([
      {
        flow: 'payment.collected',
        debit_kind: 'world',
        debit_owner: '',
        credit_kind: 'collected',
        credit_owner: env.merchant.id,
        amount: String(usdc(10)),
      },
    ])
    const item = await env.t.db
      .selectFrom('settlement_items')
      .select('batch_id')
      .where('payment_id', '=', paymentId)
      .executeTakeFirstOrThrow()
    expect(await entries({ batchId: String(item.batch_id) })).toEqual([
      expect.objectContaining({
        flow: 'settlement.closed',
        debit_kind: 'collected',
        credit_kind: 'settling',
        amount: String(usdc(10)),
      }),
      expect.objectContaining({
        flow: 'settlement.paid',
        debit_kind: 'settling',
        credit_kind: 'world',
        amount: String(usdc(10)),
      }),
    ])
    expect(await balance('collected', env.merchant.id)).toBe(0n)
    expect(await balance('settling', env.merchant.id)).toBe(0n)
    await expectBalancesAreTheirEntries()
  })

  it('the database refuses an entry taking collected, settling or a float below zero, and any UPDATE or DELETE', async () => {
    const entry = (debit: string, owner: string) => sql`
      INSERT INTO ledger_entries (mode, asset, holder, debit_kind, debit_owner, credit_kind, credit_owner, amount, flow, created_at)
      VALUES ('live', ${env.asset.toLowerCase()}, ${holder}, ${debit}, ${owner}, 'world', '', 1, 'test', now())`
    for (const [kind, owner] of [
      ['collected', env.merchant.id],
      ['settling', env.merchant.id],
      ['float', 'ptr_nobody'],
    ] as const)
      await expect(entry(kind, owner).execute(env.t.db)).rejects.toThrow(/ledger_accounts_balance_check/)
    await expect(sql`UPDATE ledger_entries SET amount = amount + 1`.execute(env.t.db)).rejects.toThrow(
      /append-only/,
    )
    await expect(sql`DELETE FROM ledger_entries`.execute(env.t.db)).rejects.toThrow(/append-only/)
  })

  it('a refund after settlement with an empty float waits (insufficient_funds), sends nothing, and is paid once topped up', async () => {
    const paymentId = await settledPayment('700')
    // Other money at the collection address that is not the float: a payment collected and not yet settled.
    const { paymentId: unsettled } = await confirmGasless(env, buyer, '900')
    const relay = env.startRunner(only(evmJobKinds.relay))
    await env.waitJob(unsettled, evmJobKinds.relay)
    await relay.stop()
    expect(await env.balance(env.collection)).toBeGreaterThanOrEqual(usdc(7))

    const refundId = await refund(paymentId)
    const runner = env.startRunner(only(refundJobKinds.evm))
    const short = await until(
      () => readRefund(refundId),
      (r) => r.failureCode === 'insufficient_funds',
    )
    expect([short.status, short.txId]).toEqual(['pending', undefined])
    await new Promise((resolve) => setTimeout(resolve, 300))
    const sent = await env.t.db
      .selectFrom('evm_transactions')
      .select('hash')
      .where('refund_id', '=', refundId)
      .execute()
    expect(sent).toEqual([])

    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, usdc(7))
    const done = await until(
      () => readRefund(refundId),
      (r) => r.status === 'succeeded',
    )
    await runner.stop()
    expect(done.txId).toMatch(/^0x/)
    expect(await entries({ refundId })).toEqual([
      expect.objectContaining({
        flow: 'refund.reserved',
        debit_kind: 'unallocated',
        credit_kind: 'refunds',
        amount: String(usdc(7)),
      }),
      expect.objectContaining({
        flow: 'refund.succeeded',
        debit_kind: 'refunds',
        credit_kind: 'world',
        amount: String(usdc(7)),
      }),
    ])
    expect(await balance('unallocated', '')).toBe(0n)
    expect(await balance('collected', env.merchant.id)).toBe(usdc(9))
    await expectBalancesAreTheirEntries()
  })

  it('reconciliation: money gone behind the ledger stops sends from the address until acknowledged', async () => {
    const chain = runtime().chains[0]!
    // An operator's top-up of one unit, credited as unallocated; then the collection key moves that unit
    // out with no record: the ledger holds one more there than the chain.
    await mintTestToken(env.anvil.rpcUrl, env.token, env.collection, 1n)
    await reconcileEvmChain(env.t.db, chain)
    expect(await listDifferences(env.t.db, { open: true })).toEqual([])
    expect(await balance('unallocated', '')).toBe(1n)
    const executor = createWalletClient({
      account: privateKeyToAccount(anvilPrivateKeys[1]),
      chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
      transport: http(env.anvil.rpcUrl),
    })
    const hash = await executor.writeContract({
      address: env.token,
      abi: erc20Abi,
      functionName: 'transfer',
      args: [buyer.address, 1n],
    })
    await env.publicClient.waitForTransactionReceipt({ hash })
    await reconcileEvmChain(env.t.db, chain)
    const [difference] = await listDifferences(env.t.db, { open: true })
    expect(difference).toMatchObject({ holder, difference: '-1' })
    const shown = await readBalances()
    expect(shown.differences).toEqual([
      expect.objectContaining({ id: difference!.id, holder, difference: '-1' }),
    ])
    expect(shown.differences[0].message).toContain(`Settlements and refunds from ${holder} are stopped`)
    expect(shown.data.length).toBeGreaterThan(0)
    expect(shown.data.every((row: { sendsStopped: boolean }) => row.sendsStopped)).toBe(true)

    const paymentId = (await confirmGasless(env, buyer, '100')).paymentId
    const runner = env.startRunner(only(evmJobKinds.relay, evmJobKinds.settle))
    const held = await until(
      () =>
        env.t.db
          .selectFrom('jobs')
          .selectAll()
          .where('kind', '=', evmJobKinds.settle)
          .where('payment_id', '=', paymentId)
          .executeTakeFirst(),
      (job) => job?.last_error?.includes('caipay ledger ack') ?? false,
    )
    expect(held?.last_error).toContain(`difference ${difference!.id}`)
    const settles = await env.t.db
      .selectFrom('evm_transactions')
      .select('hash')
      .where('payment_id', '=', paymentId)
      .where('purpose', '=', 'settle')
      .execute()
    expect(settles).toEqual([])

    expect(
      await acknowledgeDifference(env.t.db, { id: difference!.id, note: 'test withdrawal', now: new Date() }),
    ).toMatchObject({ id: difference!.id })
    await env.waitSettled(paymentId)
    await runner.stop()
    await reconcileEvmChain(env.t.db, chain)
    expect(await listDifferences(env.t.db, { open: true })).toEqual([])
    expect((await readBalances()).differences).toEqual([])
  })

  it("GET /v1/balances answers what the ledger holds of the partner's accounts", async () => {
    await settledPayment('300')
    const { paymentId } = await confirmGasless(env, buyer, '400')
    const relay = env.startRunner(only(evmJobKinds.relay))
    await env.waitJob(paymentId, evmJobKinds.relay)
    await relay.stop()
    const stored = await env.t.db
      .selectFrom('ledger_accounts')
      .select(['kind', 'owner', 'balance'])
      .where('mode', '=', 'live')
      .where('kind', 'in', ['collected', 'settling', 'refunds', 'float', 'fees'])
      .orderBy('kind')
      .orderBy('owner')
      .execute()
    const shown = await readBalances()
    expect(
      shown.data.map((row: { account: string; merchantId: string | null; amount: { value: string } }) => ({
        kind: row.account,
        owner: row.merchantId ?? env.t.partnerId,
        balance: row.amount.value,
      })),
    ).toEqual(stored.map((row) => ({ ...row, balance: String(row.balance) })))
    expect(shown.data).toContainEqual(
      expect.objectContaining({
        chainId: env.anvil.caip2,
        holder,
        account: 'collected',
        merchantId: env.merchant.id,
        amount: expect.objectContaining({ unit: `caip19/${env.asset.toLowerCase()}` }),
      }),
    )
    expect(await balance('collected', env.merchant.id)).toBeGreaterThanOrEqual(usdc(4))
  })
})
