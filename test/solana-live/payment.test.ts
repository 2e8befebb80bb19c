import { createPrivateKey, sign as ed25519Sign } from 'node:crypto'
import { TOKEN_PROGRAM_ID } from '@solana/spl-token'
import { Keypair, Transaction } from '@solana/web3.js'
import { generatePrivateKey, privateKeyToAccount } from 'viem/accounts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { evmSigner } from '../../adapters/evm/evmSigner.js'
import { decodeSolanaTransaction } from '../../protocol/solana/index.js'
import type { PaymentOption, WalletRpcAction } from '../../src/contract/gateway.js'
import { relayGuardSettings } from '../../src/server/payments/relayGuards.js'
import { statementsOf } from '../gateway/support.js'
import { buyerSigner, type SolanaLive, sign, startSolanaLive } from './live.js'

const amount = 12_500_000n // USD 12.50 at 1:1, 6 decimals

let live: SolanaLive

beforeAll(async () => {
  live = await startSolanaLive()
  live.startRunner()
})

afterAll(async () => {
  await live?.close()
})

describe('live Solana payment', () => {
  it('pays through the gateway, broadcasts once and settles to the merchant', async () => {
    const buyer = await live.newBuyer()
    const merchantOwner = Keypair.generate()
    const merchantId = await live.createMerchant(merchantOwner.publicKey)
    const { paymentId } = await live.createPayment(merchantId)
    const account = `${live.caip2}:${buyer.publicKey.toBase58()}`
    const before = {
      buyer: await live.balance(buyer.publicKey),
      collection: await live.balance(live.service.publicKey),
      merchant: await live.balance(merchantOwner.publicKey),
    }

    const options = await live.gateway(paymentId, 'options', { accounts: [account] })
    expect(options.statusCode, options.body).toBe(200)
    // The pull option for the buyer's account, then the push option any wallet can pay.
    expect(options.json.options.map((o: { source?: string }) => o.source ?? 'pull')).toEqual(['pull', 'push'])
    const option = options.json.options[0]
    expect(option).toMatchObject({
      account,
      amount: { unit: `caip19/${live.asset}`, value: amount.toString() },
    })
    expect(option.actions).toEqual([{ type: 'build', build: { data: expect.any(String) } }])

    const fetched = await live.gateway(paymentId, 'fetch', {
      optionId: option.id,
      data: option.actions[0].build.data,
    })
    expect(fetched.statusCode, fetched.body).toBe(200)
    const [action] = fetched.json.actions
    expect(action.walletRpc).toMatchObject({ chainId: live.caip2, method: 'solana_signTransaction' })
    expect(JSON.parse(action.walletRpc.params)).toEqual([{ transaction: expect.any(String) }])

    const signed = await sign(buyerSigner(live, buyer), action)
    const confirmed = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
    expect(confirmed.statusCode, confirmed.body).toBe(200)
    expect(confirmed.json).toMatchObject({ status: 'processing', isFinal: false })

    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.settlement?.successful != null)
    expect(paid.status).toBe('succeeded')
    expect(paid.info.optionAmount).toMatchObject({ unit: `caip19/${live.asset}`, value: amount.toString() })
    expect(paid.settlement.successful.amount).toEqual({ unit: `caip19/${live.asset}` })

    const { connection } = live.validator
    const payment = await connection.getTransaction(paid.info.txId, { maxSupportedTransactionVersion: 0 })
    expect(payment?.meta?.err).toBeNull()
    const settlement = await connection.getTransaction(paid.settlement.successful.txId, {
      maxSupportedTransactionVersion: 0,
    })
    expect(settlement?.meta?.err).toBeNull()

    expect(await live.balance(buyer.publicKey)).toBe(before.buyer - amount)
    expect(await live.balance(live.service.publicKey)).toBe(before.collection)
    expect(await live.balance(merchantOwner.publicKey)).toBe(before.merchant + amount)
    // The collection token account (made at the cluster's first options call, for the push option),
    // the payment, the settlement.
    expect(live.proxy.calls('sendTransaction')).toBe(3)
  })
})

