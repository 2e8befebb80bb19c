import { sql } from 'kysely'
import { encodeAbiParameters, type Hash, keccak256, numberToHex, pad } from 'viem'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { holderOf } from '../../src/server/ledger/entries.js'
import { headers } from '../server/helpers.js'
import { type Buyer, createEvmEnv, type EvmEnv, isKind, usdc } from './support.js'

/**
 * Manual capture live on Anvil with gasless EIP-3009 payments (docs/capture.md): the money held at the
 * collection address (the ledger's authorized account) until a capture settles the captured part to the
 * merchant's destination and refunds the rest, a void or the expiry refunds everything; racing captures
 * and voids move the money once. Judged from token balances read from the chain and from the ledger.
 */
let env: EvmEnv
let buyer: Buyer
let holder: string
let reference = 0
const gas: Record<string, bigint[]> = { settlement: [], refund: [] }

beforeAll(async () => {
  env = await createEvmEnv()
  buyer = await env.buyer(3, usdc(1000))
  holder = holderOf(env.anvil.caip2, env.collection)
  // Every job of the app (relay, settlement, refund, capture expiry); env.close stops it.
  env.startRunner()
})
afterAll(async () => {
  const average = (values: bigint[]) =>
    values.length ? values.reduce((a, b) => a + b, 0n) / BigInt(values.length) : 0n
  console.log(
    `capture gas: settlement transfer ${average(gas.settlement!)} (n=${gas.settlement!.length}), ` +
      `refund transfer ${average(gas.refund!)} (n=${gas.refund!.length})`,
  )
  await env?.close()
})

const merchantPost = (url: string, payload?: unknown) =>
  env.t.request({
    method: 'POST',
    url,
    headers: headers(env.liveKey, env.merchant.id),
    ...(payload ? { payload: payload as Record<string, unknown> } : {}),
  })

async function until<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await read()
    if (done(value)) return value
    if (Date.now() > deadline) throw new Error(`still ${JSON.stringify(value)}`)
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/** A manual-capture payment of `cents` paid gaslessly and held (capture authorized). */
async function heldPayment(cents: string, extra: Record<string, unknown> = {}): Promise<string> {
  reference += 1
  const created = await merchantPost('/v1/payments', {
    referenceId: `hold-${reference}`,
    amount: { unit: 'iso4217/USD', value: cents },
    capture: 'manual',
    ...extra,
  })
  expect(created.statusCode, created.body).toBe(201)
  const paymentId = created.json.paymentId as string
  const options = await env.gw('POST', paymentId, '/options', { accounts: [buyer.account] })
  expect(options.statusCode, options.body).toBe(200)
  // A direct transfer would pay the merchant's destination: it cannot be held, so it is not offered.
  expect(options.json.options.filter(isKind('transfer'))).toEqual([])
  const option = options.json.options.find(isKind('eip3009'))
  expect(option, options.body).toBeDefined()
  const confirm = await env.gw('POST', paymentId, '/confirm', {
    optionId: option.id,
    results: [await buyer.sign(option.actions[0])],
  })
  expect(confirm.statusCode, confirm.body).toBe(200)
  await until(
    () => env.merchantView(paymentId),
    (p) => p.capture?.status === 'authorized',
  )
  return paymentId
}

const balances = async () => ({
  buyer: await env.balance(buyer.address),
  destination: await env.balance(env.merchant.destination),
  collection: await env.balance(env.collection),
})

async function ledgerBalance(kind: string): Promise<bigint> {
  const row = await env.t.db
    .selectFrom('ledger_accounts')
    .select('balance')
    .where('holder', '=', holder)
    .where('kind', '=', kind as never)
    .where('owner', '=', env.merchant.id)
    .executeTakeFirst()
  return BigInt(row?.balance ?? 0)
}

/** The ledger's book at the collection address is the chain's balance there, to the unit. */
async function expectLedgerIsTheChain(): Promise<void> {
  const { rows } = await sql<{ total: string }>`
    SELECT coalesce(sum(balance), 0)::text AS total FROM ledger_accounts WHERE holder = ${holder}`.execute(
    env.t.db,
  )
  expect(BigInt(rows[0]!.total)).toBe(await env.balance(env.collection))
  const mismatched = await sql<{ kind: string }>`
    SELECT a.kind FROM ledger_accounts a WHERE a.balance <> (
      coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.holder = a.holder AND e.asset = a.asset
        AND e.credit_kind = a.kind AND e.credit_owner = a.owner), 0) -
      coalesce((SELECT sum(amount) FROM ledger_entries e WHERE e.holder = a.holder AND e.asset = a.asset
        AND e.debit_kind = a.kind AND e.debit_owner = a.owner), 0))`.execute(env.t.db)
  expect(mismatched.rows).toEqual([])
}

