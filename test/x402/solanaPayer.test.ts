/**
 * `caipay/x402`'s x402Fetch paying Solana `exact` requirements: the unmodified `@x402/hono` resource
 * server (caipay its facilitator) on the Solana harness, paid with caipay's Solana signer and the Solana
 * adapter's builder; hostile terms, and built transactions that are not exactly the terms, refused with
 * the key never asked to sign.
 */

import { TOKEN_2022_PROGRAM_ID } from '@solana/spl-token'
import {
  ComputeBudgetProgram,
  Keypair,
  PublicKey,
  SystemProgram,
  type TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  type SolanaSigner,
  type SolanaSignTransactionFeature,
  solanaSigner,
  solanaX402Builder,
  type WalletStandardSolanaAccount,
} from '../../adapters/solana/index.js'
import { decodeBase64, encodeBase64 } from '../../protocol/solana/index.js'
import type { Signer, SignerRequest } from '../../src/actions/types.js'
import { type X402SolanaBuilder, x402Fetch } from '../../src/x402/index.js'
import { expectPayError } from '../expectPayError.js'
import { airdrop, confirmSignature, createTestMint, mintTestTokens, tokenBalance } from '../solana/index.js'
import { hostileResource, startSolanaShop } from './support.js'

const price = 10_000n
let shop: Awaited<ReturnType<typeof startSolanaShop>>

beforeAll(async () => {
  shop = await startSolanaShop(price)
}, 60_000)

afterAll(() => shop?.close())

/** A Wallet Standard account over a real key whose every signing call is counted. */
function countingWallet(keypair: Keypair) {
  let calls = 0
  const account: WalletStandardSolanaAccount = {
    address: keypair.publicKey.toBase58(),
    publicKey: keypair.publicKey.toBytes(),
    chains: [shop.network],
    features: ['solana:signTransaction'],
  }
  const feature: SolanaSignTransactionFeature = {
    version: '1.0.0',
    supportedTransactionVersions: ['legacy', 0],
    async signTransaction(...inputs) {
      calls += inputs.length
      return inputs.map((input) => {
        const tx = VersionedTransaction.deserialize(input.transaction)
        tx.sign([keypair])
        return { signedTransaction: tx.serialize() }
      })
    },
  }
  return { signer: solanaSigner({ account, feature, chains: [shop.network] }), calls: () => calls }
}

async function payer(
  options: { perOrigin?: bigint; builder?: X402SolanaBuilder; wrap?: (signer: SolanaSigner) => Signer } = {},
) {
  const buyer = await shop.live.newBuyer(1_000_000n)
  const wallet = countingWallet(buyer)
  const asset = shop.live.asset.slice(shop.live.asset.indexOf('/') + 1)
  const pay = x402Fetch(fetch, {
    signers: [options.wrap ? options.wrap(wallet.signer) : wallet.signer],
    solana: options.builder ?? solanaX402Builder({ connection: shop.live.validator.connection }),
    budget: {
      perRequest: { [`${shop.network}/${asset}`]: price },
      ...(options.perOrigin !== undefined && {
        perOrigin: { [`${shop.network}/${asset}`]: options.perOrigin },
      }),
    },
  })
  return { buyer, calls: wallet.calls, pay }
}

