/**
 * caipay as the facilitator of an unmodified `@x402/hono` resource server on the Solana harness (litesvm
 * behind JSON-RPC), paid by the unmodified `@x402/fetch` client with `@x402/svm` pointed at the local RPC.
 */

import { createKeyPairSignerFromBytes } from '@solana/kit'
import {
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import { Keypair, Transaction } from '@solana/web3.js'
import { wrapFetchWithPayment, x402Client } from '@x402/fetch'
import { ExactSvmScheme as ExactSvmClient } from '@x402/svm/exact/client'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SolanaLive } from '../solana-live/live.js'
import { decodeHeader, facilitatorBody, facilitatorPost, startSolanaShop } from './support.js'

const price = 10_000n

let shop: Awaited<ReturnType<typeof startSolanaShop>>
let live: SolanaLive
let payTo: Keypair
let network: `${string}:${string}`

function requirements(overrides: Record<string, unknown> = {}) {
  return {
    scheme: 'exact',
    network,
    amount: price.toString(),
    asset: live.mint.toBase58(),
    payTo: payTo.publicKey.toBase58(),
    maxTimeoutSeconds: 60,
    extra: { feePayer: live.service.publicKey.toBase58() },
    ...overrides,
  }
}

async function clientScheme(buyer: Keypair) {
  return new ExactSvmClient(await createKeyPairSignerFromBytes(buyer.secretKey), {
    rpcUrl: live.validator.rpcUrl,
  })
}

/** A payload `buyer` signed for `signed` (what the x402 client builds), claimed for `requirements()`. */
async function payload(buyer: Keypair, signed: Record<string, unknown> = {}) {
  const created = await (await clientScheme(buyer)).createPaymentPayload(2, requirements(signed) as never)
  return { x402Version: 2, accepted: requirements(), payload: created.payload }
}

const post = facilitatorPost(
  () => live.t,
  () => live.liveKey,
)

beforeAll(async () => {
  shop = await startSolanaShop(price)
  ;({ live, network, payTo } = shop)
}, 60_000)

afterAll(() => shop?.close())

describe('caipay as the x402 facilitator on Solana', () => {
  it('lists exact on the cluster with the service as fee payer', async () => {
    const res = await live.t.request({ method: 'GET', url: '/x402/supported' })
    const feePayer = live.service.publicKey.toBase58()
    expect(res.json.kinds).toEqual([{ x402Version: 2, scheme: 'exact', network, extra: { feePayer } }])
    expect(res.json.signers['solana:*']).toEqual([feePayer])
  })

  it('the published client pays the published resource server; the fee payer pays only the fee', async () => {
    const buyer = await live.newBuyer(1_000_000n)
    const client = x402Client.fromConfig({
      schemes: [{ network, client: await clientScheme(buyer) }],
      spendControls: {
        allowedAssets: [{ network, asset: live.mint.toBase58(), maxAmountPerPayment: '1000000' }],
      },
    })
    const serviceLamports = await live.validator.connection.getBalance(live.service.publicKey)
    const res = await wrapFetchWithPayment(fetch, client)(`${shop.resource.url}/weather`)
    expect(res.status).toBe(200)
    const settled = decodeHeader(res.headers.get('PAYMENT-RESPONSE'))
    expect(settled).toMatchObject({ success: true, network, payer: buyer.publicKey.toBase58() })
    expect(await live.balance(buyer.publicKey)).toBe(1_000_000n - price)
    expect(await live.balance(payTo.publicKey)).toBe(1n + price)
    const spent = serviceLamports - (await live.validator.connection.getBalance(live.service.publicKey))
    expect(spent).toBeGreaterThan(0)
    expect(spent).toBeLessThanOrEqual(10_001)
    const record = await live.t.db
      .selectFrom('x402_payments')
      .innerJoin('payments', 'payments.id', 'x402_payments.payment_id')
      .select(['payments.status', 'payments.tx_id', 'payments.settlement_status'])
      .where('x402_payments.payer', '=', buyer.publicKey.toBase58())
      .executeTakeFirstOrThrow()
    expect(record).toEqual({ status: 'succeeded', tx_id: settled.transaction, settlement_status: null })
  })

  it('settled twice: once, the same signature', async () => {
    const buyer = await live.newBuyer(1_000_000n)
    const body = facilitatorBody(await payload(buyer), requirements() as never)
    const first = await post('settle', body)
    expect(first.json).toMatchObject({ success: true })
    const second = await post('settle', body)
    expect(second.json).toMatchObject({ success: true, transaction: first.json.transaction })
    expect(await live.balance(buyer.publicKey)).toBe(1_000_000n - price)
  })

  const refusals: [string, (buyer: Keypair) => Promise<unknown>, string][] = [
    [
      'underpaid',
      (b) => payload(b, { amount: (price - 1n).toString() }),
      'invalid_exact_svm_payload_amount_mismatch',
    ],
    [
      'paid to another owner',
      (b) => payload(b, { payTo: Keypair.generate().publicKey.toBase58() }),
      'invalid_exact_svm_payload_recipient_mismatch',
    ],
    [
      'the fee payer as the transfer authority',
      async () => {
        const service = live.service.publicKey
        const tx = new Transaction({
          feePayer: service,
          ...(await live.validator.connection.getLatestBlockhash()),
        }).add(
          createTransferCheckedInstruction(
            getAssociatedTokenAddressSync(live.mint, service),
            live.mint,
            getAssociatedTokenAddressSync(live.mint, payTo.publicKey),
            service,
            price,
            6,
            [],
            TOKEN_PROGRAM_ID,
          ),
        )
        const transaction = tx.serialize({ requireAllSignatures: false }).toString('base64')
        return { x402Version: 2, accepted: requirements(), payload: { transaction } }
      },
      'invalid_exact_svm_payload_transaction_fee_payer_transferring_funds',
    ],
  ]
  it.each(refusals)('%s: refused by verify and settle, nothing moved', async (_name, make, reason) => {
    const buyer = await live.newBuyer(1_000_000n)
    const body = facilitatorBody(await make(buyer), requirements() as never)
    const before = await live.executed()
    expect((await post('verify', body)).json).toMatchObject({ isValid: false, invalidReason: reason })
    expect((await post('settle', body)).json).toMatchObject({ success: false, errorReason: reason })
    expect(live.executed()).toBe(before)
    expect(await live.balance(buyer.publicKey)).toBe(1_000_000n)
  })

  it('no key: 401, nothing sent', async () => {
    const buyer = await live.newBuyer(1_000_000n)
    const before = live.executed()
    const res = await post('settle', facilitatorBody(await payload(buyer), requirements() as never), '')
    expect(res.statusCode).toBe(401)
    expect(live.executed()).toBe(before)
  })
})
