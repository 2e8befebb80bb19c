/**
 * Live EVM subscriptions on Anvil (docs/subscriptions.md): the buyer's wallet signs a Permit2 mandate at
 * the subscription's gateway link, the service's jobs submit it once and pull each period with
 * `transferFrom`. Time is the server's clock and Anvil's, moved together (`advanceTo`), so a monthly
 * subscription of 12 periods runs its year in seconds. Balances are read from the chain.
 */
import { type Address, createWalletClient, erc20Abi, type Hash, http } from 'viem'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/index.js'
import { permit2Address } from '../../protocol/evm/index.js'
import { permit2AllowanceAbi } from '../../protocol/evm/permit2.js'
import { createPayClient } from '../../src/pay/createPayClient.js'
import { type JobRunner, startJobRunner } from '../../src/server/jobs/runner.js'
import { createMandates } from '../../src/subscriptions/index.js'
import { anvilChain, anvilPrivateKeys, mintTestToken } from '../anvil.js'
import { headers } from '../server/helpers.js'
import { chargeAtLastTry, chargeDue, periodPayments, secondPeriodDue } from '../subscriptions/liveCharges.js'
import { until } from '../until.js'
import { deployTetherAndPermit2 } from './payers.js'
import { createEvmEnv, type EvmEnv, injectFetch, usdc } from './support.js'

const price = usdc(9.99)
let env: EvmEnv
let runner: JobRunner
let references = 0
/** Executor gas per step, for docs/subscriptions.md. */
const gas: Record<'permit' | 'charge', bigint[]> = { permit: [], charge: [] }

beforeAll(async () => {
  env = await createEvmEnv({
    async extraAssets(anvil) {
      await deployTetherAndPermit2(anvil.rpcUrl)
      return {}
    },
  })
  runner = startRunner()
}, 60_000)

afterAll(async () => {
  if (gas.charge.length) console.info('mandate executor gas', gas)
  await runner?.stop()
  await env?.close()
})

/** A runner on the app's jobs and the app's clock (the one `advanceTo` moves). */
function startRunner(): JobRunner {
  return startJobRunner({
    db: env.t.db,
    handlers: env.t.app.jobHandlers,
    intervalMs: 25,
    listenUrl: env.t.databaseUrl,
    now: () => env.t.app.now(),
  })
}

const rpc = (method: string, params: unknown[] = []) => env.publicClient.request({ method, params } as never)

/** The server's clock and Anvil's, moved together to `at` (a subscription's next attempt). */
async function advanceTo(at: Date): Promise<void> {
  const seconds = Math.ceil((at.getTime() - env.t.app.now().getTime()) / 1000) + 1
  if (seconds <= 0) return
  env.t.advanceTime(seconds * 1000)
  await rpc('evm_increaseTime', [seconds])
  await rpc('evm_mine')
}

const subscriptionRow = (id: string) =>
  env.t.db.selectFrom('subscriptions').selectAll().where('id', '=', id).executeTakeFirstOrThrow()

/** A funded buyer whose wallet signs mandates to the collection address (allow-listed, as wallets do). */
async function newBuyer(tokens: bigint) {
  const key = generatePrivateKey()
  const account = privateKeyToAccount(key)
  const funder = createWalletClient({
    account: privateKeyToAccount(anvilPrivateKeys[0]),
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
  })
  await env.publicClient.waitForTransactionReceipt({
    hash: await funder.sendTransaction({ to: account.address, value: 10n ** 18n }),
  })
  await mintTestToken(env.anvil.rpcUrl, env.token, account.address, tokens)
  const caip2 = env.anvil.caip2
  const signer = evmSigner({
    account,
    chains: { [caip2]: { rpcUrl: env.anvil.rpcUrl } },
    pollingInterval: 50,
    spenders: [`${caip2}:${permit2Address}`, `${caip2}:${env.collection}`],
  })
  const mandates = createMandates({ signers: [signer] })
  const client = createPayClient({
    baseUrl: env.t.app.config.publicBaseUrl,
    apiKey: env.walletKey,
    fetch: injectFetch(env),
    signers: [signer],
    mandates,
    poll: { sleep: () => new Promise((resolve) => setTimeout(resolve, 25)) },
  })
  return { key, address: account.address, client, mandates }
}

