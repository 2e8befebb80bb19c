import { fetchTransaction, parseURL, type TransactionRequestURL } from '@solana/pay'
import {
  decodeTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_PROGRAM_ID,
} from '@solana/spl-token'
import { Keypair, LAMPORTS_PER_SOL } from '@solana/web3.js'
import { Ajv } from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { SolanaChain } from '../../src/server/chains/solana/chain.js'
import { scanPushPayments } from '../../src/server/chains/solana/push.js'
import { tokenAmountFor } from '../../src/server/gateway/quote.js'
import { airdrop, confirmSignature } from '../solana/index.js'
import { paymentRow, type SolanaLive, startSolanaLive } from './live.js'

/**
 * Solana Pay transaction requests on the litesvm cluster (docs/push-payments.md): the wallet side is
 * @solana/pay's own parseURL + fetchTransaction; the wallet signs and sends the transaction itself, and
 * the payment succeeds by the push scan, with the balances read from the chain.
 */
let live: SolanaLive
let chain: SolanaChain
/** Where the server listens (plain http on loopback). */
let listening: string
beforeAll(async () => {
  live = await startSolanaLive()
  chain = live.t.app.liveChains.solana[0]!
  listening = await live.t.app.listen({ host: '127.0.0.1', port: 0 })
  // What buyers reach: an https origin (TLS is the proxy's job) in front of the server.
  live.t.app.config.publicBaseUrl = listening.replace('http://', 'https://')
})
afterAll(() => live?.close())

// biome-ignore lint/suspicious/noExplicitAny: JSON bodies, checked by assertions
type Json = any

const due = 12_500_000n // USD 12.50 at 1:1, 6 decimals

async function pushOption(paymentId: string): Promise<Json> {
  const options = await live.gateway(paymentId, 'options', { accounts: [] })
  expect(options.statusCode, options.body).toBe(200)
  const [push] = options.json.options.filter((o: Json) => o.source === 'push')
  return push
}

/** The https link as the wallet parsed it, reached over the server's plain loopback port (no TLS here). */
function reachable(link: URL): string {
  return link.toString().replace(live.t.app.config.publicBaseUrl, listening)
}

const scan = () => scanPushPayments(live.t.db, chain, live.t.app.config, tokenAmountFor)

