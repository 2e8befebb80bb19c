import { getAssociatedTokenAddressSync, unpackAccount } from '@solana/spl-token'
import type { ConfirmedSignatureInfo, MessageAccountKeys, PublicKey } from '@solana/web3.js'
import { sql } from 'kysely'
import { holderOf } from '../../ledger/entries.js'
import { measureDifference, reconcile } from '../../ledger/reconcile.js'
import { creditTopUps, scannedTo } from '../../ledger/topUps.js'
import type { Db } from '../../store/db.js'
import '../../payments/pushSchema.js'
import type { AssetConfig } from '../types.js'
import type { SolanaChain } from './chain.js'

/** Signatures per getSignaturesForAddress page: the most a node answers. */
const signaturePage = 1000

/** The service's token account of `asset` (its associated token account): the collection account. */
async function collectionAccount(chain: SolanaChain, asset: AssetConfig): Promise<PublicKey> {
  const mint = await chain.mintInfo(asset)
  return getAssociatedTokenAddressSync(mint.mint, chain.service.publicKey, true, mint.programId)
}

/**
 * The collection account's token balance at the chain's commitment, and the slot it was read at (the
 * node's context slot). A missing account holds nothing.
 */
async function collectionBalance(
  chain: SolanaChain,
  asset: AssetConfig,
): Promise<{ slot: number; balance: bigint }> {
  const account = await collectionAccount(chain, asset)
  const mint = await chain.mintInfo(asset)
  const { context, value } = await chain.connection.getAccountInfoAndContext(account, chain.commitment)
  const balance = value ? unpackAccount(account, value, mint.programId).amount : 0n
  return { slot: context.slot, balance }
}

/**
 * A read at `minContextSlot` from a node whose commitment has not reached it yet (-32016, as a node
 * behind the one that answered the balance, or before that slot is confirmed) is asked again shortly.
 */
async function atSlot<T>(read: () => Promise<T>, what: string): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read()
    } catch (error) {
      const message = error instanceof Error ? error.message : String(error)
      if (attempt >= 20 || !/minimum context slot|-32016/i.test(message))
        throw new Error(`${what}: ${message}`)
      await new Promise((resolve) => setTimeout(resolve, 100 * Math.min(5, attempt + 1)))
    }
  }
}

/**
 * Reads the transactions touching the service's token account of `asset` after the last scan up to
 * `toSlot` (at the chain's commitment, from a node at or past that slot) and credits what each that no
 * transaction of the service explains (every payment, settlement and refund is in solana_transactions
 * before it is sent) added to the account, by the transaction's token balance changes, as a top-up.
 * What such a transaction took out is not a top-up: reconciliation reports it. The first scan of an
 * account reads its whole history.
 */
export async function scanSolanaTopUps(
  db: Db,
  chain: SolanaChain,
  asset: AssetConfig,
  toSlot?: number,
): Promise<void> {
  const holder = holderOf(chain.caip2, chain.service.publicKey.toBase58())
  const account = await collectionAccount(chain, asset)
  const mint = (await chain.mintInfo(asset)).mint.toBase58()
  const to = toSlot ?? (await chain.connection.getSlot(chain.commitment))
  const from = (await scannedTo(db, holder, asset.id)) ?? -1n
  const signatures = await signaturesBetween(chain, account, from, to)
  const ours = new Set<string>()
  for (let i = 0; i < signatures.length; i += 1000) {
    const rows = await db
      .selectFrom('solana_transactions')
      .select('signature')
      .where('signature', 'in', signatures.slice(i, i + 1000))
      .execute()
    for (const row of rows) ours.add(row.signature)
  }
  const credits: { txId: string; value: bigint; keys: string[] }[] = []
  for (const signature of signatures.filter((s) => !ours.has(s))) {
    const tx = await chain.connection.getTransaction(signature, {
      commitment: chain.commitment,
      maxSupportedTransactionVersion: 0,
    })
    if (!tx?.meta)
      throw new Error(`Transaction ${signature} is listed at ${account.toBase58()} but not found.`)
    const keys = tx.transaction.message.getAccountKeys({
      accountKeysFromLookups: tx.meta.loadedAddresses ?? null,
    })
    const amountIn = (balances: typeof tx.meta.preTokenBalances) =>
      BigInt(
        balances?.find((b) => b.mint === mint && keys.get(b.accountIndex)?.equals(account))?.uiTokenAmount
          .amount ?? '0',
      )
    const added = amountIn(tx.meta.postTokenBalances) - amountIn(tx.meta.preTokenBalances)
    if (added > 0n) credits.push({ txId: signature, value: added, keys: keyStrings(keys) })
  }
  // A transfer carrying a payment's reference key is a push payment's (push.ts), never a top-up: one
  // read of the references among every credit's keys.
  const references = await pushReferencesAmong(
    db,
    credits.flatMap((c) => c.keys),
  )
  const transfers = credits
    .filter((c) => !c.keys.some((key) => references.has(key)))
    .map(({ txId, value }) => ({ txId, value }))
  await creditTopUps(db, {
    mode: 'live',
    holder,
    asset: asset.id,
    block: BigInt(to),
    transfers,
    now: new Date(),
  })
}