/** A live subscription of the merchant's, `cents` USD an `interval`: the API's answer (nothing paid yet). */
async function createSubscription(cents: string, interval: 'week' | 'month', periods: number) {
  references += 1
  const res = await env.t.request({
    method: 'POST',
    url: '/v1/subscriptions',
    headers: headers(env.liveKey, env.merchant.id),
    payload: {
      referenceId: `sub-${references}`,
      amount: { unit: 'iso4217/USD', value: cents },
      interval,
      periods,
    },
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json
}

/** A live monthly subscription of `periods` at $9.99, signed by the buyer's wallet: active once its first period is charged. */
async function subscribe(buyer: Awaited<ReturnType<typeof newBuyer>>, periods = 12) {
  const { subscriptionId, gatewayUrl, firstPaymentId } = await createSubscription('999', 'month', periods)
  const paid = await buyer.client.pay(gatewayUrl)
  expect(paid).toMatchObject({ paymentId: firstPaymentId })
  const final = await env.waitFinal(firstPaymentId)
  expect(final.status).toBe('succeeded')
  const row = await subscriptionRow(subscriptionId)
  expect(row.status).toBe('active')
  return { subscriptionId: subscriptionId as string, firstPaymentId: firstPaymentId as string }
}

/**
 * Moves both clocks to the subscription's next attempt, starts it (the app's own sweep may start it first:
 * either way once), and waits for the job's verdict: the attempt rescheduled, or the subscription over.
 */
async function nextAttempt(subscriptionId: string) {
  const before = await subscriptionRow(subscriptionId)
  const due = before.next_attempt_at!
  expect(due).not.toBeNull()
  await advanceTo(due)
  await chargeDue(env.t)
  return until(
    async () => {
      const row = await subscriptionRow(subscriptionId)
      const over = row.status === 'cancelled' || row.status === 'ended'
      return over || (row.next_attempt_at !== null && row.next_attempt_at.getTime() !== due.getTime())
        ? row
        : undefined
    },
    `subscription ${subscriptionId} to finish charging`,
    20_000,
  )
}

async function executorTransactions(paymentIds: readonly string[], purpose: 'permit' | 'charge') {
  return env.t.db
    .selectFrom('evm_transactions')
    .selectAll()
    .where('payment_id', 'in', paymentIds)
    .where('purpose', '=', purpose)
    .orderBy('id')
    .execute()
}

async function sendTokens(fromKey: `0x${string}`, to: Address, amount: bigint) {
  const wallet = createWalletClient({
    account: privateKeyToAccount(fromKey),
    chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
    transport: http(env.anvil.rpcUrl),
  })
  const hash = await wallet.writeContract({
    address: env.token,
    abi: erc20Abi,
    functionName: 'transfer',
    args: [to, amount],
  })
  await env.publicClient.waitForTransactionReceipt({ hash })
}

describe('a live monthly EVM subscription', () => {
  it('runs a year: 12 exact charges on chain, an empty period past due then recovered, then ended', async () => {
    const buyer = await newBuyer(usdc(200))
    const start = await env.balance(buyer.address)
    const { subscriptionId, firstPaymentId } = await subscribe(buyer)
    expect(await env.balance(buyer.address)).toBe(start - price)
    let charged = 1
    let emptied = false
    while (charged < 12) {
      if (charged === 5 && !emptied) {
        // The buyer's wallet is empty when the sixth month falls due.
        emptied = true
        const balance = await env.balance(buyer.address)
        const parking = privateKeyToAccount(generatePrivateKey()).address
        await sendTokens(buyer.key, parking, balance)
        const due = (await subscriptionRow(subscriptionId)).next_attempt_at!
        const row = await nextAttempt(subscriptionId)
        expect(row).toMatchObject({ status: 'past_due', failed_attempts: 1, periods_charged: 5 })
        // Dunning's first retry, a day after the failed attempt.
        const retryIn = row.next_attempt_at!.getTime() - due.getTime()
        expect(retryIn).toBeGreaterThanOrEqual(86_400_000)
        expect(retryIn).toBeLessThan(86_400_000 + 60_000)
        expect(await env.balance(buyer.address)).toBe(0n)
        await mintTestToken(env.anvil.rpcUrl, env.token, buyer.address, balance)
        const recovered = await nextAttempt(subscriptionId)
        expect(recovered).toMatchObject({ status: 'active', failed_attempts: 0, periods_charged: 6 })
        expect(await env.balance(buyer.address)).toBe(balance - price)
        charged = 6
        continue
      }
      const before = await env.balance(buyer.address)
      const row = await nextAttempt(subscriptionId)
      charged += 1
      expect(row.periods_charged).toBe(charged)
      expect(row.status).toBe(charged === 12 ? 'ended' : 'active')
      expect(await env.balance(buyer.address)).toBe(before - price)
    }
    expect(await env.balance(buyer.address)).toBe(start - 12n * price)
    const payments = await periodPayments(env.t, subscriptionId)
    expect(payments.map((p) => [p.period, p.status, p.source])).toEqual(
      Array.from({ length: 12 }, (_, k) => [k, 'succeeded', 'mandate']),
    )
    const ids = payments.map((p) => p.id)
    const permits = await executorTransactions([firstPaymentId], 'permit')
    const charges = await executorTransactions(ids, 'charge')
    expect(permits.map((t) => t.status)).toEqual(['succeeded'])
    expect(charges.filter((t) => t.status === 'succeeded')).toHaveLength(12)
    expect(new Set(charges.map((t) => t.hash))).toEqual(new Set(payments.map((p) => p.tx_id)))
    for (const { hash } of permits)
      gas.permit.push((await env.publicClient.getTransactionReceipt({ hash: hash as Hash })).gasUsed)
    for (const { hash } of charges)
      gas.charge.push((await env.publicClient.getTransactionReceipt({ hash: hash as Hash })).gasUsed)
    // Each period settles to the merchant like any payment: the destination holds the year's charges.
    for (const id of ids) await env.waitSettled(id)
    expect(await env.balance(env.merchant.destination)).toBe(12n * price)
    // Booked in the ledger like any collection: each period once, for its price, to the merchant.
    const collected = await env.t.db
      .selectFrom('ledger_entries')
      .select(['payment_id', 'amount', 'credit_owner'])
      .where('payment_id', 'in', ids)
      .where('credit_kind', '=', 'collected')
      .execute()
    expect(collected.map((e) => e.payment_id).sort()).toEqual([...ids].sort())
    expect(collected.every((e) => e.amount === String(price) && e.credit_owner === env.merchant.id)).toBe(
      true,
    )
    // The mandate is used up exactly: Permit2 holds nothing more for the executor.
    const [left] = await env.publicClient.readContract({
      address: permit2Address,
      abi: permit2AllowanceAbi,
      functionName: 'allowance',
      args: [buyer.address, env.token, env.collection],
    })
    expect(left).toBe(0n)
  }, 240_000)

  it("is cancelled when the buyer's wallet revokes the mandate (revokeMandate), and charges nothing more", async () => {
    const buyer = await newBuyer(usdc(100))
    const { subscriptionId } = await subscribe(buyer)
    const [granted] = await buyer.mandates.listMandates()
    expect(granted).toMatchObject({ status: 'live', counted: 12n * price })
    const revokedBy = await buyer.mandates.revokeMandate(granted!.id)
    expect((await env.publicClient.getTransactionReceipt({ hash: revokedBy as Hash })).status).toBe('success')
    expect((await buyer.mandates.listMandates())[0]).toMatchObject({ status: 'ended', counted: 0n })
    const before = await env.balance(buyer.address)
    const row = await nextAttempt(subscriptionId)
    expect(row).toMatchObject({ status: 'cancelled', cancel_reason: 'mandate_revoked', periods_charged: 1 })
    expect(await env.balance(buyer.address)).toBe(before)
    const payments = await periodPayments(env.t, subscriptionId)
    expect(payments.map((p) => p.status)).toEqual(['succeeded', 'failed'])
    expect(await executorTransactions([payments[1]!.id], 'charge')).toEqual([])
  }, 120_000)

  it('is cancelled when the buyer locks Permit2 down for the token and spender (lockdown)', async () => {
    const buyer = await newBuyer(usdc(100))
    const { subscriptionId } = await subscribe(buyer)
    const wallet = createWalletClient({
      account: privateKeyToAccount(buyer.key),
      chain: anvilChain(env.anvil.chainId, env.anvil.rpcUrl),
      transport: http(env.anvil.rpcUrl),
    })
    const hash = await wallet.writeContract({
      address: permit2Address,
      abi: permit2AllowanceAbi,
      functionName: 'lockdown',
      args: [[{ token: env.token, spender: env.collection }]],
    })
    await env.publicClient.waitForTransactionReceipt({ hash })
    const before = await env.balance(buyer.address)
    const row = await nextAttempt(subscriptionId)
    expect(row).toMatchObject({ status: 'cancelled', cancel_reason: 'mandate_revoked', periods_charged: 1 })
    expect(await env.balance(buyer.address)).toBe(before)
  }, 120_000)

  it("stops on the merchant's cancel: nothing is charged when the next period falls due", async () => {
    const buyer = await newBuyer(usdc(100))
    const { subscriptionId } = await subscribe(buyer)
    const res = await env.t.request({
      method: 'POST',
      url: `/v1/subscriptions/${subscriptionId}/cancel`,
      headers: headers(env.liveKey, env.merchant.id),
    })
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toMatchObject({ status: 'cancelled', cancelReason: 'cancelled_by_merchant' })
    const before = await env.balance(buyer.address)
    await advanceTo(new Date(env.t.app.now().getTime() + 32 * 86_400_000))
    expect(await chargeDue(env.t)).toBe(0)
    expect(await env.balance(buyer.address)).toBe(before)
    expect(await periodPayments(env.t, subscriptionId)).toHaveLength(1)
  }, 120_000)

  it("leaves a period's armed charge to its job on the merchant's cancel: unsigned, it fails; sent, it is booked", async () => {
    const cancel = (subscriptionId: string) =>
      env.t.request({
        method: 'POST',
        url: `/v1/subscriptions/${subscriptionId}/cancel`,
        headers: headers(env.liveKey, env.merchant.id),
      })
    const paymentStatus = async (id: string) =>
      (await env.t.db.selectFrom('payments').select('status').where('id', '=', id).executeTakeFirstOrThrow())
        .status
    const unsigned = await newBuyer(usdc(100))
    const signed = await newBuyer(usdc(100))
    const a = (await subscribe(unsigned)).subscriptionId
    const b = (await subscribe(signed)).subscriptionId
    await runner.stop()
    const [beforeA, beforeB] = [await env.balance(unsigned.address), await env.balance(signed.address)]
    await advanceTo((await subscriptionRow(a)).next_attempt_at!)
    await rpc('evm_setAutomine', [false])
    await chargeDue(env.t)
    const [, periodA] = await periodPayments(env.t, a)
    const [, periodB] = await periodPayments(env.t, b)
    // A: cancelled with its charge armed and nothing signed; the cancel leaves the payment to the job.
    expect((await cancel(a)).statusCode).toBe(200)
    expect(await paymentStatus(periodA!.id)).toBe('processing')
    // B: its charge signed and sent (held in the pool), then cancelled.
    runner = startRunner()
    await until(
      async () => (await executorTransactions([periodB!.id], 'charge')).length > 0,
      'B recorded',
      20_000,
    )
    expect((await cancel(b)).statusCode).toBe(200)
    await rpc('evm_setAutomine', [true])
    await rpc('evm_mine')
    await until(async () => (await paymentStatus(periodA!.id)) === 'failed', 'A failed', 20_000)
    await until(async () => (await paymentStatus(periodB!.id)) === 'succeeded', 'B succeeded', 20_000)
    expect(await executorTransactions([periodA!.id], 'charge')).toEqual([])
    expect(await env.balance(unsigned.address)).toBe(beforeA)
    expect(await env.balance(signed.address)).toBe(beforeB - price)
    const booked = await env.t.db
      .selectFrom('ledger_entries')
      .select('payment_id')
      .where('payment_id', 'in', [periodA!.id, periodB!.id])
      .execute()
    expect(new Set(booked.map((entry) => entry.payment_id))).toEqual(new Set([periodB!.id]))
    for (const id of [a, b]) expect((await subscriptionRow(id)).status).toBe('cancelled')
  }, 120_000)

  it("waits out a node behind the newest block at a charge's last try: the period is neither failed nor dunned", async () => {
    const buyer = await newBuyer(usdc(100))
    const { subscriptionId } = await subscribe(buyer)
    await runner.stop()
    const before = await env.balance(buyer.address)
    const { period } = await secondPeriodDue(env.t, subscriptionId, advanceTo)
    // This process has seen a block its node has not (another node of the chain answered it): every
    // node it can ask is behind that block, as a lagging replica is.
    const chain = env.t.app.liveChains.evm[0]!
    const head = await env.publicClient.getBlockNumber({ cacheTime: 0 })
    chain.nodes.observe(head + 3n)
    const job = await chargeAtLastTry(env.t, period.id, 'evm.mandate_charge')
    runner = startRunner()
    const tried = await job.tried('the charge tried against the lagging node')
    expect(tried.state).toBe('pending')
    expect(tried.last_error).toMatch(/No node answered at block/)
    expect((await subscriptionRow(subscriptionId)).status).toBe('active')
    const [, waiting] = await periodPayments(env.t, subscriptionId)
    expect(waiting!.status).toBe('processing')
    expect(await env.balance(buyer.address)).toBe(before)

    // The node catches up: the charge goes, once.
    await rpc('anvil_mine', ['0x3'])
    await env.t.db.updateTable('jobs').set({ run_at: env.t.app.now() }).where('id', '=', job.id).execute()
    await until(
      async () => (await subscriptionRow(subscriptionId)).periods_charged === 2,
      'the period charged from a current node',
      20_000,
    )
    expect(await env.balance(buyer.address)).toBe(before - price)
    expect((await executorTransactions([period.id], 'charge')).map((t) => t.status)).toEqual(['succeeded'])
  }, 120_000)

  it('charges a period once when its worker dies between sending the charge and its receipt', async () => {
    const buyer = await newBuyer(usdc(100))
    const { subscriptionId } = await subscribe(buyer)
    await runner.stop()
    const before = await env.balance(buyer.address)
    // Automine off keeps the charge in flight while its worker goes away.
    await rpc('evm_setAutomine', [false])
    const { period } = await secondPeriodDue(env.t, subscriptionId, advanceTo)
    const first = startRunner()
    await until(
      async () => (await executorTransactions([period.id], 'charge')).length > 0,
      'a recorded charge',
      20_000,
    )
    await first.stop()
    // What a worker killed mid-step leaves: its claim, with the lease run out.
    await env.t.db
      .updateTable('jobs')
      .set({ state: 'running', locked_until: new Date(env.t.app.now().getTime() - 1000) })
      .where('payment_id', '=', period.id)
      .execute()
    await rpc('evm_setAutomine', [true])
    await rpc('evm_mine')
    runner = startRunner()
    await until(
      async () => (await subscriptionRow(subscriptionId)).periods_charged === 2,
      'the period charged after the restart',
      20_000,
    )
    expect(await env.balance(buyer.address)).toBe(before - price)
    const charges = await executorTransactions([period.id], 'charge')
    expect(charges.map((t) => t.status)).toEqual(['succeeded'])
    const job = await env.waitJob(period.id, 'evm.mandate_charge')
    expect(job.attempts).toBeGreaterThanOrEqual(2)
    // Permit2 keeps one allowance per (buyer, token, spender): no second mandate in the same token.
    const second = await createSubscription('500', 'week', 4)
    const options = await env.gw('POST', second.firstPaymentId, '/options', {
      accounts: [`${env.anvil.caip2}:${buyer.address}`],
    })
    expect(options.statusCode, options.body).toBe(200)
    expect(options.json.options).toEqual([])
  }, 120_000)
})