describe('x402Fetch on Solana', () => {
  it('pays the published resource server: one transfer of the price, the facilitator pays the fee', async () => {
    const { buyer, calls, pay } = await payer()
    const { live, payTo } = shop
    const merchantBefore = await live.balance(payTo.publicKey)
    const buyerLamports = await live.validator.connection.getBalance(buyer.publicKey)
    const res = await pay(`${shop.resource.url}/weather`)
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ weather: 'sunny' })
    expect(res.payment).toMatchObject({
      success: true,
      network: shop.network,
      payer: buyer.publicKey.toBase58(),
    })
    expect(await live.balance(buyer.publicKey)).toBe(1_000_000n - price)
    expect((await live.balance(payTo.publicKey)) - merchantBefore).toBe(price)
    expect(await live.validator.connection.getBalance(buyer.publicKey)).toBe(buyerLamports)
    expect(calls()).toBe(1)
  })

  it('two equal payments are two transfers (each message its own), the third stops at the per-origin budget', async () => {
    const { buyer, calls, pay } = await payer({ perOrigin: 2n * price })
    const first = await pay(`${shop.resource.url}/weather`)
    const second = await pay(`${shop.resource.url}/weather`)
    expect([first.status, second.status]).toEqual([200, 200])
    expect(first.payment?.transaction).not.toBe(second.payment?.transaction)
    expect(await shop.live.balance(buyer.publicKey)).toBe(1_000_000n - 2n * price)
    const error = await expectPayError(pay(`${shop.resource.url}/weather`), 'action_rejected')
    expect(error.context).toMatchObject({
      refusals: [expect.objectContaining({ reason: 'over_budget_per_origin' })],
    })
    expect(calls()).toBe(2)
  })

  it('two requests at once within a per-origin budget for one: one paid, the other refused unsigned', async () => {
    const { buyer, calls, pay } = await payer({ perOrigin: price })
    const results = await Promise.allSettled([1, 2].map(() => pay(`${shop.resource.url}/weather`)))
    const paid = results.filter((r) => r.status === 'fulfilled' && r.value.status === 200)
    const refused = results.filter((r) => r.status === 'rejected')
    expect([paid.length, refused.length]).toEqual([1, 1])
    expect((refused[0] as PromiseRejectedResult).reason).toMatchObject({
      code: 'action_rejected',
      context: { refusals: [expect.objectContaining({ reason: 'over_budget_per_origin' })] },
    })
    expect(await shop.live.balance(buyer.publicKey)).toBe(1_000_000n - price)
    expect(calls()).toBe(1)
  })

  it('builds a Token-2022 payment the same way: checked, signed by the payer, landed with the fee payer', async () => {
    const { connection } = shop.live.validator
    const [authority, feePayer, buyer, owner] = [
      Keypair.generate(),
      Keypair.generate(),
      Keypair.generate(),
      Keypair.generate(),
    ]
    await Promise.all([authority, feePayer].map((k) => airdrop(connection, k.publicKey)))
    const programId = TOKEN_2022_PROGRAM_ID
    const mint = await createTestMint(connection, authority, 2, { programId })
    await mintTestTokens(connection, authority, mint, buyer.publicKey, 500n, { programId })
    await mintTestTokens(connection, authority, mint, owner.publicKey, 0n, { programId })
    const terms = {
      mint: mint.toBase58(),
      payTo: owner.publicKey.toBase58(),
      amount: '123',
      feePayer: feePayer.publicKey.toBase58(),
    }
    const built = await solanaX402Builder({ connection }).build({
      chainId: shop.network,
      payer: buyer.publicKey.toBase58(),
      ...terms,
    })
    expect(built.decimals).toBe(2)
    const signer = solanaSigner({ keypair: buyer, chains: [shop.network] })
    const request = {
      chainId: shop.network,
      method: 'solana_signTransaction',
      params: [{ transaction: built.transaction, x402: terms }],
    }
    expect(signer.inspect(request).transfers).toEqual([
      {
        asset: `${shop.network}/token:${terms.mint}`,
        amount: 123n,
        decimals: 2,
        to: `${shop.network}:${terms.payTo}`,
      },
    ])
    const tx = VersionedTransaction.deserialize(decodeBase64(await signer.request(request))!)
    tx.sign([feePayer])
    await confirmSignature(connection, await connection.sendTransaction(tx))
    expect(await tokenBalance(connection, buyer.publicKey, mint, programId)).toBe(500n - 123n)
    expect(await tokenBalance(connection, owner.publicKey, mint, programId)).toBe(123n)
  })

  describe('hostile terms: refused, zero signing calls', () => {
    const hostile = hostileResource()

    const base = () => ({
      scheme: 'exact',
      network: shop.network,
      amount: price.toString(),
      asset: shop.live.mint.toBase58(),
      payTo: shop.payTo.publicKey.toBase58(),
      maxTimeoutSeconds: 60,
      extra: { feePayer: shop.live.service.publicKey.toBase58() },
    })
    const cases: [string, (buyer: Keypair) => Record<string, unknown>, string][] = [
      [
        'an amount above the budget',
        () => ({ ...base(), amount: (price + 1n).toString() }),
        'over_budget_per_request',
      ],
      ['another mint', () => ({ ...base(), asset: randomAddress() }), 'asset_not_in_budget'],
      [
        'the payer as fee payer',
        (buyer) => ({ ...base(), extra: { feePayer: buyer.publicKey.toBase58() } }),
        'fee_payer_is_payer',
      ],
      ['no fee payer', () => ({ ...base(), extra: {} }), 'invalid_address'],
      [
        'a memo over 256 bytes',
        () => ({ ...base(), extra: { ...base().extra, memo: 'm'.repeat(257) } }),
        'invalid_memo',
      ],
      ['an amount beyond u64', () => ({ ...base(), amount: (2n ** 64n).toString() }), 'invalid_amount'],
    ]
    it.each(cases)('%s', async (_name, requirement, reason) => {
      const { buyer, calls, pay } = await payer()
      hostile.offer([requirement(buyer)])
      const error = await expectPayError(pay(hostile.url()), 'action_rejected')
      expect(error.context).toMatchObject({ refusals: [expect.objectContaining({ reason })] })
      expect(calls()).toBe(0)
    })
  })

  describe('a built transaction that is not exactly the terms: refused by the signing guard, zero signing calls', () => {
    /** The adapter's builder, its transaction's instructions or fee payer then changed by `edit`. */
    function tampering(edit: (tx: Tampered) => void): X402SolanaBuilder {
      const honest = solanaX402Builder({ connection: shop.live.validator.connection })
      return {
        async build(transfer) {
          const built = await honest.build(transfer)
          const message = TransactionMessage.decompile(
            VersionedTransaction.deserialize(decodeBase64(built.transaction)!).message,
          )
          const tx = { ...message, payer: new PublicKey(transfer.payer) }
          edit(tx)
          const rebuilt = new TransactionMessage(tx).compileToV0Message()
          return { ...built, transaction: encodeBase64(new VersionedTransaction(rebuilt).serialize()) }
        },
      }
    }
    const sendLamports = (from: PublicKey) =>
      SystemProgram.transfer({ fromPubkey: from, toPubkey: new PublicKey(randomAddress()), lamports: 1 })
    // The reason the guard names: x402's exact-terms check, or the Solana signer's own rules first.
    const cases: [string, (tx: Tampered) => void, string | RegExp][] = [
      [
        'an extra SOL transfer by the payer',
        (tx) => tx.instructions.push(sendLamports(tx.payer)),
        'unrecognised instruction involves the signer',
      ],
      [
        'an extra instruction of the fee payer',
        (tx) => tx.instructions.push(sendLamports(tx.payerKey)),
        'unexpected_instruction',
      ],
      ['the transfer twice', (tx) => tx.instructions.push(tx.instructions[2]!), 'transfer_count'],
      [
        'the payer as fee payer',
        (tx) => {
          tx.payerKey = tx.payer
        },
        /makes the signer pay its fees/,
      ],
      [
        'another fee payer than the terms',
        (tx) => {
          tx.payerKey = new PublicKey(randomAddress())
        },
        'fee_payer_mismatch',
      ],
      [
        'a compute price that makes the fee unbounded',
        (tx) => {
          tx.instructions[1] = ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 10_000_000 })
        },
        'fee_too_high',
      ],
      ['a recipient other than payTo', otherRecipient, 'recipient_mismatch'],
    ]
    it.each(cases)('%s', async (_name, edit, reason) => {
      const { buyer, calls, pay } = await payer({ builder: tampering(edit) })
      const before = await shop.live.balance(buyer.publicKey)
      const error = await expectPayError(pay(`${shop.resource.url}/weather`), 'action_rejected')
      if (typeof reason === 'string') expect(error.context).toMatchObject({ reason })
      else expect(error.message).toMatch(reason)
      expect(calls()).toBe(0)
      expect(await shop.live.balance(buyer.publicKey)).toBe(before)
    })

    it('a signer that does not check the terms: the core still refuses a transfer not to payTo', async () => {
      const withoutTerms = (request: SignerRequest): SignerRequest => ({
        ...request,
        params: [{ transaction: (request.params[0] as { transaction: string }).transaction }],
      })
      const { calls, pay } = await payer({
        builder: tampering(otherRecipient),
        wrap: (signer) => ({
          ...signer,
          inspect: (request) => signer.inspect(withoutTerms(request)),
          request: (request) => signer.request(withoutTerms(request)),
        }),
      })
      const error = await expectPayError(pay(`${shop.resource.url}/weather`), 'action_rejected')
      expect(error.message).toMatch(/not exactly one transfer of the required amount to payTo/)
      expect(calls()).toBe(0)
    })
  })
})

/** A built message being changed: its fee payer (`payerKey`), instructions, and the paying account. */
interface Tampered {
  payerKey: PublicKey
  instructions: TransactionInstruction[]
  recentBlockhash: string
  payer: PublicKey
}

function otherRecipient(tx: Tampered) {
  tx.instructions[2]!.keys[2] = { pubkey: new PublicKey(randomAddress()), isSigner: false, isWritable: true }
}

function randomAddress(): string {
  return new PublicKey(globalThis.crypto.getRandomValues(new Uint8Array(32))).toBase58()
}
