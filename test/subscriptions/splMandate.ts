import { createApproveCheckedInstruction, getAccount, getAssociatedTokenAddressSync } from '@solana/spl-token'
import { type Keypair, type PublicKey, TransactionMessage, VersionedTransaction } from '@solana/web3.js'
import type { SolanaSigner } from '../../adapters/solana-kit/index.js'
import type { InspectedMandate } from '../../src/actions/types.js'
import type { SubscriptionTerms } from '../../src/contract/gateway.js'
import type { Mandates } from '../../src/subscriptions/index.js'
import { airdrop, createTestMint, mintTestTokens, type SolanaValidator } from '../solana/index.js'

/**
 * What the SPL mandate suites share on LiteSVM: a funded buyer's subscription `ApproveChecked` of 12
 * periods of 1 token to `charger`, checked and signed by the wallet's `signer` and landed.
 */
export async function grantSplMandate(
  validator: SolanaValidator,
  signer: SolanaSigner,
  buyer: Keypair,
  charger: PublicKey,
): Promise<{
  terms: SubscriptionTerms
  transaction: string
  signed: string
  mandate: InspectedMandate
  source: PublicKey
}> {
  const { connection, caip2 } = validator
  await airdrop(connection, buyer.publicKey)
  const mint = await createTestMint(connection, buyer)
  await mintTestTokens(connection, buyer, mint, buyer.publicKey, 100_000_000n)
  const source = getAssociatedTokenAddressSync(mint, buyer.publicKey)
  const terms: SubscriptionTerms = {
    subscriptionId: 'sub_spl',
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

/** The grant handed to the mandate ledger as the flow does before confirm, under `paymentId`'s option. */
export function recordSplGrant(
  mandates: Mandates,
  paymentId: string,
  buyer: Keypair,
  granted: Awaited<ReturnType<typeof grantSplMandate>>,
) {
  const { terms, transaction, signed, mandate } = granted
  const caip2 = terms.asset.slice(0, terms.asset.indexOf('/'))
  return mandates.record({
    paymentId,
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
}

/** The token account's delegate (base58, or null) and delegated amount, read from the chain. */
export async function delegationOf(validator: SolanaValidator, source: PublicKey) {
  const account = await getAccount(validator.connection, source, 'confirmed')
  return [account.delegate?.toBase58() ?? null, account.delegatedAmount]
}