describe('live Solana confirm under the fee guards', () => {
  it("a confirm whose fee reservation does not fit the payer's budget: 429 rate_limited, the payment not moved, nothing recorded or reserved; then within budget it pays (one statement with fast paths on, a transaction off)", async () => {
    const { buyer, merchantId, paymentId, option, signed } = await signedTransfer()
    // The payer's budget all but spent by another payment's reservation: the confirm's read of the guards
    // passes (something is left), the reservation of this transaction's fee does not fit.
    const budget = relayGuardSettings(live.t.app.config).payerBudget(live.caip2)
    const now = new Date()
    const other = await live.t.db
      .insertInto('executor_gas_charges')
      .values({
        chain_id: live.caip2,
        credential_id: 'another-credential',
        payer: buyer.publicKey.toBase58(),
        payment_id: 'another-payment',
        state: 'reserved',
        amount: (budget - 1n).toString(),
        created_at: now,
        updated_at: now,
      })
      .returning('id')
      .executeTakeFirstOrThrow()
    const refused = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
    expect([refused.statusCode, refused.json.code], refused.body).toEqual([429, 'rate_limited'])
    expect(refused.json.message).toContain("This payer's executor fee budget")
    expect(await status(paymentId)).toBe('requires_action')
    const recorded = async () => ({
      transactions: await live.t.db
        .selectFrom('solana_transactions')
        .select('signature')
        .where('payment_id', '=', paymentId)
        .execute(),
      jobs: await live.t.db.selectFrom('jobs').select('kind').where('payment_id', '=', paymentId).execute(),
      reserved: await live.t.db
        .selectFrom('executor_gas_charges')
        .select('amount')
        .where('payment_id', '=', paymentId)
        .execute(),
    })
    expect(await recorded()).toEqual({ transactions: [], jobs: [], reserved: [] })

    await live.t.db.deleteFrom('executor_gas_charges').where('id', '=', other.id).execute()
    const { result: confirmed, statements } = await statementsOf(() =>
      live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] }),
    )
    expect(confirmed.statusCode, confirmed.body).toBe(200)
    const reservations = statements.filter((text) => text.includes('caipay_reserve_executor_fee'))
    expect(reservations).toHaveLength(1)
    if (live.t.app.fastPath.enabled) {
      // The move, its event, the record, the job, the wake-up and the reservation: one statement.
      expect(reservations[0]).toContain('caipay_reserve_executor_fee_or_raise')
      expect(reservations[0]).toMatch(/update "payments"/i)
      expect(statements.filter((text) => /^\s*(begin|commit)\b/i.test(text))).toEqual([])
    } else {
      expect(reservations[0]).not.toMatch(/update "payments"/i)
    }
    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status === 'succeeded')
    expect(paid.status).toBe('succeeded')
    expect((await recorded()).transactions).toHaveLength(1)
  })

  it('a cooled-down payer: 429 rate_limited with the same words both ways, nothing moved, recorded or reserved; fast paths on leave the guard read to the statement (no read of its own)', async () => {
    const { buyer, paymentId, option, signed } = await signedTransfer()
    const now = new Date()
    const until = new Date(now.getTime() + 3_600_000)
    await live.t.db
      .insertInto('payer_cooldowns')
      .values({
        chain_id: live.caip2,
        subject: buyer.publicKey.toBase58(),
        kind: 'address',
        until,
        reason: 'a test cooled it down',
        payment_id: 'another-payment',
        created_at: now,
      })
      .execute()
    const { result: refused, statements } = await statementsOf(() =>
      live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] }),
    )
    expect([refused.statusCode, refused.json.code], refused.body).toEqual([429, 'rate_limited'])
    expect(refused.json.message).toBe(
      `The payer ${buyer.publicKey.toBase58()} is refused until ${until.toISOString()}: a test cooled it down`,
    )
    const guardReads = statements.filter((text) => text.includes('payer_used'))
    expect(guardReads).toHaveLength(live.t.app.fastPath.enabled ? 0 : 1)
    expect(await status(paymentId)).toBe('requires_action')
    expect(
      await live.t.db
        .selectFrom('solana_transactions')
        .select('signature')
        .where('payment_id', '=', paymentId)
        .execute(),
    ).toEqual([])
    expect(
      await live.t.db
        .selectFrom('executor_gas_charges')
        .select('amount')
        .where('payment_id', '=', paymentId)
        .execute(),
    ).toEqual([])
  })
})

