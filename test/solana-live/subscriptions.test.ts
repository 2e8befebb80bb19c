import { createRevokeInstruction, getAccount } from '@solana/spl-token'
import { type Keypair, sendAndConfirmTransaction, Transaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaSigner } from '../../adapters/solana/index.js'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { reconcileSolanaChain } from '../../src/server/chains/solana/ledger.js'
import { FenceLost } from '../../src/server/jobs/fence.js'
import { claimJobs } from '../../src/server/jobs/queue.js'
import type { JobRunner } from '../../src/server/jobs/runner.js'
import { listDifferences } from '../../src/server/ledger/reconcile.js'
import { airdrop } from '../solana/index.js'
import { nodeBehind } from '../solana/nodeBehind.js'
import { chargeAtLastTry, chargeDue, periodPayments, secondPeriodDue } from '../subscriptions/liveCharges.js'
import { paymentRow, type SolanaLive, startSolanaLive, tokenAccount, until } from './live.js'

// Issue 41, live on the local Solana RPC: the buyer's wallet signs an SPL ApproveChecked of price x 12
// to the service key once; each month the service charges the period with a delegated transferChecked.
// The app's clock and LiteSVM's clock sysvar move together through a year.

/** 9.99 USD a month in a 6-decimal USD token. */
const price = 9_990_000n
const dayMs = 86_400_000

let live: SolanaLive
let runner: JobRunner | undefined

beforeAll(async () => {
  live = await startSolanaLive()
  runner = live.startRunner()
}, 60_000)

afterAll(async () => {
  await runner?.stop()
  await live?.close()
})

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies, checked by assertions
type Json = any

async function api(method: 'GET' | 'POST', url: string, merchantId: string, payload?: object): Promise<Json> {
  const res = await live.t.request({
    method,
    url,
    headers: { 'api-key': live.liveKey, 'merchant-id': merchantId },
    ...(payload ? { payload: payload as Record<string, unknown> } : {}),
  })
  expect(res.statusCode, res.body).toBeLessThan(300)
  return res.json
}

let reference = 0
async function subscribe(merchantId: string, periods = 12): Promise<Json> {
  reference += 1
  return api('POST', '/v1/subscriptions', merchantId, {
    referenceId: `plan-${reference}`,
    amount: { unit: 'iso4217/USD', value: '999' },
    interval: 'month',
    periods,
  })
}

const getSubscription = (id: string, merchantId: string) => api('GET', `/v1/subscriptions/${id}`, merchantId)

/** The buyer's wallet opens the link, checks the mandate against the terms, signs, and confirms. */
async function grant(buyer: Keypair, subscription: Json): Promise<{ terms: PaymentOption['subscription'] }> {
  const paymentId = subscription.firstPaymentId
  const options = await live.gateway(paymentId, 'options', {
    accounts: [`${live.caip2}:${buyer.publicKey.toBase58()}`],
  })
  expect(options.statusCode, options.body).toBe(200)
  const option: PaymentOption = options.json.options[0]
  expect(option.subscription).toMatchObject({
    asset: live.asset,
    amountPerPeriod: price.toString(),
    periods: subscription.periods,
    spender: `${live.caip2}:${live.service.publicKey.toBase58()}`,
  })
  const fetched = await live.gateway(paymentId, 'fetch', {
    optionId: option.id,
    data: (option.actions[0] as { build: { data: string } }).build.data,
  })
  expect(fetched.statusCode, fetched.body).toBe(200)
  const signer = solanaSigner({
    keypair: buyer,
    chains: [live.caip2],
    delegates: [option.subscription!.spender],
  })
  const { walletRpc } = fetched.json.actions[0]
  const signed = await signer.request({
    chainId: walletRpc.chainId,
    method: walletRpc.method,
    params: JSON.parse(walletRpc.params),
    subscription: option.subscription!,
  })
  const confirmed = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
  expect(confirmed.statusCode, confirmed.body).toBe(200)
  expect(confirmed.json.status).toBe('processing')
  return { terms: option.subscription }
}

/**
 * The app's clock and the cluster's clock sysvar, moved together to the second after `unixSeconds` (a
 * due date in whole seconds is up to a second before the instant it stands for).
 */