function keyStrings(keys: MessageAccountKeys): string[] {
  const all: string[] = []
  for (let i = 0; i < keys.length; i++) all.push(keys.get(i)!.toBase58())
  return all
}

/** Which of `keys` are payments' reference keys: one query, however many keys. */
async function pushReferencesAmong(db: Db, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set()
  const rows = await db
    .selectFrom('push_references')
    .select('reference')
    .where('reference', '=', sql<string>`ANY(${sql.val([...new Set(keys)])}::text[])`)
    .execute()
  return new Set(rows.map((r) => r.reference))
}

/**
 * The signatures of the successful transactions touching `account` in slots `from` (exclusive) to `to`
 * (inclusive), oldest first, read at the chain's commitment from a node at or past `to`, page by page.
 */
export async function signaturesBetween(
  chain: SolanaChain,
  account: PublicKey,
  from: bigint,
  to: number,
): Promise<string[]> {
  const found: ConfirmedSignatureInfo[] = []
  let before: string | undefined
  for (;;) {
    const page = await atSlot(
      () =>
        chain.connection.getSignaturesForAddress(
          account,
          { limit: signaturePage, minContextSlot: to, ...(before ? { before } : {}) },
          chain.commitment,
        ),
      `Signatures of ${account.toBase58()}`,
    )
    found.push(...page.filter((entry) => entry.slot <= to && BigInt(entry.slot) > from && !entry.err))
    const last = page.at(-1)
    if (!last || page.length < signaturePage || BigInt(last.slot) <= from) break
    before = last.signature
  }
  return [...new Set(found.map((entry) => entry.signature))].reverse()
}

/**
 * Reconciles each configured asset at the service's token accounts: the balance at the chain's
 * commitment, then the top-ups up to the slot it was read at (from a node at or past it), then the
 * balance against the ledger (ledger/reconcile.ts). The balance and the ledger are two reads, not one
 * snapshot: a settlement landing between them can look like a difference for a moment, so a difference
 * counts only when a second reading a moment later finds one too.
 */
export async function reconcileSolanaChain(
  db: Db,
  chain: SolanaChain,
  log?: { error(obj: object, msg: string): void },
  options: {
    recheckMs?: number
    /**
     * Runs before each balance read: the push scan (push.ts), so a pushed transfer that landed is in the
     * ledger or in flight when the balance is compared, not taken for a difference.
     */
    beforeRead?: () => Promise<unknown>
  } = {},
): Promise<void> {
  const holder = holderOf(chain.caip2, chain.service.publicKey.toBase58())
  for (const asset of chain.assets) {
    const read = async () => {
      await options.beforeRead?.()
      const { slot, balance } = await collectionBalance(chain, asset)
      await scanSolanaTopUps(db, chain, asset, slot)
      return { mode: 'live' as const, holder, asset: asset.id, block: BigInt(slot), chainBalance: balance }
    }
    if ((await measureDifference(db, await read())) === 0n) continue
    await new Promise((resolve) => setTimeout(resolve, options.recheckMs ?? 1000))
    await reconcile(db, { ...(await read()), now: new Date(), ...(log ? { log } : {}) })
  }
}