/** A new buyer's payment to a new merchant, its transfer option fetched and signed, not confirmed. */
async function signedTransfer() {
  const buyer = await live.newBuyer()
  const merchantId = await live.createMerchant(Keypair.generate().publicKey)
  const { paymentId } = await live.createPayment(merchantId)
  const { option, actions } = await fetchOption(paymentId, [`${live.caip2}:${buyer.publicKey.toBase58()}`])
  const signed = await sign(buyerSigner(live, buyer), actions[0]!)
  return { buyer, merchantId, paymentId, option, signed }
}

/** Options for `accounts`, the first of `kind` fetched: returns the option and its actions to sign. */
async function fetchOption(
  paymentId: string,
  accounts: string[],
  kind: 'transfer' | 'mixed' = 'transfer',
): Promise<{ option: PaymentOption; actions: WalletRpcAction[]; data: string }> {
  const options = await live.gateway(paymentId, 'options', { accounts })
  expect(options.statusCode, options.body).toBe(200)
  const option = (options.json.options as PaymentOption[]).find((o) =>
    kind === 'mixed' ? o.actions.length === 2 : o.actions.length === 1,
  )
  if (!option) throw new Error(`no ${kind} option: ${options.body}`)
  const build = option.actions.find((a) => a.type === 'build')
  if (build?.type !== 'build') throw new Error('the option has no build action')
  const fetched = await live.gateway(paymentId, 'fetch', { optionId: option.id, data: build.build.data })
  expect(fetched.statusCode, fetched.body).toBe(200)
  return { option, actions: fetched.json.actions, data: build.build.data }
}

function unsignedOf(action: WalletRpcAction): Buffer {
  return Buffer.from(JSON.parse(action.walletRpc.params)[0].transaction, 'base64')
}

/** An Ed25519 signature by `key` over `message`, as a wallet holding the wrong key would make. */
function signWith(key: Keypair, message: Uint8Array): Buffer {
  const jwk = {
    kty: 'OKP',
    crv: 'Ed25519',
    d: Buffer.from(key.secretKey.subarray(0, 32)).toString('base64url'),
    x: Buffer.from(key.secretKey.subarray(32)).toString('base64url'),
  }
  return ed25519Sign(null, message, createPrivateKey({ key: jwk, format: 'jwk' }))
}

async function status(paymentId: string): Promise<string> {
  const res = await live.t.request({
    method: 'GET',
    url: `/v1/gateway/payment/${paymentId}/status`,
    headers: { 'api-key': live.liveKey },
  })
  return res.json.status
}

