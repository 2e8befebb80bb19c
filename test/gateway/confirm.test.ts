import { Keypair, Transaction, TransactionMessage, VersionedTransaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { PaymentOption } from '../../src/contract/gateway.js'
import { succeedPayment } from '../server/helpers.js'
import {
  type Buyer,
  buildData,
  createBuyer,
  createGatewayEnv,
  type GatewayEnv,
  isBaseOption,
  isMixedOption,
  isSolanaOption,
  pick,
} from './support.js'

let env: GatewayEnv
let buyer: Buyer
beforeAll(async () => {
  env = await createGatewayEnv()
  buyer = createBuyer()
})
afterAll(() => env.t.close())

async function options(paymentId: string, accounts = Object.values(buyer.accounts)) {
  const res = await env.gw('POST', paymentId, '/options', { accounts })
  expect(res.statusCode, res.body).toBe(200)
  return res.json.options as PaymentOption[]
}

function expectError(
  res: { statusCode: number; json: { code?: string; issues?: { path: string }[] } },
  status: number,
  code: string,
  path?: string,
) {
  expect([res.statusCode, res.json?.code], JSON.stringify(res.json)).toEqual([status, code])
  if (path) expect(res.json.issues?.[0]?.path).toBe(path)
}

describe('POST /v1/gateway/payment/:id/fetch (row 21)', () => {
  it('resolves a build action; a repeated fetch returns the very same transaction', async () => {
    const paymentId = await env.pay()
    const option = pick(await options(paymentId), isSolanaOption)
    const body = { optionId: option.id, data: buildData(option) }
    const first = await env.gw('POST', paymentId, '/fetch', body)
    const second = await env.gw('POST', paymentId, '/fetch', body)
    expect(first.statusCode, first.body).toBe(200)
    expect(second.json).toEqual(first.json)
  })

  it('returns the actions of an option with nothing to build', async () => {
    const paymentId = await env.pay()
    const option = pick(await options(paymentId), isBaseOption)
    const res = await env.gw('POST', paymentId, '/fetch', { optionId: option.id, data: '' })
    expect(res.json.actions).toEqual(option.actions)
  })

  it("400 params_validation for an unknown option, another payment's option, or foreign build data", async () => {
    const paymentId = await env.pay()
    const option = pick(await options(paymentId), isSolanaOption)
    expectError(
      await env.gw('POST', paymentId, '/fetch', { optionId: 'opt_unknown', data: '' }),
      400,
      'params_validation',
      'body.optionId',
    )
    const other = await env.pay()
    expectError(
      await env.gw('POST', other, '/fetch', { optionId: option.id, data: buildData(option) }),
      400,
      'params_validation',
      'body.optionId',
    )
    expectError(
      await env.gw('POST', paymentId, '/fetch', { optionId: option.id, data: 'bld_forged' }),
      400,
      'params_validation',
      'body.data',
    )
  })

  it('422 quote_expired after the quote expiry', async () => {
    const paymentId = await env.pay()
    const option = pick(await options(paymentId), isSolanaOption)
    env.t.advanceTime(301_000)
    expectError(
      await env.gw('POST', paymentId, '/fetch', { optionId: option.id, data: buildData(option) }),
      422,
      'quote_expired',
    )
  })

  it('409 invalid_state once the payment is final', async () => {
    const paymentId = await env.pay()
    const option = pick(await options(paymentId), isBaseOption)
    await succeedPayment(env.t, paymentId)
    expectError(
      await env.gw('POST', paymentId, '/fetch', { optionId: option.id, data: '' }),
      409,
      'invalid_state',
    )
  })
})

describe('POST /v1/gateway/payment/:id/confirm (row 23)', () => {
  it('results must match the actions in number', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isMixedOption)
    expectError(
      await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [results[0]] }),
      400,
      'params_validation',
      'results',
    )
    expectError(
      await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [...results, results[0]] }),
      400,
      'params_validation',
      'results',
    )
  })

  it('rule 4: the EVM result first, then the Solana one; a swap names the first mismatch', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isMixedOption)
    const res = await env.gw('POST', paymentId, '/confirm', {
      optionId: option.id,
      results: [results[1], results[0]],
    })
    expectError(res, 400, 'params_validation', 'results.0')
    expect(res.json.message).toContain('personal_sign')
    expect((await env.gw('GET', paymentId, '/status')).json.status).toBe('requires_action')
  })

  it('each result has the form its method implies', async () => {
    const paymentId = await env.pay()
    const evm = await env.prepare(paymentId, buyer, isBaseOption)
    const confirm = (optionId: string, results: string[]) =>
      env.gw('POST', paymentId, '/confirm', { optionId, results })
    // typed data: a signature of whole hex bytes (any length a smart account needs, up to 16 KiB)
    for (const bad of [
      '0x',
      `0x${'a'.repeat(131)}`,
      'ab'.repeat(65),
      `0x${'zz'.repeat(65)}`,
      `0x${'ab'.repeat(16 * 1024 + 1)}`,
    ]) {
      expectError(await confirm(evm.option.id, [bad]), 400, 'params_validation', 'results.0')
    }
    const sol = await env.prepare(paymentId, buyer, isSolanaOption)
    // Solana: the complete signed transaction, base64, not the detached signature (64 bytes) nor hex
    const detached = Buffer.from(Keypair.generate().secretKey.slice(0, 64)).toString('base64')
    const payer = Keypair.generate()
    const v0 = new VersionedTransaction(
      new TransactionMessage({
        payerKey: payer.publicKey,
        recentBlockhash: payer.publicKey.toBase58(),
        instructions: [],
      }).compileToV0Message(),
    )
    v0.sign([payer])
    const otherKind = Buffer.from(v0.serialize()).toString('base64')
    for (const bad of [detached, `0x${'ab'.repeat(65)}`, 'not base64!', otherKind]) {
      expectError(await confirm(sol.option.id, [bad]), 400, 'params_validation', 'results.0')
    }
  })

  it('a Solana result must be the transaction the service built', async () => {
    const paymentId = await env.pay()
    const { option, actions } = await env.prepare(paymentId, buyer, isSolanaOption)
    const [{ transaction }] = JSON.parse(actions[0]!.walletRpc.params)
    const tx = Transaction.from(Buffer.from(transaction, 'base64'))
    tx.recentBlockhash = Keypair.generate().publicKey.toBase58()
    tx.signatures = tx.signatures.map((s) => ({ ...s, signature: null }))
    tx.partialSign(buyer.solana)
    const forged = tx.serialize({ requireAllSignatures: false }).toString('base64')
    const res = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: [forged] })
    expectError(res, 400, 'params_validation', 'results.0')
  })

  it('409 invalid_state when an option with a build action was never fetched', async () => {
    const paymentId = await env.pay()
    const option = pick(await options(paymentId), isSolanaOption)
    const other = await env.pay()
    const signed = (await env.prepare(other, buyer, isSolanaOption)).results
    expectError(
      await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results: signed }),
      409,
      'invalid_state',
    )
  })

  it('422 quote_expired after the quote expiry (the payment itself still payable)', async () => {
    const paymentId = await env.pay('100', 'iso4217/USD', { expiresAt: env.nowS() + 3600 })
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    env.t.advanceTime((option.expiresAt - env.nowS() + 1) * 1000)
    expectError(
      await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }),
      422,
      'quote_expired',
    )
    // A refresh gives a new quote for the same option, and that one confirms.
    const refreshed = await env.gw('POST', paymentId, '/options', {
      accounts: [buyer.accounts.base],
      refresh: [option.id],
    })
    const fresh = refreshed.json.options[0]
    const result = await buyer.sign(fresh.actions[0])
    const ok = await env.gw('POST', paymentId, '/confirm', { optionId: fresh.id, results: [result] })
    expect(ok.json.status, ok.body).toBe('succeeded')
  })

  it('410 payment_expired after the payment expiry; 409 invalid_state after success', async () => {
    const paymentId = await env.pay('100', 'iso4217/USD', { expiresAt: env.nowS() + 60 })
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    env.t.advanceTime(61_000)
    expectError(
      await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }),
      410,
      'payment_expired',
    )

    const done = await env.pay()
    const prepared = await env.prepare(done, buyer, isBaseOption)
    const body = { optionId: prepared.option.id, results: prepared.results }
    expect((await env.gw('POST', done, '/confirm', body)).json.status).toBe('succeeded')
    expectError(await env.gw('POST', done, '/confirm', body), 409, 'invalid_state')
  })

  it('400 params_validation for an unknown option', async () => {
    const paymentId = await env.pay()
    expectError(
      await env.gw('POST', paymentId, '/confirm', {
        optionId: 'opt_unknown',
        results: [`0x${'ab'.repeat(65)}`],
      }),
      400,
      'params_validation',
      'body.optionId',
    )
  })

  it('an Idempotency-Key replays the confirmation', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const headers = { 'idempotency-key': `confirm-${paymentId}` }
    const first = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }, headers)
    const again = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }, headers)
    expect(first.json.status).toBe('succeeded')
    expect(again.json).toEqual(first.json)
    expect(again.headers['idempotent-replayed']).toBe('true')
  })
})