function moveClocks(unixSeconds: number) {
  const ahead = (unixSeconds + 1) * 1000 - live.t.app.now().getTime()
  if (ahead > 0) live.t.advanceTime(ahead)
  live.validator.setClock!(Math.floor(live.t.app.now().getTime() / 1000))
}

async function settledSubscription(id: string, merchantId: string, done: (s: Json) => boolean) {
  let last: Json
  await until(
    async () => {
      last = await getSubscription(id, merchantId)
      return done(last)
    },
    `subscription ${id} to move on`,
    20_000,
  )
  return last
}

/** A new merchant's monthly subscription, granted by a buyer holding `funds`: active, its first period charged. */
async function activeSubscription(funds: bigint) {
  const merchantId = await live.createMerchant()
  const buyer = await live.newBuyer(funds)
  const sub = await subscribe(merchantId)
  await grant(buyer, sub)
  const active = await settledSubscription(sub.subscriptionId, merchantId, (s) => s.status === 'active')
  return { merchantId, buyer, sub, active }
}

/**
 * The runner stopped, the subscription's second period due and its charge queued for the test to run: the
 * only charge due (every test before cancels or ends what it subscribed).
 */
async function secondPeriodQueued(subscriptionId: string) {
  await runner!.stop()
  runner = undefined
  const { period, started } = await secondPeriodDue(live.t, subscriptionId, (at) =>
    moveClocks(at.getTime() / 1000),
  )
  expect(started).toBe(1)
  return period
}

async function feeOf(signature: string): Promise<number> {
  const tx = await live.validator.connection.getTransaction(signature, {
    commitment: 'confirmed',
    maxSupportedTransactionVersion: 0,
  })
  return tx!.meta!.fee
}