describe('Solana Pay transaction requests', () => {
  it('a wallet fetches the gateway transaction with fetchTransaction, signs and sends it, and the payment succeeds', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const option = await pushOption(paymentId)
    expect(option.push.transactionUrl).toBe(
      `solana:${live.t.app.config.publicBaseUrl}/v1/solana-pay/${paymentId}/${live.mint.toBase58()}`,
    )
    const { link } = parseURL(option.push.transactionUrl) as TransactionRequestURL
    expect(link.protocol).toBe('https:')

    const label = await fetch(reachable(link))
    expect(label.status).toBe(200)
    const labelJson = (await label.json()) as Json
    expect(labelJson.label).toBe('Solana Shop')
    expect(labelJson.icon).toBe(`${live.t.app.config.publicBaseUrl}/pay/${paymentId}/icon.svg`)
    const icon = await fetch(`${listening}/pay/${paymentId}/icon.svg`)
    expect(icon.headers.get('content-type')).toBe('image/svg+xml')
    expect(await icon.text()).toContain('>S</text>')

    const buyer = await live.newBuyer(100_000_000n)
    await airdrop(live.validator.connection, buyer.publicKey, LAMPORTS_PER_SOL)
    // Both answers are what the published document says (its schemas, compiled by Ajv).
    const doc = (await live.t.request({ method: 'GET', url: '/openapi.json' })).json
    const operations = doc.paths['/v1/solana-pay/{id}/{token}']
    const schemaOf = (op: Json) => op.responses['200'].content['application/json'].schema
    const ajv = new Ajv({ strict: false })
    expect(ajv.validate(schemaOf(operations.get), labelJson), ajv.errorsText()).toBe(true)
    const posted = await postAccount(paymentId, { account: buyer.publicKey.toBase58() })
    expect(posted.statusCode, posted.body).toBe(200)
    expect(ajv.validate(schemaOf(operations.post), posted.json), ajv.errorsText()).toBe(true)
    expect(
      ajv.validate(operations.post.requestBody.content['application/json'].schema, { account: 'x' }),
    ).toBe(false)

    const { connection } = live.validator
    const transaction = await fetchTransaction(connection, buyer.publicKey, reachable(link))

    // The gateway's transaction: the service pays the fee and has signed, the buyer's signature is
    // missing, the exact amount moves from the buyer's token account to the collection account, and the
    // payment's reference key rides on the transfer instruction.
    expect(transaction.feePayer?.toBase58()).toBe(live.service.publicKey.toBase58())
    expect(transaction.signatures.map((s) => [s.publicKey.toBase58(), s.signature !== null])).toEqual([
      [live.service.publicKey.toBase58(), true],
      [buyer.publicKey.toBase58(), false],
    ])
    const transfers = transaction.instructions.filter((i) => i.programId.equals(TOKEN_PROGRAM_ID))
    expect(transfers).toHaveLength(1)
    const decoded = decodeTransferCheckedInstruction(transfers[0]!)
    expect(decoded.data.amount).toBe(due)
    expect(decoded.keys.source.pubkey.toBase58()).toBe(
      getAssociatedTokenAddressSync(live.mint, buyer.publicKey).toBase58(),
    )
    expect(decoded.keys.destination.pubkey.toBase58()).toBe(
      getAssociatedTokenAddressSync(live.mint, live.service.publicKey).toBase58(),
    )
    expect(decoded.keys.multiSigners.map((k) => [k.pubkey.toBase58(), k.isSigner, k.isWritable])).toEqual([
      [option.push.reference, false, false],
    ])

    const serviceBefore = await live.balance(live.service.publicKey)
    const serviceLamports = await connection.getBalance(live.service.publicKey)
    const buyerLamports = await connection.getBalance(buyer.publicKey)
    transaction.partialSign(buyer)
    const signature = await connection.sendRawTransaction(transaction.serialize())
    await confirmSignature(connection, signature)
    const landed = await connection.getTransaction(signature, {
      commitment: 'confirmed',
      maxSupportedTransactionVersion: 0,
    })
    const scanStarted = performance.now()
    expect(await scan()).toEqual([{ kind: 'succeeded', received: due, excess: 0n }])
    const scanMs = Math.round(performance.now() - scanStarted)
    const succeededBy = await connection.getSlot('confirmed')
    console.info(
      `transaction request: transfer at slot ${landed!.slot}, succeeded by slot ${succeededBy} (one scan pass: ${scanMs} ms)`,
    )
    expect(succeededBy - landed!.slot).toBeLessThanOrEqual(1)

    const row = await paymentRow(live, paymentId)
    expect(row).toMatchObject({ status: 'succeeded', source: 'push', tx_id: signature })
    expect(row.buyer).toBe(`${live.caip2}:${buyer.publicKey.toBase58()}`)
    // Read from the chain: the tokens arrived, the service paid the fee, the buyer paid nothing in SOL.
    expect(await live.balance(live.service.publicKey)).toBe(serviceBefore + due)
    expect(await live.balance(buyer.publicKey)).toBe(100_000_000n - due)
    expect(await connection.getBalance(buyer.publicKey)).toBe(buyerLamports)
    expect(await connection.getBalance(live.service.publicKey)).toBe(serviceLamports - landed!.meta!.fee)

    // Paid: the link answers nothing more to sign.
    const again = await postAccount(paymentId, { account: buyer.publicKey.toBase58() })
    expect(again.statusCode, again.body).toBe(409)
    expect(again.json.code).toBe('invalid_state')
  })

  it('refuses hostile input with {code, message} 4xx, never a 500', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    await pushOption(paymentId)
    const valid = Keypair.generate().publicKey.toBase58()
    const bodies: unknown[] = [
      {},
      { account: 42 },
      { account: '' },
      { account: 'not base58 0OIl' },
      { account: '1'.repeat(44) }, // base58, but not 32 bytes
      { account: `${valid}${valid}` }, // base58, 64 bytes
      { account: 'z'.repeat(10_000) },
      { account: [valid] },
      [valid],
      null,
    ]
    for (const body of bodies) {
      const res = await postAccount(paymentId, body)
      expect(res.statusCode, `${JSON.stringify(body)?.slice(0, 60)}: ${res.body}`).toBe(400)
      expect(Object.keys(res.json)).toEqual(expect.arrayContaining(['code', 'message']))
      expect(['params_validation', 'invalid_params']).toContain(res.json.code)
    }
    const text = await live.t.request({
      method: 'POST',
      url: `/v1/solana-pay/${paymentId}/${live.mint.toBase58()}`,
      headers: { 'content-type': 'application/json' },
      payload: '{"account":',
    })
    expect(text.statusCode).toBe(400)
    expect(text.json.code).toBe('invalid_params')

    const unknownPayment = await postAccount('pay_doesNotExist', { account: valid })
    expect([unknownPayment.statusCode, unknownPayment.json.code]).toEqual([404, 'payment_not_found'])
    const otherMint = await live.t.request({
      method: 'POST',
      url: `/v1/solana-pay/${paymentId}/${valid}`,
      payload: { account: valid },
    })
    expect([otherMint.statusCode, otherMint.json.code]).toEqual([400, 'params_validation'])
    const unknownGet = await live.t.request({
      method: 'GET',
      url: `/v1/solana-pay/pay_doesNotExist/${live.mint.toBase58()}`,
    })
    expect([unknownGet.statusCode, unknownGet.json.code]).toEqual([404, 'payment_not_found'])

    // An expired payment: 410, nothing built.
    await live.t.db
      .updateTable('payments')
      .set({ expires_at: new Date(Date.now() - 1000) })
      .where('id', '=', paymentId)
      .execute()
    const expired = await postAccount(paymentId, { account: valid })
    expect([expired.statusCode, expired.json.code]).toEqual([410, 'payment_expired'])
  })

  it('is offered only behind https: wallets refuse any other link', async () => {
    const merchantId = await live.createMerchant()
    const { paymentId } = await live.createPayment(merchantId)
    const https = live.t.app.config.publicBaseUrl
    live.t.app.config.publicBaseUrl = listening
    try {
      const option = await pushOption(paymentId)
      expect(option.push.url).toMatch(/^solana:/)
      expect(option.push.transactionUrl).toBeUndefined()
    } finally {
      live.t.app.config.publicBaseUrl = https
    }
  })
})

function postAccount(paymentId: string, body: unknown) {
  return live.t.request({
    method: 'POST',
    url: `/v1/solana-pay/${paymentId}/${live.mint.toBase58()}`,
    headers: { 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  })
}
