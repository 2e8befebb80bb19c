import { createApproveCheckedInstruction, getAccount, getAssociatedTokenAddressSync } from '@solana/spl-token'
import { Keypair, TransactionMessage, VersionedTransaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { solanaSigner } from '../../adapters/solana/index.js'
import type { SubscriptionTerms } from '../../src/contract/gateway.js'
import { createMandates, memoryMandateStore } from '../../src/subscriptions/index.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
} from '../solana/index.js'

// Issue 41 on LiteSVM, judged by the runtime: a subscription's ApproveChecked, checked and signed by the
// wallet's signer, sets exactly the delegate and amount; revokeMandate's SPL Revoke really clears them.

let validator: SolanaValidator
beforeAll(async () => {
  validator = await startSolanaValidator({ backend: 'litesvm' })
})
afterAll(() => validator?.stop())

describe('SPL mandate on LiteSVM', () => {
  it('grants exactly the delegate and amount, lists it live, and revokes it on chain', async () => {
    const { connection, caip2 } = validator
    const buyer = Keypair.generate()
    const charger = Keypair.generate().publicKey
    await airdrop(connection, buyer.publicKey)
    const mint = await createTestMint(connection, buyer)
    await mintTestTokens(connection, buyer, mint, buyer.publicKey, 100_000_000n)
    const source = getAssociatedTokenAddressSync(mint, buyer.publicKey)
    const terms: SubscriptionTerms = {
      subscriptionId: 'sub_live',
      asset: `${caip2}/token:${mint.toBase58()}`,
      amountPerPeriod: '1000000',
      interval: 'month',
      intervalCount: 1,
      periods: 12,
      endAt: Math.floor(Date.now() / 1000) + 400 * 86_400,
      spender: `${caip2}:${charger.toBase58()}`,
    }
    const signer = solanaSigner({
      keypair: buyer,
      chains: [caip2],
      connection,
      allowFeePayer: true,
      delegates: [terms.spender],
    })
    const { blockhash } = await connection.getLatestBlockhash('confirmed')
    const message = new TransactionMessage({
      payerKey: buyer.publicKey,
      recentBlockhash: blockhash,
      instructions: [createApproveCheckedInstruction(source, mint, charger, buyer.publicKey, 12_000_000n, 6)],
    }).compileToV0Message()
    const transaction = Buffer.from(new VersionedTransaction(message).serialize()).toString('base64')
    const request = {
      chainId: caip2,
      method: 'solana_signTransaction',
      params: [{ transaction }],
      subscription: terms,
    }
    const inspection = signer.inspect(request)
    expect(inspection.mandate).toMatchObject({
      kind: 'splDelegate',
      amount: 12_000_000n,
      spender: terms.spender,
    })
    const signed = await signer.request(request)
    const sent = await connection.sendRawTransaction(Buffer.from(signed, 'base64'))
    await connection.confirmTransaction(sent, 'confirmed').catch(() => undefined)
    let account = await getAccount(connection, source, 'confirmed')
    expect(account.delegate?.toBase58()).toBe(charger.toBase58())
    expect(account.delegatedAmount).toBe(12_000_000n)

    const store = memoryMandateStore()
    const mandates = createMandates({ signers: [signer], store })
    const option = {
      id: 'o',
      account: `${caip2}:${buyer.publicKey.toBase58()}`,
      amount: { unit: `caip19/${terms.asset}`, value: '1000000', display: { decimals: 6 } },
      etaS: 1,
      expiresAt: Math.floor(Date.now() / 1000) + 600,
      actions: [],
      subscription: terms,
    } as never
    const action = {
      type: 'walletRpc' as const,
      walletRpc: {
        chainId: caip2,
        method: 'solana_signTransaction',
        params: JSON.stringify([{ transaction }]),
      },
    }
    await mandates.record({
      paymentId: 'pay_live',
      option,
      action,
      index: 0,
      result: signed,
      mandate: inspection.mandate!,
    })
    expect((await mandates.listMandates()).map((m) => [m.id, m.status, m.counted])).toEqual([
      ['pay_live:0', 'live', 12_000_000n],
    ])

    const revokedBy = await mandates.revokeMandate('pay_live:0')
    account = await getAccount(connection, source, 'confirmed')
    expect(account.delegate).toBeNull()
    expect(account.delegatedAmount).toBe(0n)
    const [listed] = await mandates.listMandates()
    expect(listed).toMatchObject({ status: 'ended', counted: 0n, revokedBy })
  })
})
