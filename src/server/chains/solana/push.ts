import {
  createAssociatedTokenAccountIdempotentInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token'
import { PublicKey, Transaction, type VersionedTransactionResponse } from '@solana/web3.js'
import { sql } from 'kysely'
import { sameCaip } from '../../../caip/caip.js'
import type { PushRequest } from '../../../contract/gateway.js'
import type { ServerConfig } from '../../config.js'
import { holderOf } from '../../ledger/entries.js'
import {
  applyPushTransfer,
  type FoundPushTransfer,
  holdUnpaidPushes,
  type PushOutcome,
} from '../../payments/push.js'
import type { Db } from '../../store/db.js'
import type { AssetConfig, PushContext } from '../types.js'
import type { MintInfo, SolanaChain } from './chain.js'
import { solanaJobKinds } from './jobKinds.js'
import { signaturesBetween } from './ledger.js'
import { buildTransfer } from './transaction.js'

/**
 * Solana Pay push payments (docs/push-payments.md): the transfer request a buyer's wallet pays, and the
 * scan that finds that transfer by the payment's reference key and applies it (payments/push.ts).
 */

/**
 * A Solana Pay transfer request URL (the spec's field order: recipient, amount, spl-token, reference,
 * label, message, memo). `amount` is in whole tokens, as the spec wants, with no trailing zeros.
 */
export function transferRequestUrl(params: {
  recipient: string
  amount: bigint
  decimals: number
  splToken: string
  reference: string
  label?: string
  message?: string
  memo?: string
}): string {
  const query = new URLSearchParams()
  query.set('amount', wholeTokens(params.amount, params.decimals))
  query.set('spl-token', params.splToken)
  query.set('reference', params.reference)
  if (params.label) query.set('label', params.label)
  if (params.message) query.set('message', params.message)
  if (params.memo) query.set('memo', params.memo)
  // URLSearchParams writes spaces as '+'; the spec (and @solana/pay's parser) reads percent-encoding.
  return `solana:${params.recipient}?${query.toString().replace(/\+/g, '%20')}`
}

function wholeTokens(amount: bigint, decimals: number): string {
  if (decimals === 0) return amount.toString()
  const digits = amount.toString().padStart(decimals + 1, '0')
  const whole = digits.slice(0, -decimals)
  const fraction = digits.slice(-decimals).replace(/0+$/, '')
  return fraction ? `${whole}.${fraction}` : whole
}

/**
 * A push option's Solana Pay transaction request link (`solana:https://...`), or undefined when the server
 * is not reached over https: wallets (and @solana/pay's parseURL) refuse any other link, and TLS is the
 * job of the proxy in front of the server. The route is routes/solanaPay.ts.
 */
export function transactionRequestUrl(
  publicBaseUrl: string | undefined,
  paymentId: string,
  mint: string,
): string | undefined {
  if (!publicBaseUrl?.startsWith('https://')) return undefined
  return `solana:${publicBaseUrl.replace(/\/+$/, '')}/v1/solana-pay/${paymentId}/${mint}`
}

/** The service's token account of `mint`: where every push transfer of that asset must arrive. */
export function collectionTokenAccount(chain: SolanaChain, mint: MintInfo): PublicKey {
  return getAssociatedTokenAddressSync(mint.mint, chain.service.publicKey, true, mint.programId)
}

/**
 * The push request of one asset for the gateway's options. A transfer request needs the recipient's
 * token account to exist (a wallet sends to it and would otherwise have to create it), so the service
 * creates its collection account first, once.
 */
export function createPushQuoter(chain: SolanaChain) {
  const ready = new Map<string, Promise<void>>()

  async function ensureCollectionAccount(asset: AssetConfig, mint: MintInfo): Promise<void> {
    const account = collectionTokenAccount(chain, mint)
    if (await chain.connection.getAccountInfo(account, chain.commitment)) return
    const latest = await chain.latestBlockhash()
    const transaction = new Transaction({ feePayer: chain.service.publicKey, ...latest }).add(
      createAssociatedTokenAccountIdempotentInstruction(
        chain.service.publicKey,
        account,
        chain.service.publicKey,
        mint.mint,
        mint.programId,
      ),
    )
    transaction.sign(chain.service)
    const signature = await chain.connection.sendRawTransaction(transaction.serialize())
    // Polled, not subscribed: every read of the service goes over HTTP (several nodes, failover).
    const deadline = Date.now() + chain.confirmTimeoutMs
    for (;;) {
      const [status] = (await chain.connection.getSignatureStatuses([signature])).value
      if (status?.err)
        throw new Error(
          `Creating the collection account of ${asset.id} failed: ${JSON.stringify(status.err)}`,
        )
      const reached = status?.confirmationStatus
      if (reached === 'finalized' || (reached === 'confirmed' && chain.commitment === 'confirmed')) return
      if (Date.now() > deadline) throw new Error(`Creating the collection account of ${asset.id} timed out.`)
      await new Promise((resolve) => setTimeout(resolve, chain.pollMs))
    }
  }

  return async function pushRequest(ctx: PushContext): Promise<PushRequest | undefined> {
    if (ctx.asset.push === false) return undefined
    const mint = await chain.mintInfo(ctx.asset)
    let created = ready.get(ctx.asset.id)
    if (!created) {
      created = ensureCollectionAccount(ctx.asset, mint)
      created.catch(() => ready.delete(ctx.asset.id))
      ready.set(ctx.asset.id, created)
    }
    await created
    const recipient = chain.service.publicKey.toBase58()
    const transactionUrl = transactionRequestUrl(ctx.publicBaseUrl, ctx.payment.id, mint.mint.toBase58())
    return {
      url: transferRequestUrl({
        recipient,
        amount: ctx.tokenAmount,
        decimals: mint.decimals,
        splToken: mint.mint.toBase58(),
        reference: ctx.reference,
        ...(ctx.label ? { label: ctx.label } : {}),
        message: `Payment ${ctx.payment.id}`,
        memo: pushMemo(ctx.payment.id),
      }),
      ...(transactionUrl ? { transactionUrl } : {}),
      reference: ctx.reference,
      recipient,
      asset: ctx.asset.id,
      amount: ctx.tokenAmount.toString(),
      expiresAt: ctx.expiresAt,
    }
  }
}

/** The memo of a payment's push transfers: the transfer request's `memo` and the transaction request's. */
export function pushMemo(paymentId: string): string {
  return `caipay:${paymentId}`
}

/**
 * The transaction a transaction request answers (docs/push-payments.md): the gateway's own Solana
 * transfer (transaction.ts buildTransfer: the service as fee payer and signer, the exact amount to the
 * collection account), from `account`, carrying the payment's reference key so the push scan finds it.
 * Base64 wire bytes with the buyer's signature missing.
 */
export async function transactionRequestTransaction(
  chain: SolanaChain,
  ctx: PushContext & { account: string },
): Promise<string> {
  const mint = await chain.mintInfo(ctx.asset)
  const built = await buildTransfer({
    chain,
    mint,
    owner: new PublicKey(ctx.account),
    recipient: chain.service.publicKey,
    amount: ctx.tokenAmount,
    memo: pushMemo(ctx.payment.id),
    references: [new PublicKey(ctx.reference)],
  })
  return built.transaction
    .serialize({ requireAllSignatures: false, verifySignatures: false })
    .toString('base64')
}

/** How long after its expiry a payment's reference is still watched for late and duplicate transfers. */
export const lateWatchMs = 24 * 60 * 60 * 1000

/** Per chain and collection account: the slot this process's push scans have read it up to. */
const scannedSlots = new WeakMap<SolanaChain, Map<string, number>>()

/**
 * One pass over the live payments' references on this chain. Each push asset's collection account is
 * listed once, from the slot the last pass read it to (every push transfer credits it); each transaction
 * not seen yet is read at the chain's commitment, and counts for the watched reference among its keys
 * when it credits the collection account of a configured mint (`creditOf`), then is applied
 * (payments/push.ts). A process's first pass has no slot to start from: it lists each watched reference
 * instead, once. Every listing is read from a node at or past the pass's slot. Then what arrived for
 * payments that closed underpaid becomes deposits. Returns what each new transfer did.
 */
export async function scanPushPayments(
  db: Db,
  chain: SolanaChain,
  config: ServerConfig,
  /** What the payment costs in an asset (the gateway's quote: gateway/quote.ts tokenAmountFor). */
  price: (amount: { unit: string; value: string }, asset: AssetConfig) => bigint | null,
  now: Date = new Date(),
): Promise<PushOutcome[]> {
  const assets = chain.assets.filter((a) => a.push !== false)
  const outcomes: PushOutcome[] = []
  if (assets.length > 0) {
    // Read before the watched references: a reference made after that read is paid in a later slot, so
    // the next pass, listing from this slot, still sees its transfer. Every listing is asked at or past it
    // (minContextSlot): a node behind it answers an error, not a shorter list this pass would take for all
    // there is up to it (docs/live-mode.md, "Chain reads").
    const to = await chain.connection.getSlot(chain.commitment)
    chain.observeSlot(to)
    const watched = await db
      .selectFrom('push_references as r')
      .innerJoin('payments as p', 'p.id', 'r.payment_id')
      .select(['r.reference', 'p.id', 'p.amount_unit', 'p.amount_value'])
      .where('p.mode', '=', 'live')
      .where('p.expires_at', '>', new Date(now.getTime() - lateWatchMs))
      .execute()
    const byReference = new Map(watched.map((w) => [w.reference, w]))
    const mints = await Promise.all(assets.map((asset) => chain.mintInfo(asset)))
    const accounts = mints.map((mint) => collectionTokenAccount(chain, mint))
    const slots = scannedSlots.get(chain) ?? new Map<string, number>()
    scannedSlots.set(chain, slots)
    const listed = new Set<string>()
    const first = accounts.some((account) => slots.get(account.toBase58()) === undefined)
    if (first) {
      for (const payment of watched)
        for (const signature of await signaturesBetween(chain, new PublicKey(payment.reference), -1n, to))
          listed.add(signature)
    } else if (watched.length > 0) {
      for (const account of accounts) {
        const from = BigInt(slots.get(account.toBase58())!)
        for (const signature of await signaturesBetween(chain, account, from, to)) listed.add(signature)
      }
    }
    const known = await seenSignatures(db, [...listed])
    for (const signature of [...listed].filter((s) => !known.has(s))) {
      const tx = await chain.connection.getTransaction(signature, {
        commitment: chain.commitment,
        maxSupportedTransactionVersion: 0,
      })
      // Listed but not found: the node that answered is behind the one that listed it. Passing it would
      // lose it (the next pass lists from `to`); this pass stops and the next reads it again.
      if (!tx?.meta) throw new Error(`Transaction ${signature} is listed but not found yet.`)
      if (tx.meta.err) continue
      for (const payment of watchedAmong(tx, byReference)) {
        for (const [i, asset] of assets.entries()) {
          const found = creditOf(tx, chain, mints[i]!, payment.reference)
          if (!found) continue
          const due = price({ unit: payment.amount_unit, value: payment.amount_value }, asset)
          if (due === null) continue
          const transfer: FoundPushTransfer = {
            paymentId: payment.id,
            signature,
            chainId: chain.caip2,
            asset: asset.id,
            holder: holderOf(chain.caip2, chain.service.publicKey.toBase58()),
            sender: found.sender ? `${chain.caip2}:${found.sender}` : null,
            amount: found.amount,
            slot: tx.slot,
          }
          outcomes.push(
            await applyPushTransfer(db, {
              config,
              transfer,
              due,
              settlement: {
                intervalMs: config.settlementIntervalMs,
                jobKind: solanaJobKinds.settle,
                depositRefundJobKind: solanaJobKinds.depositRefund,
              },
              now,
            }),
          )
        }
      }
    }
    // Read up to `to`, all of them: the next pass starts there (a failed pass throws before this).
    for (const account of accounts) slots.set(account.toBase58(), to)
  }
  await holdUnpaidPushes(db, config, now)
  return outcomes
}

/**
 * Of `signatures`, those a push scan need not read again: transfers already applied, and the service's
 * own transactions (payments, settlements, refunds: recorded before they are sent). One query per 1000.
 */
async function seenSignatures(db: Db, signatures: readonly string[]): Promise<Set<string>> {
  const seen = new Set<string>()
  for (let i = 0; i < signatures.length; i += 1000) {
    const chunk = signatures.slice(i, i + 1000)
    const { rows } = await sql<{ signature: string }>`
      SELECT signature FROM push_transfers WHERE signature = ANY(${sql.val(chunk)}::text[])
      UNION SELECT signature FROM solana_transactions WHERE signature = ANY(${sql.val(chunk)}::text[])`.execute(
      db,
    )
    for (const row of rows) seen.add(row.signature)
  }
  return seen
}

/** The watched payments whose reference key is among `tx`'s account keys. */
function watchedAmong<W>(tx: VersionedTransactionResponse, byReference: ReadonlyMap<string, W>): W[] {
  const keys = tx.transaction.message.getAccountKeys({
    accountKeysFromLookups: tx.meta?.loadedAddresses ?? null,
  })
  const out: W[] = []
  for (let i = 0; i < keys.length; i++) {
    const payment = byReference.get(keys.get(i)!.toBase58())
    if (payment && !out.includes(payment)) out.push(payment)
  }
  return out
}

/**
 * What `tx` credited to the service's collection token account of `mint` (its token balance change, as
 * Solana Pay's validateTransfer reads it), and whose token account paid it; undefined when the
 * reference is not among its keys or nothing arrived there.
 */
export function creditOf(
  tx: VersionedTransactionResponse,
  chain: SolanaChain,
  mint: MintInfo,
  reference: string,
): { amount: bigint; sender: string | undefined } | undefined {
  const meta = tx.meta
  if (!meta) return undefined
  const keys = tx.transaction.message.getAccountKeys({ accountKeysFromLookups: meta.loadedAddresses ?? null })
  const all = [
    ...keys.staticAccountKeys,
    ...(keys.accountKeysFromLookups?.writable ?? []),
    ...(keys.accountKeysFromLookups?.readonly ?? []),
  ]
  if (!all.some((key) => key.toBase58() === reference)) return undefined
  const account = collectionTokenAccount(chain, mint)
  const mintText = mint.mint.toBase58()
  const at = (balances: typeof meta.preTokenBalances, index: number) =>
    BigInt(
      balances?.find((b) => b.accountIndex === index && b.mint === mintText)?.uiTokenAmount.amount ?? '0',
    )
  const index = all.findIndex((key) => key.equals(account))
  if (index === -1) return undefined
  const amount = at(meta.postTokenBalances, index) - at(meta.preTokenBalances, index)
  if (amount <= 0n) return undefined
  const sender = (meta.preTokenBalances ?? []).find(
    (b) =>
      b.mint === mintText &&
      b.accountIndex !== index &&
      at(meta.postTokenBalances, b.accountIndex) < BigInt(b.uiTokenAmount.amount),
  )?.owner
  return { amount, sender }
}

/** Whether `asset` is one of the chain's push assets. */
export function pushAsset(chain: SolanaChain, asset: string): AssetConfig | undefined {
  return chain.assets.find((a) => a.push !== false && sameCaip(a.id, asset))
}