describe('live Solana subscription (SPL delegation)', () => {
  it('charges 12 months over a year of clock time, exact on chain, through a past_due and its recovery', async () => {
    const merchantId = await live.createMerchant()
    // Enough for five months: the sixth finds the account short.
    const buyer = await live.newBuyer(price * 5n)
    const collected = await live.balance(live.service.publicKey)
    const sub = await subscribe(merchantId)
    await grant(buyer, sub)
    const active = await settledSubscription(sub.subscriptionId, merchantId, (s) => s.status === 'active')
    expect(active.periodsCharged).toBe(1)
    const delegated = await getAccount(live.validator.connection, tokenAccount(live, buyer.publicKey))
    expect(delegated.delegate?.toBase58()).toBe(live.service.publicKey.toBase58())
    expect(delegated.delegatedAmount).toBe(price * 11n)
    expect(await live.balance(buyer.publicKey)).toBe(price * 4n)

    let balance = price * 4n
    let current = active
    let sawPastDue = false
    while (current.status !== 'ended') {
      moveClocks(current.nextChargeAt)
      const charged = current.periodsCharged
      await chargeDue(live.t)
      current = await settledSubscription(
        sub.subscriptionId,
        merchantId,
        (s) => s.periodsCharged > charged || s.status === 'past_due' || s.status === 'cancelled',
      )
      if (current.status === 'past_due') {
        // Month six: nothing moved, the period waits for its retry a day later.
        sawPastDue = true
        expect(charged).toBe(5)
        expect(await live.balance(buyer.publicKey)).toBe(0n)
        // A new blockhash: the harness's mint repeats the first one's instructions (nothing is in flight).
        await live.validator.expireBlockhash()
        await live.mintTo(buyer.publicKey, price * 7n)
        balance = price * 7n
        moveClocks(Math.floor(live.t.app.now().getTime() / 1000) + dayMs / 1000)
        await chargeDue(live.t)
        current = await settledSubscription(sub.subscriptionId, merchantId, (s) => s.periodsCharged > charged)
        expect(current.status === 'active' || current.status === 'ended').toBe(true)
      }
      balance -= price
      expect(await live.balance(buyer.publicKey), `after period ${charged}`).toBe(balance)
    }
    expect(sawPastDue).toBe(true)
    // The cluster lived the same year: its clock sysvar is the app's time (both run on from there).
    const clock = Number(live.validator.svm!.getClock().unixTimestamp)
    expect(Math.abs(clock - live.t.app.now().getTime() / 1000)).toBeLessThan(5)
    expect(clock - active.startAt).toBeGreaterThan(330 * 86_400)
    expect(current.periodsCharged).toBe(12)
    expect(await live.balance(buyer.publicKey)).toBe(0n)
    expect((await live.balance(live.service.publicKey)) - collected).toBe(price * 12n)
    // The delegation is used up: SPL clears the delegate with the last unit.
    const spent = await getAccount(live.validator.connection, tokenAccount(live, buyer.publicKey))
    expect(spent.delegatedAmount).toBe(0n)
    expect(spent.delegate).toBeNull()

    const payments = await periodPayments(live.t, sub.subscriptionId)
    expect(payments.map((p) => [p.period, p.status, p.source])).toEqual(
      Array.from({ length: 12 }, (_, period) => [period, 'succeeded', 'mandate']),
    )
    // Every charge is one transaction moving exactly the price, and booked in the ledger.
    const fees: number[] = []
    for (const p of payments) {
      const tx = await live.validator.connection.getTransaction(p.tx_id!, {
        commitment: 'confirmed',
        maxSupportedTransactionVersion: 0,
      })
      const owner = buyer.publicKey.toBase58()
      const pre = tx!.meta!.preTokenBalances!.find((b) => b.owner === owner)!
      const post = tx!.meta!.postTokenBalances!.find((b) => b.owner === owner)!
      expect(BigInt(pre.uiTokenAmount.amount) - BigInt(post.uiTokenAmount.amount)).toBe(price)
      fees.push(tx!.meta!.fee)
      const entries = await live.t.db
        .selectFrom('ledger_entries')
        .select(['flow', 'amount'])
        .where('payment_id', '=', p.id)
        .execute()
      expect(entries.length, `ledger of period ${p.period}`).toBeGreaterThan(0)
    }
    // The collection account holds what the ledger says: no charge is taken for an unexplained top-up.
    await reconcileSolanaChain(live.t.db, live.t.app.liveChains.solana[0]!)
    expect(await listDifferences(live.t.db, { open: true })).toEqual([])
    const topUps = await live.t.db
      .selectFrom('ledger_entries')
      .select('id')
      .where('debit_kind', '=', 'world')
      .where('credit_kind', '=', 'unallocated')
      .execute()
    expect(topUps).toEqual([])
    const approval = await live.t.db
      .selectFrom('solana_transactions')
      .select('signature')
      .where('payment_id', '=', sub.firstPaymentId)
      .where('purpose', '=', 'mandate')
      .executeTakeFirstOrThrow()
    const approvalFee = await feeOf(approval.signature)
    const year = fees.reduce((a, b) => a + b, approvalFee)
    console.info(
      `Solana subscription fees (lamports, service-paid): approval ${approvalFee}, charges ${fees.join(', ')}, a year ${year}`,
    )
    expect(fees.every((fee) => fee === 5_000)).toBe(true)
  }, 120_000)

  it('a wallet that has not allow-listed the charging key signs nothing', async () => {
    const merchantId = await live.createMerchant()
    const buyer = await live.newBuyer(price * 12n)
    const sub = await subscribe(merchantId)
    const options = await live.gateway(sub.firstPaymentId, 'options', {
      accounts: [`${live.caip2}:${buyer.publicKey.toBase58()}`],
    })
    const option: PaymentOption = options.json.options[0]
    const fetched = await live.gateway(sub.firstPaymentId, 'fetch', {
      optionId: option.id,
      data: (option.actions[0] as { build: { data: string } }).build.data,
    })
    const { walletRpc } = fetched.json.actions[0]
    const request = {
      chainId: walletRpc.chainId,
      method: walletRpc.method,
      params: JSON.parse(walletRpc.params),
      subscription: option.subscription!,
    }
    const stranger = solanaSigner({ keypair: buyer, chains: [live.caip2], delegates: [] })
    await expect(stranger.request(request)).rejects.toMatchObject({
      code: 'action_rejected',
      context: { rule: 'mandate_delegate_not_allowed' },
    })
    // Outside a subscription's terms the same delegation is no mandate at all.
    const { subscription: _terms, ...plain } = request
    const trusting = solanaSigner({
      keypair: buyer,
      chains: [live.caip2],
      delegates: [option.subscription!.spender],
    })
    await expect(trusting.request(plain)).rejects.toMatchObject({ code: 'action_rejected' })
  })

  it('a Revoke seen on chain cancels the subscription, and nothing more is charged', async () => {
    const { merchantId, buyer, sub, active } = await activeSubscription(price * 12n)
    await airdrop(live.validator.connection, buyer.publicKey)
    const revoke = new Transaction().add(
      createRevokeInstruction(tokenAccount(live, buyer.publicKey), buyer.publicKey),
    )
    await sendAndConfirmTransaction(live.validator.connection, revoke, [buyer], { commitment: 'confirmed' })
    const left = await live.balance(buyer.publicKey)

    moveClocks(active.nextChargeAt)
    await chargeDue(live.t)
    const cancelled = await settledSubscription(
      sub.subscriptionId,
      merchantId,
      (s) => s.status === 'cancelled',
    )
    expect(cancelled.cancelReason).toBe('mandate_revoked')
    const payments = await periodPayments(live.t, sub.subscriptionId)
    expect(payments.map((p) => [p.status, p.failure_code])).toEqual([
      ['succeeded', null],
      ['failed', 'mandate_revoked'],
    ])
    moveClocks(active.nextChargeAt + 40 * 86_400)
    await chargeDue(live.t)
    expect(await periodPayments(live.t, sub.subscriptionId)).toHaveLength(2)
    expect(await live.balance(buyer.publicKey)).toBe(left)
  }, 60_000)

  it("a merchant's cancel stops the charges", async () => {
    const { merchantId, buyer, sub, active } = await activeSubscription(price * 12n)
    const cancelled = await api('POST', `/v1/subscriptions/${sub.subscriptionId}/cancel`, merchantId)
    expect(cancelled).toMatchObject({ status: 'cancelled', cancelReason: 'cancelled_by_merchant' })
    const left = await live.balance(buyer.publicKey)
    moveClocks(active.nextChargeAt + 86_400)
    await chargeDue(live.t)
    expect(await periodPayments(live.t, sub.subscriptionId)).toHaveLength(1)
    expect(await live.balance(buyer.publicKey)).toBe(left)
  }, 60_000)

  it("a merchant's cancel while past due fails the period being retried", async () => {
    const { merchantId, sub, active } = await activeSubscription(price)
    moveClocks(active.nextChargeAt)
    await chargeDue(live.t)
    await settledSubscription(sub.subscriptionId, merchantId, (s) => s.status === 'past_due')
    const cancelled = await api('POST', `/v1/subscriptions/${sub.subscriptionId}/cancel`, merchantId)
    expect(cancelled).toMatchObject({ status: 'cancelled', cancelReason: 'cancelled_by_merchant' })
    const payments = await periodPayments(live.t, sub.subscriptionId)
    expect(payments.map((p) => [p.status, p.failure_code])).toEqual([
      ['succeeded', null],
      ['failed', 'subscription_cancelled'],
    ])
  }, 60_000)

  it("a node behind the newest slot at a charge's last try is waited out, not counted: charged once it catches up", async () => {
    const { merchantId, buyer, sub } = await activeSubscription(price * 12n)
    const before = await live.balance(buyer.publicKey)
    const period = await secondPeriodQueued(sub.subscriptionId)
    // The job's last try; every node it reaches is behind the newest slot seen.
    const job = await chargeAtLastTry(live.t, period.id, 'solana.mandate_charge')
    live.proxy.inject('getAccountInfo', nodeBehind(0))
    runner = live.startRunner()
    const tried = await job.tried('the charge tried against the node behind')
    expect(tried.state).toBe('pending')
    expect(tried.last_error).toMatch(/Minimum context slot/i)
    expect((await paymentRow(live, period.id)).status).toBe('processing')
    expect(await live.balance(buyer.publicKey)).toBe(before)

    live.proxy.clear('getAccountInfo')
    // The runner keeps the wall clock: due now.
    await live.t.db.updateTable('jobs').set({ run_at: new Date() }).where('id', '=', job.id).execute()
    const renewed = await settledSubscription(sub.subscriptionId, merchantId, (s) => s.periodsCharged === 2)
    expect(renewed.status).toBe('active')
    expect(await live.balance(buyer.publicKey)).toBe(before - price)
    // Nothing of it falls due in the next tests.
    await api('POST', `/v1/subscriptions/${sub.subscriptionId}/cancel`, merchantId)
  }, 60_000)

  it("a charge run whose claim was taken over books no verdict: the holder's decision stands", async () => {
    // The first period only: the second finds the account empty ('insufficient').
    const { merchantId, sub } = await activeSubscription(price)
    const period = await secondPeriodQueued(sub.subscriptionId)
    const kind = 'solana.mandate_charge'
    const claimedAt = new Date()
    const [job] = await claimJobs(live.t.db, { kinds: [kind], now: claimedAt, leaseMs: 1_000 })
    expect(job!.payment_id).toBe(period.id)
    // The first worker is paused inside its verdict read (a GC pause, a frozen VM) past its lease.
    live.proxy.hold('getAccountInfo')
    const silent = { info() {}, warn() {}, error() {} }
    const stale = live.t.app.jobHandlers[kind]!.run(job!, {
      db: live.t.db,
      signal: new AbortController().signal,
      log: silent,
      now: () => live.t.app.now(),
      fence: { jobId: job!.id, generation: job!.attempts },
      idle: (work) => work,
    })
    const outcome = stale.then(
      (value) => ({ value }),
      (error: unknown) => ({ error }),
    )
    await until(() => live.proxy.held() > 0, 'the verdict read to hang')
    // Another worker claims the job (attempts count up: the first claim's fence no longer holds).
    const [takeover] = await claimJobs(live.t.db, {
      kinds: [kind],
      now: new Date(claimedAt.getTime() + 60_000),
    })
    expect(takeover!.attempts).toBe(job!.attempts + 1)
    live.proxy.release('getAccountInfo')
    const result = await outcome
    expect(result).toMatchObject({ error: expect.any(FenceLost) })
    // Nothing booked from the stale run: the period is still the holder's to decide.
    expect((await paymentRow(live, period.id)).status).toBe('processing')
    const row = await getSubscription(sub.subscriptionId, merchantId)
    expect(row).toMatchObject({ status: 'active', periodsCharged: 1 })
    const dunned = await live.t.db
      .selectFrom('subscriptions')
      .select('failed_attempts')
      .where('id', '=', sub.subscriptionId)
      .executeTakeFirstOrThrow()
    expect(dunned.failed_attempts).toBe(0)
    runner = live.startRunner()
    await api('POST', `/v1/subscriptions/${sub.subscriptionId}/cancel`, merchantId)
  }, 60_000)

  it('a worker killed while its charge is on the chain: the next one finishes it, charged once', async () => {
    const { merchantId, buyer, sub } = await activeSubscription(price * 12n)
    const before = await live.balance(buyer.publicKey)
    const period = await secondPeriodQueued(sub.subscriptionId)

    const sends = live.proxy.calls('sendTransaction')
    const executed = live.executed()
    // The node stops answering status queries: the first worker sends, then waits in vain and is killed.
    live.proxy.hold('getSignatureStatuses')
    const first = live.startRunner({ leaseMs: 1_000 })
    await until(() => live.proxy.calls('sendTransaction') === sends + 1, 'the charge to be sent')
    await until(async () => (await live.balance(buyer.publicKey)) === before - price, 'the charge to land')
    await until(() => live.proxy.held() > 0, 'the status query to hang')
    const stopping = first.stop()
    live.proxy.cutHeld()
    await stopping
    expect((await paymentRow(live, period.id)).status).toBe('processing')

    live.proxy.release('getSignatureStatuses')
    runner = live.startRunner()
    const renewed = await settledSubscription(sub.subscriptionId, merchantId, (s) => s.periodsCharged === 2)
    expect(renewed.status).toBe('active')
    expect((await paymentRow(live, period.id)).status).toBe('succeeded')
    // Found on chain by its recorded signature: not built or sent again.
    expect(live.proxy.calls('sendTransaction')).toBe(sends + 1)
    expect(live.executed()).toBe(executed + 1)
    expect(await live.balance(buyer.publicKey)).toBe(before - price)
    const charges = await live.t.db
      .selectFrom('solana_transactions')
      .select('signature')
      .where('payment_id', '=', period.id)
      .execute()
    expect(charges).toHaveLength(1)
  }, 60_000)
})
