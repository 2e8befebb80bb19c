import { createKeyPairSignerFromBytes, createSolanaRpc } from '@solana/kit'
import { createApproveCheckedInstruction, getAccount, getAssociatedTokenAddressSync } from '@solana/spl-token'
import { Keypair, type PublicKey, TransactionMessage, VersionedTransaction } from '@solana/web3.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import * as kitEntry from '../../adapters/solana-kit/index.js'
import type { SubscriptionTerms } from '../../src/contract/gateway.js'
import { createMandates, memoryMandateStore } from '../../src/subscriptions/index.js'
import {
  airdrop,
  createTestMint,
  mintTestTokens,
  type SolanaValidator,
  startSolanaValidator,
} from '../solana/index.js'

// Issue 41 through caipay/adapters/solana-kit alone on the wallet's side: a kit key pair signer over a kit
// `Rpc` lists the SPL mandate it granted and revokes it on chain, and the entry's revokeSplMandate revokes
// without @solana/web3.js (web3.js only sets the chain up here). LiteSVM judges the account.

let validator: SolanaValidator
beforeAll(async () => {
  validator = await startSolanaValidator({ backend: 'litesvm' })
})
afterAll(() => validator?.stop())

/** A kit signer of `buyer` over a kit `Rpc`, allowed to delegate to `charger`. */
async function kitSigner(buyer: Keypair, charger: PublicKey) {
  return kitEntry.solanaSigner({
    kitSigner: await createKeyPairSignerFromBytes(buyer.secretKey),
    chains: [validator.caip2],
    rpc: createSolanaRpc(validator.rpcUrl),
    allowFeePayer: true,
    delegates: [`${validator.caip2}:${charger.toBase58()}`],
  })
}

/** `buyer`'s token account delegates 12 periods of 1 token to `charger`, the grant signed by `signer`. */
async function grant(signer: kitEntry.SolanaSigner, buyer: Keypair, charger: PublicKey) {
  const { connection, caip2 } = validator
  await airdrop(connection, buyer.publicKey)
  const mint = await createTestMint(connection, buyer)
  await mintTestTokens(connection, buyer, mint, buyer.publicKey, 100_000_000n)
  const source = getAssociatedTokenAddressSync(mint, buyer.publicKey)
  const terms: SubscriptionTerms = {
    subscriptionId: 'sub_kit',
    asset: `${caip2}/token:${mint.toBase58()}`,
    amountPerPeriod: '1000000',
    interval: 'month',
    intervalCount: 1,
    periods: 12,
    endAt: Math.floor(Date.now() / 1000) + 400 * 86_400,
    spender: `${caip2}:${charger.toBase58()}`,
  }
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
  const mandate = signer.inspect(request).mandate!
  const signed = await signer.request(request)
  const sent = await connection.sendRawTransaction(Buffer.from(signed, 'base64'))
  await connection.confirmTransaction(sent, 'confirmed').catch(() => undefined)
  return { terms, transaction, signed, mandate, source }
}

const delegation = async (source: PublicKey) => {
  const account = await getAccount(validator.connection, source, 'confirmed')
  return [account.delegate?.toBase58() ?? null, account.delegatedAmount]
}

describe('caipay/adapters/solana-kit: SPL mandates without web3.js', () => {
  it('a kit signer over a kit Rpc lists its mandate live, revokes it on chain, then lists it ended', async () => {
    const { caip2 } = validator
    const buyer = Keypair.generate()
    const charger = Keypair.generate().publicKey
    const signer = await kitSigner(buyer, charger)
    const { terms, transaction, signed, mandate, source } = await grant(signer, buyer, charger)
    expect(await delegation(source)).toEqual([charger.toBase58(), 12_000_000n])

    const mandates = createMandates({ signers: [signer], store: memoryMandateStore() })
    await mandates.record({
      paymentId: 'pay_kit',
      option: {
        id: 'o',
        account: `${caip2}:${buyer.publicKey.toBase58()}`,
        amount: { unit: `caip19/${terms.asset}`, value: '1000000', display: { decimals: 6 } },
        etaS: 1,
        expiresAt: Math.floor(Date.now() / 1000) + 600,
        actions: [],
        subscription: terms,
      } as never,
      action: {
        type: 'walletRpc',
        walletRpc: {
          chainId: caip2,
          method: 'solana_signTransaction',
          params: JSON.stringify([{ transaction }]),
        },
      },
      index: 0,
      result: signed,
      mandate,
    })
    expect((await mandates.listMandates()).map((m) => [m.status, m.counted])).toEqual([['live', 12_000_000n]])

    const revokedBy = await mandates.revokeMandate('pay_kit:0')
    expect(await delegation(source)).toEqual([null, 0n])
    expect((await mandates.listMandates())[0]).toMatchObject({ status: 'ended', counted: 0n, revokedBy })
  })

  it("the entry's revokeSplMandate revokes through a Connection-shaped node and the kit signer's own key", async () => {
    const buyer = Keypair.generate()
    const charger = Keypair.generate().publicKey
    const kit = await createKeyPairSignerFromBytes(buyer.secretKey)
    const signer = await kitSigner(buyer, charger)
    const { mandate, source } = await grant(signer, buyer, charger)
    const signature = await kitEntry.revokeSplMandate(validator.connection, mandate, async (decoded) => {
      const [signatures] = await kit.signTransactions([
        { messageBytes: decoded.messageBytes, signatures: { [kit.address]: null } } as never,
      ])
      return signatures![kit.address]!
    })
    expect(signature).toMatch(/^[1-9A-HJ-NP-Za-km-z]{64,88}$/)
    expect(await delegation(source)).toEqual([null, 0n])
  })
})
