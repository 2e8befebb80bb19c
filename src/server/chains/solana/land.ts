import type { SignatureStatus } from '@solana/web3.js'
import { RetryLater } from '../../jobs/runner.js'
import type { Db } from '../../store/db.js'
import type { SettledCommitment, SolanaChain } from './chain.js'
import type { SolanaTransactionRow } from './schema.js'
import { markSent, markState } from './store.js'

export type LandOutcome =
  | { kind: 'landed' }
  /** Landed with an error: it moved nothing but its fee. */
  | { kind: 'failed'; error: string }
  /** Never landed and never can: its blockhash expired. */
  | { kind: 'dropped'; error: string }

/** Re-send an unconfirmed transaction this often: RPC nodes and leaders drop transactions under load. */
const resendEveryMs = 2000
const validityEveryMs = 1000

/**
 * Gets a recorded transaction on chain, exactly once, whatever happened before: a first run sends it;
 * a run after a crash asks the chain first and sends the same bytes again only while the status is
 * unknown and the blockhash still valid. Sending the same bytes twice is harmless (same signature, the
 * runtime refuses duplicates); signing anew would not be, so this never signs. Decides only on what
 * the chain says: a refused preflight is not a failure (the buyer also holds the signed bytes and
 * could still land them), so it waits for the blockhash to expire before calling it dropped. Throws
 * `RetryLater` when nothing is decided within the chain's confirm timeout; the job comes back.
 */
export async function landTransaction(input: {
  chain: SolanaChain
  db: Db
  tx: SolanaTransactionRow
  signal: AbortSignal
}): Promise<LandOutcome> {
  const { chain, db, tx, signal } = input
  const { connection } = chain
  const bytes = Buffer.from(tx.raw, 'base64')
  const deadline = Date.now() + chain.confirmTimeoutMs
  let lastSend = tx.first_sent_at === null ? undefined : Number.NEGATIVE_INFINITY
  let lastValidity = Number.NEGATIVE_INFINITY
  let lastError: string | null = tx.error

  const decided = async (outcome: LandOutcome): Promise<LandOutcome> => {
    const error = outcome.kind === 'landed' ? null : outcome.error
    await markState(db, tx.signature, outcome.kind, error, new Date())
    return outcome
  }

  const send = async () => {
    // Counted before the bytes leave, so a crash right after still knows they may be out there.
    await markSent(db, tx.signature, new Date())
    lastSend = Date.now()
    try {
      await connection.sendRawTransaction(bytes, { skipPreflight: false, maxRetries: 0 })
    } catch (error) {
      lastError = error instanceof Error ? error.message : String(error)
      await markState(db, tx.signature, 'pending', lastError, new Date())
    }
  }

  // Never sent: nobody can have landed it but the buyer, and a send then just reports a duplicate.
  if (lastSend === undefined) await send()

  for (;;) {
    if (signal.aborted) throw signal.reason ?? new Error('aborted')
    const status = await statusOf(chain, tx.signature)
    if (status?.err) return decided({ kind: 'failed', error: JSON.stringify(status.err) })
    if (status && reachedCommitment(status, chain.commitment)) return decided({ kind: 'landed' })
    if (status === null && Date.now() - lastValidity >= validityEveryMs) {
      lastValidity = Date.now()
      const valid = await blockhashValid(chain, tx.blockhash)
      if (valid === false) {
        // The blockhash expired between the two reads only if the status appeared meanwhile: ask again.
        const last = await statusOf(chain, tx.signature)
        if (last?.err) return decided({ kind: 'failed', error: JSON.stringify(last.err) })
        if (last && reachedCommitment(last, chain.commitment)) return decided({ kind: 'landed' })
        if (last === null)
          return decided({ kind: 'dropped', error: lastError ?? 'blockhash expired before it landed' })
      }
      if (valid === true && (lastSend ?? 0) + resendEveryMs <= Date.now()) await send()
    }
    if (Date.now() >= deadline) throw new RetryLater(`Transaction ${tx.signature} is not confirmed yet.`)
    await sleep(chain.pollMs, signal)
  }
}

/** A `finalized` chain counts only rooted blocks; `confirmed` counts either (a finalized one is confirmed too). */
export function reachedCommitment(status: SignatureStatus, commitment: SettledCommitment): boolean {
  if (commitment === 'finalized') return status.confirmationStatus === 'finalized'
  return status.confirmationStatus === 'confirmed' || status.confirmationStatus === 'finalized'
}

/** The chain's word on a signature; undefined while the RPC is unreachable (then we just ask again). */
async function statusOf(chain: SolanaChain, signature: string): Promise<SignatureStatus | null | undefined> {
  try {
    const { value } = await chain.connection.getSignatureStatuses([signature], {
      searchTransactionHistory: true,
    })
    return value[0] ?? null
  } catch {
    return undefined
  }
}

async function blockhashValid(chain: SolanaChain, blockhash: string): Promise<boolean | undefined> {
  try {
    return (await chain.connection.isBlockhashValid(blockhash)).value
  } catch {
    return undefined
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms)
    function done() {
      clearTimeout(timer)
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, { once: true })
  })
}
