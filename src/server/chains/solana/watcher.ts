import type { SignatureStatus } from '@solana/web3.js'
import type { Db } from '../../store/db.js'
import type { SettledCommitment, SolanaChain } from './chain.js'
import { markSent, markState, markStates, noteSendRefused } from './store.js'

export type LandOutcome =
  | { kind: 'landed' }
  /** Landed with an error: it moved nothing but its fee. */
  | { kind: 'failed'; error: string }
  /** Never landed and never can: its blockhash expired. */
  | { kind: 'dropped'; error: string }

/** A recorded transaction in flight, as the watcher needs it. */
export interface InFlight {
  signature: string
  /** The signed wire transaction, base64, exactly as recorded. */
  raw: string
  blockhash: string
  /** The block height past which it can never land (its blockhash's last valid height). */
  lastValidBlockHeight: number
  /** When it was last sent by this process (ms); undefined: not since this process started. */
  sentAt: number | undefined
  /** The last send's refusal (a preflight error), reported if it never lands. */
  error: string | null
}

/**
 * One watcher per Solana chain and process. Every `chain.pollMs` it reads the statuses of all the
 * transactions jobs wait for in one `getSignatureStatuses` call (256 signatures per call, the node's
 * limit) and wakes the jobs whose transaction reached the chain's commitment or failed; those that
 * landed are recorded together. Re-broadcast and expiry are the sweep's, once a second: a transaction
 * the chain has not seen is sent again (the same bytes) while its blockhash is valid, and is declared
 * dropped only once its blockhash expired and a last status read still finds nothing, so a transaction
 * is never given up while it can land. Runs only while some job waits.
 */
export interface SolanaWatcher {
  /** The chain's decision on `tx`, or undefined when `timeoutMs` passed without one. */
  wait(tx: InFlight, options: { timeoutMs: number; signal: AbortSignal }): Promise<LandOutcome | undefined>
  /**
   * Sends a recorded transaction (the same bytes, never signed anew), counted before the bytes leave so
   * a crash right after still knows they may be out there; the sends that start in one turn (a burst of
   * confirms) are counted in one statement, and a transaction that statement does not find recorded (its
   * transaction rolled back) is not sent. A send of a transaction this process sent less than the re-send
   * interval ago is that send (the confirm's and its job's). A refused send (preflight) is recorded and not
   * a failure: the buyer also holds the signed bytes and could still land them, so only the chain decides.
   */
  send(tx: InFlight): Promise<void>
}

interface Watch {
  tx: InFlight
  /** Null at the last status read: unseen by the chain. */
  unseen: boolean
  waiters: Set<(outcome: LandOutcome | undefined | { error: unknown }) => void>
}

/** Re-send an unconfirmed transaction this often: RPC nodes and leaders drop transactions under load. */
const resendEveryMs = 2000
const sweepEveryMs = 1000
/** The node's limit on signatures per getSignatureStatuses call. */
const statusesPerCall = 256
/** A node that holds a status read this long is treated as not answering (the next poll asks again). */
const rpcTimeoutMs = 10_000