/** Waits for every refund of the payment to succeed; records their transfers' gas. */
async function refundsDone(paymentId: string): Promise<void> {
  const rows = await until(
    () =>
      env.t.db
        .selectFrom('refunds')
        .select(['status', 'tx_id'])
        .where('payment_id', '=', paymentId)
        .execute(),
    (list) => list.length > 0 && list.every((r) => r.status === 'succeeded'),
  )
  for (const row of rows) gas.refund!.push(await gasOf(row.tx_id as Hash))
}

async function settled(paymentId: string): Promise<void> {
  const view = await until(
    () => env.merchantView(paymentId),
    (p) => p.settlement?.successful != null,
  )
  gas.settlement!.push(await gasOf(view.settlement.successful.txId as Hash))
}

const gasOf = async (hash: Hash) => (await env.publicClient.getTransactionReceipt({ hash })).gasUsed

const delta = (after: Record<string, bigint>, before: Record<string, bigint>) =>
  Object.fromEntries(Object.entries(after).map(([k, v]) => [k, v - before[k]!]))

describe('manual capture on Anvil (gasless EIP-3009)', () => {
  it('authorize -> full capture: held at the collection address, then settled to the merchant', async () => {
    const before = await balances()
    const id = await heldPayment('1000')
    expect(delta(await balances(), before)).toEqual({
      buyer: -usdc(10),
      destination: 0n,
      collection: usdc(10),
    })
    expect(await ledgerBalance('authorized')).toBe(usdc(10))
    expect(
      await env.t.db.selectFrom('settlement_items').select('batch_id').where('payment_id', '=', id).execute(),
    ).toEqual([])
    await expectLedgerIsTheChain()

    const res = await merchantPost(`/v1/payments/${id}/capture`)
    expect(res.statusCode, res.body).toBe(200)
    await settled(id)
    expect(delta(await balances(), before)).toEqual({
      buyer: -usdc(10),
      destination: usdc(10),
      collection: 0n,
    })
    expect(await ledgerBalance('authorized')).toBe(0n)
    await expectLedgerIsTheChain()
  })

  it('authorize -> partial capture: the merchant gets the captured part, the buyer the rest back', async () => {
    const before = await balances()
    const id = await heldPayment('1000')
    const res = await merchantPost(`/v1/payments/${id}/capture`, {
      amount: { unit: 'iso4217/USD', value: '600' },
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json.capture).toMatchObject({ status: 'partially_captured', capturedAmount: { value: '600' } })
    await settled(id)
    await refundsDone(id)
    expect(delta(await balances(), before)).toEqual({ buyer: -usdc(6), destination: usdc(6), collection: 0n })
    expect(await ledgerBalance('authorized')).toBe(0n)
    await expectLedgerIsTheChain()
  })

  it('authorize -> void: everything back to the buyer, nothing to the merchant', async () => {
    const before = await balances()
    const id = await heldPayment('750')
    const res = await merchantPost(`/v1/payments/${id}/void`)
    expect(res.statusCode, res.body).toBe(200)
    await refundsDone(id)
    expect(delta(await balances(), before)).toEqual({ buyer: 0n, destination: 0n, collection: 0n })
    await expectLedgerIsTheChain()
  })

  it('authorize -> expiry: voided by itself at captureBy (expired)', async () => {
    const before = await balances()
    const now = Math.floor(Date.now() / 1000)
    const id = await heldPayment('500', { expiresAt: now + 6, captureBy: now + 7 })
    const view = await until(
      () => env.merchantView(id),
      (p) => p.capture?.status === 'expired',
      20_000,
    )
    expect(view.capture.capturedAmount).toBeNull()
    await refundsDone(id)
    expect(delta(await balances(), before)).toEqual({ buyer: 0n, destination: 0n, collection: 0n })
    await expectLedgerIsTheChain()
  })

  it('20 concurrent captures and voids: exactly one wins, the money moves once', async () => {
    const before = await balances()
    const id = await heldPayment('800')
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        merchantPost(`/v1/payments/${id}/${i % 2 === 0 ? 'capture' : 'void'}`),
      ),
    )
    const won = answers.filter((a) => a.statusCode === 200)
    expect(won).toHaveLength(1)
    expect(answers.filter((a) => a.statusCode === 409 && a.json.code === 'invalid_state')).toHaveLength(19)
    const status = won[0]!.json.capture.status as string
    if (status === 'captured') await settled(id)
    else await refundsDone(id)
    // Let any second mover that should not exist show up before judging.
    await new Promise((resolve) => setTimeout(resolve, 500))
    const moved = delta(await balances(), before)
    expect(moved).toEqual(
      status === 'captured'
        ? { buyer: -usdc(8), destination: usdc(8), collection: 0n }
        : { buyer: 0n, destination: 0n, collection: 0n },
    )
    const sends = await env.t.db
      .selectFrom('evm_transactions')
      .select(['purpose'])
      .where('payment_id', '=', id)
      .where('purpose', '<>', 'relay')
      .execute()
    expect(sends).toHaveLength(1)
    await expectLedgerIsTheChain()
  })

  it('a void whose transfer the token refuses every time: held again in authorized; voided again, it moves once', async () => {
    const before = await balances()
    const id = await heldPayment('900')
    // The token refuses every transfer from the collection address: its balance in the token's storage
    // (OpenZeppelin ERC20's _balances, slot 0) is emptied, and put back once the refund has failed.
    const slot = keccak256(
      encodeAbiParameters([{ type: 'address' }, { type: 'uint256' }], [env.collection, 0n]),
    )
    const held = await env.balance(env.collection)
    const stored = await env.publicClient.getStorageAt({ address: env.token, slot })
    expect(BigInt(stored!)).toBe(held)
    const setStored = (value: bigint) =>
      env.publicClient.request({
        method: 'anvil_setStorageAt',
        params: [env.token, slot, pad(numberToHex(value), { size: 32 })],
      } as never)
    await setStored(0n)

    const voided = await merchantPost(`/v1/payments/${id}/void`)
    expect(voided.statusCode, voided.body).toBe(200)
    const refundId = (
      await env.t.db.selectFrom('refunds').select('id').where('payment_id', '=', id).executeTakeFirstOrThrow()
    ).id
    // Every attempt really runs (the estimate reverts each time); only the backoff between them is cut.
    const failed = await until(
      async () => {
        await env.t.db
          .updateTable('jobs')
          .set({ run_at: new Date() })
          .where('refund_id', '=', refundId)
          .where('state', '=', 'pending')
          .execute()
        return env.t.db
          .selectFrom('refunds')
          .select(['status', 'failure_code', 'tx_id'])
          .where('id', '=', refundId)
          .executeTakeFirstOrThrow()
      },
      (r) => r.status !== 'pending',
      60_000,
    )
    expect(failed).toEqual({ status: 'failed', failure_code: 'transfer_failed', tx_id: null })
    const job = await env.t.db
      .selectFrom('jobs')
      .select(['state', 'attempts', 'last_error'])
      .where('refund_id', '=', refundId)
      .executeTakeFirstOrThrow()
    expect(job).toMatchObject({ state: 'failed', attempts: 10 })
    expect(job.last_error).toMatch(/token refused the refund transfer/)
    await setStored(held)

    // Nothing moved; the merchant's authorized balance holds it again and the payment says so.
    expect(delta(await balances(), before)).toEqual({ buyer: -usdc(9), destination: 0n, collection: usdc(9) })
    expect(await ledgerBalance('authorized')).toBe(usdc(9))
    expect(await ledgerBalance('refunds')).toBe(0n)
    await expectLedgerIsTheChain()
    const view = await env.merchantView(id)
    expect(view.capture).toMatchObject({
      status: 'authorized',
      heldAmount: { value: '900' },
      failureCode: 'transfer_failed',
    })
    const sends = await env.t.db
      .selectFrom('evm_transactions')
      .select('hash')
      .where('refund_id', '=', refundId)
      .execute()
    expect(sends).toEqual([])

    const again = await merchantPost(`/v1/payments/${id}/void`)
    expect(again.statusCode, again.body).toBe(200)
    expect(again.json.capture).toMatchObject({
      status: 'voided',
      failureCode: null,
      heldAmount: { value: '0' },
    })
    await until(
      () =>
        env.t.db
          .selectFrom('refunds')
          .select(['status'])
          .where('payment_id', '=', id)
          .where('id', '<>', refundId)
          .execute(),
      (rows) => rows.length === 1 && rows[0]!.status === 'succeeded',
    )
    expect(delta(await balances(), before)).toEqual({ buyer: 0n, destination: 0n, collection: 0n })
    expect(await ledgerBalance('authorized')).toBe(0n)
    await expectLedgerIsTheChain()
  }, 90_000)
})