describe('mixed-chain option (EVM attestation, then the Solana payment)', () => {
  it('is offered to a wallet with both accounts and succeeds with real signatures in order', async () => {
    const buyer = await live.newBuyer()
    const evmAccount = privateKeyToAccount(generatePrivateKey())
    const evm = evmSigner({ account: evmAccount, chains: { 'eip155:1': { rpcUrl: 'http://127.0.0.1:9' } } })
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const accounts = [`${live.caip2}:${buyer.publicKey.toBase58()}`, `eip155:1:${evmAccount.address}`]

    const listed = await live.gateway(paymentId, 'options', { accounts })
    const pulled = (listed.json.options as PaymentOption[]).filter((o) => o.source !== 'push')
    const shapes = pulled.map((o) =>
      o.actions.map((a) => (a.type === 'walletRpc' ? a.walletRpc.method : a.type)),
    )
    expect(shapes).toEqual([['build'], ['personal_sign', 'build']])
    const { option, actions } = await fetchOption(paymentId, accounts, 'mixed')
    expect(actions.map((a) => a.walletRpc.method)).toEqual(['personal_sign', 'solana_signTransaction'])
    const message = Buffer.from(JSON.parse(actions[0].walletRpc.params)[0].slice(2), 'hex').toString()
    expect(message).toContain(`caipay payment ${paymentId}`)

    const stranger = evmSigner({
      account: privateKeyToAccount(generatePrivateKey()),
      chains: { 'eip155:1': { rpcUrl: 'http://127.0.0.1:9' } },
    })
    const solana = await sign(buyerSigner(live, buyer), actions[1])
    // The attestation must come from the advertised EVM account: another key's signature is refused.
    const foreign = await stranger.request({
      chainId: 'eip155:1',
      method: 'personal_sign',
      params: [JSON.parse(actions[0].walletRpc.params)[0], (await stranger.accounts())[0]!.split(':')[2]],
    })
    const refused = await live.gateway(paymentId, 'confirm', {
      optionId: option.id,
      results: [foreign, solana],
    })
    expect(refused.statusCode).toBe(400)
    expect(refused.json).toMatchObject({ code: 'params_validation', issues: [{ path: 'results.0' }] })
    // Results out of order are refused by form (a Solana transaction where a signature belongs).
    const swapped = await live.gateway(paymentId, 'confirm', {
      optionId: option.id,
      results: [solana, await sign(evm, actions[0])],
    })
    expect(swapped.statusCode).toBe(400)

    const before = await live.balance(buyer.publicKey)
    const attestation = await sign(evm, actions[0])
    const confirmed = await live.gateway(paymentId, 'confirm', {
      optionId: option.id,
      results: [attestation, solana],
    })
    expect(confirmed.statusCode, confirmed.body).toBe(200)
    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
    expect(paid.status).toBe('succeeded')
    expect(paid.settlement).toBeNull()
    const landed = await live.validator.connection.getTransaction(paid.info.txId, {
      maxSupportedTransactionVersion: 0,
    })
    expect(landed?.meta?.err).toBeNull()
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)
  })
})