export function createSolanaWatcher(db: Db, chain: SolanaChain): SolanaWatcher {
  const watches = new Map<string, Watch>()
  let running = false
  let lastSweep = 0
  let counting: { signatures: string[]; counted: Promise<Set<string>> } | undefined
  /** This process's sends of the last `resendEveryMs`, by signature. */
  const recentSends = new Map<string, Promise<void>>()

  function countSend(signature: string): Promise<Set<string>> {
    let group = counting
    if (!group) {
      const signatures: string[] = []
      // After the other jobs started in this turn have asked too.
      const counted = new Promise((resolve) => setImmediate(resolve)).then(() => {
        if (counting?.signatures === signatures) counting = undefined
        return markSent(db, signatures, new Date())
      })
      group = counting = { signatures, counted }
    }
    group.signatures.push(signature)
    return group.counted
  }

  function send(tx: InFlight): Promise<void> {
    const recent = recentSends.get(tx.signature)
    if (recent) return recent
    const sending = sendRecorded(tx).then(
      (sent) => {
        // Not recorded (yet): nothing left, and a send once it is recorded must not be taken for this one.
        if (sent) setTimeout(() => recentSends.delete(tx.signature), resendEveryMs).unref()
        else recentSends.delete(tx.signature)
      },
      (error: unknown) => {
        recentSends.delete(tx.signature)
        throw error
      },
    )
    recentSends.set(tx.signature, sending)
    return sending
  }

  /** False when `tx` is not recorded, and so was not sent. */
  async function sendRecorded(tx: InFlight): Promise<boolean> {
    if (!(await countSend(tx.signature)).has(tx.signature)) return false
    tx.sentAt = Date.now()
    try {
      await chain.connection.sendRawTransaction(Buffer.from(tx.raw, 'base64'), {
        skipPreflight: false,
        maxRetries: 0,
      })
    } catch (error) {
      tx.error = error instanceof Error ? error.message : String(error)
      await noteSendRefused(db, tx.signature, tx.error, new Date())
    }
    return true
  }

  async function loop(): Promise<void> {
    running = true
    try {
      while (watches.size > 0) {
        // The node could not answer: nothing is decided, the next poll asks again (a job that waits
        // too long hands itself back; a transaction in flight is never given up).
        await tick().catch(() => {})
        if (watches.size === 0) break
        await new Promise<void>((resolve) => setTimeout(resolve, chain.pollMs))
      }
    } finally {
      running = false
    }
  }

  async function tick(): Promise<void> {
    const watching = [...watches.values()]
    await decide(watching, await statusesOf(watching.map((w) => w.tx.signature)))
    if (Date.now() - lastSweep < sweepEveryMs) return
    lastSweep = Date.now()
    await sweep(watching.filter((w) => w.unseen && watches.get(w.tx.signature) === w))
  }

  async function decide(watching: Watch[], statuses: (SignatureStatus | null)[]): Promise<void> {
    const landed: Watch[] = []
    const ended: { watch: Watch; outcome: { kind: 'failed'; error: string } }[] = []
    watching.forEach((watch, i) => {
      const status = statuses[i] ?? null
      watch.unseen = status === null
      if (status?.err) ended.push({ watch, outcome: { kind: 'failed', error: JSON.stringify(status.err) } })
      else if (status && reachedCommitment(status, chain.commitment)) landed.push(watch)
    })
    if (landed.length > 0) {
      await markStates(
        db,
        landed.map((w) => w.tx.signature),
        'landed',
        new Date(),
      )
      for (const watch of landed) finish(watch, { kind: 'landed' })
    }
    for (const { watch, outcome } of ended) {
      await markState(db, watch.tx.signature, 'failed', outcome.error, new Date())
      finish(watch, outcome)
    }
  }

  /** Unseen transactions: dropped once their blockhash expired (checked once per blockhash), else re-sent. */
  async function sweep(unseen: Watch[]): Promise<void> {
    if (unseen.length === 0) return
    const validity = new Map<string, Promise<boolean | undefined>>()
    for (const { tx } of unseen) {
      if (!validity.has(tx.blockhash))
        validity.set(
          tx.blockhash,
          chain.blockhashValid(tx.blockhash).catch(() => undefined),
        )
    }
    const expired: Watch[] = []
    const resend: Watch[] = []
    for (const watch of unseen) {
      const valid = await validity.get(watch.tx.blockhash)
      if (valid === false) expired.push(watch)
      else if (valid === true && (watch.tx.sentAt ?? Number.NEGATIVE_INFINITY) + resendEveryMs <= Date.now())
        resend.push(watch)
    }
    if (expired.length > 0) {
      // Any node's "expired" is only a reason to look closer (a node behind does not know a newer
      // blockhash and calls it invalid). A transaction is dead only when ONE node, in one request, has
      // finalized past its last valid block height and, at or past that slot, has no status for it:
      // it cannot land any more, and had it landed that node would have it (chain.ts, proveUnlanded).
      const proof = await chain.proveUnlanded(expired.map((w) => w.tx.signature)).catch(() => undefined)
      if (!proof) return
      await decide(expired, proof.statuses)
      for (const watch of expired.filter((w) => w.unseen && watches.get(w.tx.signature) === w)) {
        if (proof.finalizedHeight <= watch.tx.lastValidBlockHeight) continue
        const error = watch.tx.error ?? 'blockhash expired before it landed'
        await markState(db, watch.tx.signature, 'dropped', error, new Date())
        finish(watch, { kind: 'dropped', error })
      }
    }
    await Promise.all(resend.map((watch) => send(watch.tx)))
  }

  async function statusesOf(signatures: string[]): Promise<(SignatureStatus | null)[]> {
    const chunks: string[][] = []
    for (let i = 0; i < signatures.length; i += statusesPerCall)
      chunks.push(signatures.slice(i, i + statusesPerCall))
    const answers = await Promise.all(
      chunks.map((chunk) =>
        withTimeout(
          chain.connection.getSignatureStatuses(chunk, { searchTransactionHistory: true }),
          rpcTimeoutMs,
        ),
      ),
    )
    for (const answer of answers) chain.observeSlot(answer.context.slot)
    return answers.flatMap((answer) => answer.value)
  }

  function finish(watch: Watch, outcome: LandOutcome): void {
    if (watches.get(watch.tx.signature) === watch) watches.delete(watch.tx.signature)
    for (const wake of [...watch.waiters]) wake(outcome)
  }

  return {
    send,
    wait(tx, options) {
      return new Promise((resolve, reject) => {
        if (options.signal.aborted) return reject(options.signal.reason)
        let watch = watches.get(tx.signature)
        if (!watch) {
          watch = { tx: { ...tx }, unseen: false, waiters: new Set() }
          watches.set(tx.signature, watch)
        } else if ((tx.sentAt ?? 0) > (watch.tx.sentAt ?? 0)) {
          watch.tx.sentAt = tx.sentAt
        }
        const own = watch
        const timeout = setTimeout(() => wake(undefined), options.timeoutMs)
        const onAbort = () => wake({ error: options.signal.reason })
        options.signal.addEventListener('abort', onAbort, { once: true })
        function wake(outcome: LandOutcome | undefined | { error: unknown }) {
          if (!own.waiters.delete(wake)) return
          clearTimeout(timeout)
          options.signal.removeEventListener('abort', onAbort)
          // Nobody waits for it any more: stop polling it (a later run watches it again).
          if (own.waiters.size === 0 && watches.get(tx.signature) === own) watches.delete(tx.signature)
          if (outcome && 'error' in outcome && !('kind' in outcome)) reject(outcome.error)
          else resolve(outcome as LandOutcome | undefined)
        }
        own.waiters.add(wake)
        if (!running) void loop()
      })
    },
  }
}

/** A `finalized` chain counts only rooted blocks; `confirmed` counts either (a finalized one is confirmed too). */
export function reachedCommitment(status: SignatureStatus, commitment: SettledCommitment): boolean {
  if (commitment === 'finalized') return status.confirmationStatus === 'finalized'
  return status.confirmationStatus === 'confirmed' || status.confirmationStatus === 'finalized'
}

function withTimeout<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    work,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`No answer within ${ms} ms.`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}
