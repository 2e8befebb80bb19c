import { type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { observeSendToFinal } from '../../metrics/counters.js'
import { inSpan } from '../../metrics/tracing.js'
import type { SolanaChain } from './chain.js'
import type { SolanaTransactionRow } from './schema.js'
import type { LandOutcome, SolanaWatcher } from './watcher.js'

/**
 * Gets a recorded transaction on chain, exactly once, whatever happened before: a first run sends it;
 * a run after a crash leaves it to the chain's watcher, which asks the chain first and sends the same
 * bytes again only while the status is unknown and the blockhash still valid. Sending the same bytes
 * twice is harmless (same signature, the runtime refuses duplicates); signing anew would not be, so this
 * never signs. While the chain works the job gives its runner slot back (`idle`). Throws `RetryLater`
 * when nothing is decided within the chain's confirm timeout; the job comes back.
 */
export async function landTransaction(input: {
  chain: SolanaChain
  tx: SolanaTransactionRow
  watcher: SolanaWatcher
  ctx: Pick<JobRunContext, 'signal' | 'idle'>
}): Promise<LandOutcome> {
  const { chain, tx, watcher, ctx } = input
  // Decided by the chain on an earlier run (which then stopped before finishing the step).
  if (tx.state === 'landed') return { kind: 'landed' }
  if (tx.state === 'failed' || tx.state === 'dropped') return { kind: tx.state, error: tx.error ?? tx.state }
  const inFlight = {
    signature: tx.signature,
    raw: tx.raw,
    blockhash: tx.blockhash,
    lastValidBlockHeight: Number(tx.last_valid_block_height),
    sentAt: undefined,
    error: tx.error,
  }
  // Never sent: nobody can have landed it but the buyer, and a send then just reports a duplicate.
  const firstSend = tx.first_sent_at === null
  const sentAtSlot = chain.highestSlot()
  if (firstSend)
    await inSpan(
      'solana.send',
      { 'caipay.payment_id': tx.payment_id, 'caipay.chain': chain.caip2, 'caipay.purpose': tx.purpose },
      () => watcher.send(inFlight),
    )
  const outcome = await ctx.idle(
    watcher.wait(inFlight, { timeoutMs: chain.confirmTimeoutMs, signal: ctx.signal }),
  )
  if (!outcome) throw new RetryLater(`Transaction ${tx.signature} is not confirmed yet.`)
  // Counted from this run's own first send only: a run after a crash does not know when it went out.
  if (firstSend && outcome.kind === 'landed' && sentAtSlot > 0)
    observeSendToFinal('slot', chain.caip2, tx.purpose, chain.highestSlot() - sentAtSlot)
  return outcome
}