describe('what the service refuses', () => {
  it('refuses an altered message, a wrong key and replayed confirms, and moves nothing for them', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const account = `${live.caip2}:${buyer.publicKey.toBase58()}`
    const { option, actions } = await fetchOption(paymentId, [account])
    const start = {
      buyer: await live.balance(buyer.publicKey),
      collection: await live.balance(live.service.publicKey),
      sends: live.proxy.calls('sendTransaction'),
    }

    // Altered: the buyer signs a transfer of less than the service built.
    const altered = Transaction.from(unsignedOf(actions[0]))
    const transfer = altered.instructions.find((ix) => ix.programId.equals(TOKEN_PROGRAM_ID))!
    transfer.data.writeBigUInt64LE(1n, 1)
    altered.partialSign(buyer)
    const alteredResult = altered
      .serialize({ requireAllSignatures: false, verifySignatures: false })
      .toString('base64')
    const a = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [alteredResult] })
    expect(a.statusCode).toBe(400)
    expect(a.json).toMatchObject({ code: 'params_validation', issues: [{ path: 'results.0' }] })
    expect(a.json.message).toMatch(/not the transaction the service built/)

    // Wrong key: the built message, but the buyer's slot holds another key's signature.
    const decoded = decodeSolanaTransaction(unsignedOf(actions[0]))
    const wrong = Buffer.from(decoded.bytes)
    const slot = decoded.signers.indexOf(buyer.publicKey.toBase58())
    signWith(Keypair.generate(), decoded.messageBytes).copy(wrong, decoded.signatureOffset(slot))
    const w = await live.gateway(paymentId, 'confirm', {
      optionId: option.id,
      results: [wrong.toString('base64')],
    })
    expect(w.statusCode).toBe(400)
    expect(w.json).toMatchObject({ code: 'params_validation', issues: [{ path: 'results.0' }] })
    expect(w.json.message).toContain(buyer.publicKey.toBase58())

    // Unsigned by the buyer at all.
    const u = await live.gateway(paymentId, 'confirm', {
      optionId: option.id,
      results: [unsignedOf(actions[0]).toString('base64')],
    })
    expect(u.statusCode).toBe(400)

    expect(await status(paymentId)).toBe('requires_action')
    expect(live.proxy.calls('sendTransaction')).toBe(start.sends)

    // The genuine signature pays once.
    const signed = await sign(buyerSigner(live, buyer), actions[0])
    const ok = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
    expect(ok.statusCode, ok.body).toBe(200)
    // Replayed at once (before the job ran) and after the payment succeeded: the payment moved on.
    const early = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
    expect(early.statusCode).toBe(409)
    expect(early.json.code).toBe('invalid_state')
    await live.waitForPayment(paymentId, merchantId, (p) => p.status === 'succeeded')
    const late = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
    expect(late.statusCode).toBe(409)

    // The same signed transaction offered to another payment of the same buyer and amount.
    const other = await live.createPayment(merchantId)
    const second = await fetchOption(other.paymentId, [account])
    const r = await live.gateway(other.paymentId, 'confirm', {
      optionId: second.option.id,
      results: [signed],
    })
    expect(r.statusCode).toBe(400)
    expect(r.json.message).toMatch(/not the transaction the service built/)
    expect(await status(other.paymentId)).toBe('requires_action')

    expect(await live.balance(buyer.publicKey)).toBe(start.buyer - amount)
    expect(await live.balance(live.service.publicKey)).toBe(start.collection + amount)
    expect(live.proxy.calls('sendTransaction')).toBe(start.sends + 1)
  })

  it('offers nothing to an account whose balance does not cover the amount', async () => {
    const poor = await live.newBuyer(amount - 1n)
    const empty = Keypair.generate()
    const { paymentId } = await live.createPayment(await live.createMerchant())
    const res = await live.gateway(paymentId, 'options', {
      accounts: [`${live.caip2}:${poor.publicKey.toBase58()}`, `${live.caip2}:${empty.publicKey.toBase58()}`],
    })
    expect(res.statusCode, res.body).toBe(200)
    // Only the push option, which any wallet with the funds can send (no account can pay a pull option).
    expect(res.json.options.map((o: PaymentOption) => o.source)).toEqual(['push'])
  })
})

describe('blockhash expiry', () => {
  it('answers quote_expired at confirm, and a new fetch builds a fresh transaction that pays', async () => {
    const buyer = await live.newBuyer()
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const account = `${live.caip2}:${buyer.publicKey.toBase58()}`
    const signer = buyerSigner(live, buyer)
    const { option, actions, data } = await fetchOption(paymentId, [account])
    const stale = await sign(signer, actions[0])
    const before = await live.balance(buyer.publicKey)

    await live.validator.expireBlockhash()
    const expired = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [stale] })
    expect(expired.statusCode).toBe(422)
    expect(expired.json.code).toBe('quote_expired')
    expect(await status(paymentId)).toBe('requires_action')

    const again = await live.gateway(paymentId, 'fetch', { optionId: option.id, data })
    expect(again.statusCode, again.body).toBe(200)
    const fresh = decodeSolanaTransaction(unsignedOf(again.json.actions[0]))
    expect(fresh.recentBlockhash).not.toBe(decodeSolanaTransaction(unsignedOf(actions[0])).recentBlockhash)
    // The stale one is no longer what the service compares against.
    const stillStale = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [stale] })
    expect(stillStale.statusCode).toBe(400)

    const signed = await sign(signer, again.json.actions[0])
    const ok = await live.gateway(paymentId, 'confirm', { optionId: option.id, results: [signed] })
    expect(ok.statusCode, ok.body).toBe(200)
    const paid = await live.waitForPayment(paymentId, merchantId, (p) => p.status !== 'processing')
    expect(paid.status).toBe('succeeded')
    expect(await live.balance(buyer.publicKey)).toBe(before - amount)
  })
})