describe("test mode's confirm as one statement, under an Idempotency-Key or none", () => {
  const events = async (paymentId: string) =>
    (
      await env.t.db
        .selectFrom('payment_events')
        .select('type')
        .where('payment_id', '=', paymentId)
        .orderBy('payment_state_version')
        .execute()
    ).map((e) => e.type)

  it('the same key with another body is 409 idempotency_conflict, and the payment moved once', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const headers = { 'idempotency-key': `confirm-other-${paymentId}` }
    const first = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }, headers)
    expect(first.json.status, first.body).toBe('succeeded')
    const other = await env.gw(
      'POST',
      paymentId,
      '/confirm',
      { optionId: option.id, results: [`0x${'cd'.repeat(65)}`] },
      headers,
    )
    expectError(other, 409, 'idempotency_conflict')
    expect(await events(paymentId)).toEqual(['payment.created', 'payment.processing', 'payment.succeeded'])
  })

  it('a refusal is the answer of its key, and nothing moved', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const headers = { 'idempotency-key': `confirm-refused-${paymentId}` }
    const wrong = { optionId: option.id, results: [...results, results[0]] }
    const refused = await env.gw('POST', paymentId, '/confirm', wrong, headers)
    expect(refused.statusCode, refused.body).toBe(400)
    const again = await env.gw('POST', paymentId, '/confirm', wrong, headers)
    expect([again.statusCode, again.json, again.headers['idempotent-replayed']]).toEqual([
      400,
      refused.json,
      'true',
    ])
    expect(await events(paymentId)).toEqual(['payment.created'])
  })

  it('a valid confirm under a key that already holds a refusal is 409 idempotency_conflict; nothing moves', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const headers = { 'idempotency-key': `confirm-after-refusal-${paymentId}` }
    const refused = await env.gw(
      'POST',
      paymentId,
      '/confirm',
      { optionId: option.id, results: [...results, results[0]] },
      headers,
    )
    expect(refused.statusCode, refused.body).toBe(400)
    // Every check passes for this body: only the key's stored answer keeps the statement from moving it.
    const valid = await env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }, headers)
    expectError(valid, 409, 'idempotency_conflict')
    expect(await events(paymentId)).toEqual(['payment.created'])
    const status = await env.gw('GET', paymentId, '/status')
    expect(status.json.status).toBe('requires_action')
  })

  it('20 confirms racing with one key: one success written, every other answer a replay of it or 409', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const headers = { 'idempotency-key': `confirm-race-${paymentId}` }
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }, headers),
      ),
    )
    const fresh = answers.filter(
      (r) => r.statusCode === 200 && r.headers['idempotent-replayed'] === undefined,
    )
    expect(fresh).toHaveLength(1)
    for (const r of answers) {
      if (r.statusCode === 200) expect(r.json).toEqual(fresh[0]!.json)
      else expectError(r, 409, 'idempotency_conflict')
    }
    expect(await events(paymentId)).toEqual(['payment.created', 'payment.processing', 'payment.succeeded'])
  })

  it('20 confirms racing with their own keys: one succeeds, each other key keeps its 409 invalid_state', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const key = (i: number) => ({ 'idempotency-key': `confirm-keys-${paymentId}-${i}` })
    const confirm = (i: number) =>
      env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }, key(i))
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => confirm(i)))
    const won = answers.flatMap((r, i) => (r.statusCode === 200 ? [i] : []))
    expect(won, answers.map((r) => r.body).join('\n')).toHaveLength(1)
    for (const [i, r] of answers.entries()) if (i !== won[0]) expectError(r, 409, 'invalid_state')
    const loser = won[0] === 0 ? 1 : 0
    const replay = await confirm(loser)
    expect([replay.statusCode, replay.json, replay.headers['idempotent-replayed']]).toEqual([
      409,
      answers[loser]!.json,
      'true',
    ])
    expect(await events(paymentId)).toEqual(['payment.created', 'payment.processing', 'payment.succeeded'])
  })

  it('without a key, of 20 racing confirms one succeeds and the rest are 409 invalid_state', async () => {
    const paymentId = await env.pay()
    const { option, results } = await env.prepare(paymentId, buyer, isBaseOption)
    const answers = await Promise.all(
      Array.from({ length: 20 }, () =>
        env.gw('POST', paymentId, '/confirm', { optionId: option.id, results }),
      ),
    )
    expect(answers.filter((r) => r.statusCode === 200)).toHaveLength(1)
    for (const r of answers) if (r.statusCode !== 200) expectError(r, 409, 'invalid_state')
    expect(await events(paymentId)).toEqual(['payment.created', 'payment.processing', 'payment.succeeded'])
  })
})

describe('POST /v1/gateway/payment/:id/cancel (row 22)', () => {
  it('cancels a waiting payment as cancelled_by_user; a second cancel is 409 invalid_state', async () => {
    const paymentId = await env.pay()
    const res = await env.gw('POST', paymentId, '/cancel')
    expect(res.statusCode, res.body).toBe(200)
    expect(res.json).toMatchObject({ paymentId, status: 'cancelled', cancelledReason: 'cancelled_by_user' })
    expect(new Date(res.json.cancelledAt).getTime()).not.toBeNaN()
    expectError(await env.gw('POST', paymentId, '/cancel'), 409, 'invalid_state')
    expect((await env.gw('GET', paymentId, '/status')).json).toEqual({
      status: 'cancelled',
      isFinal: true,
      pollInMs: null,
    })
  })

  it('409 invalid_state for a payment in flight or final', async () => {
    const paymentId = await env.pay()
    await succeedPayment(env.t, paymentId)
    expectError(await env.gw('POST', paymentId, '/cancel'), 409, 'invalid_state')
  })
})
