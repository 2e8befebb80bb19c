import { sql } from 'kysely'
import {
  type Address,
  type Hash,
  type Hex,
  keccak256,
  parseTransaction,
  type TransactionReceipt,
  TransactionReceiptNotFoundError,
} from 'viem'
import type { Fence } from '../../jobs/fence.js'
import { type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { countFeeBump } from '../../metrics/counters.js'
import { inSpan } from '../../metrics/tracing.js'
import type { FeeReservation } from '../../payments/relayGuards.js'
import type { Db } from '../../store/db.js'
import type { EvmChain } from './chain.js'
import { nodeRefusal } from './nodeErrors.js'
import type { EvmTransactionRow, EvmTxPurpose, EvmTxStatus } from './schema.js'
import { type EvmFees, type EvmSender, signTransaction } from './sender.js'
import type { EvmWatcher } from './watcher.js'

export interface SendOnceParameters {
  db: Db
  chain: EvmChain
  sender: EvmSender
  paymentId: string
  purpose: EvmTxPurpose
  /** A `refund` step's refund: a payment has one step per other purpose, but one per refund. */
  refundId?: string
  /** Which of a payment's several steps of one purpose (schema.ts `step`): sweeps, deposits sent back. */
  step?: string
  to: Address
  data: Hex
  /**
   * Runs before a NEW transaction is signed, outside any lock: the call's gas, estimated on the chain as
   * it is now, which is also its simulation (throw to refuse: a revert is not paid for).
   */
  estimateGas: () => Promise<bigint>
  /**
   * Runs once the new transaction's gas limit and fees are fixed, before it is signed: whatever must
   * hold of exactly what will be sent (a simulation with these fields at the pending block, a budget
   * reservation). Throw to refuse; the transaction is then signed with exactly these fees.
   */
  beforeSign?: (sent: { gas: bigint } & EvmFees) => Promise<void>
  /**
   * The send's fee reservation once beforeSign passed, taken by the sender in the transaction that
   * records it (NewTransaction.reservation, a FastPath), instead of by beforeSign on its own.
   */
  reservation?: (sent: { gas: bigint } & EvmFees) => Promise<FeeReservation>
  /** What a replacement of the step's transaction at higher fees must pass before it is signed. */
  beforeBump?: BumpGuard
  /** The job step's claim: a new transaction is recorded (and so sent) only while it holds. */
  fence?: Fence
  /**
   * The caller knows no transaction of this step was ever recorded, so the lookup is skipped (a FastPath,
   * fastPath.ts): a relay job's first claim, at its first send. Every record of the step is made under a
   * fenced claim of its job, so none can exist before the first; a claim taken over records nothing.
   */
  noPriorRecord?: boolean
}

/**
 * Runs before a fee bump of `row` is signed, with exactly what the replacement will carry (a payer's
 * send: its reservation raised to the new worst case). Throw to leave the transaction at its own fees;
 * resolve `{ cancel }` to replace it with a cancellation instead (at the same fees), `cancel` the code of
 * the refusal, kept with the cancellation (`cancel_code`): the payer's send then never lands, and the
 * key's later nonces no longer wait behind one left below the market fee.
 */
export type BumpGuard = (
  row: EvmTransactionRow,
  sent: { to: Address; data: Hex; gas: bigint } & EvmFees,
) => Promise<{ cancel: string } | undefined>

/**
 * The step's transaction was replaced by a cancellation (its fee bump refused, BumpGuard): it will never
 * land and is never signed again; the step's job fails its payment, with `code` when the cancellation
 * kept the refusal's (null: recorded before migration 036).
 */
export class StepCancelled extends Error {
  override name = 'StepCancelled'
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message)
  }
}

/**
 * A step's transactions recorded sent or landed, newest first (a reverted one moved nothing and is not
 * the step). sendOnce decides from them; a job asks whether its step is already out.
 */
export function recordedSteps(
  db: Db,
  paymentId: string,
  purpose: EvmTxPurpose,
  refundId?: string,
  step?: string,
): Promise<EvmTransactionRow[]> {
  return db
    .selectFrom('evm_transactions')
    .selectAll()
    .where('payment_id', '=', paymentId)
    .where('status', 'in', ['sent', 'succeeded'])
    .where((eb) => {
      const own = eb.and([
        eb('purpose', '=', purpose),
        ...(refundId !== undefined ? [eb('refund_id', '=', refundId)] : []),
        step === undefined ? eb('step', 'is', null) : eb('step', '=', step),
      ])
      // A payer's send may have been replaced by a cancellation (BumpGuard), `step` naming the purpose:
      // read with the step's own records, in the same round trip.
      return cancellable(purpose)
        ? eb.or([own, eb.and([eb('purpose', '=', 'cancel'), eb('step', '=', purpose)])])
        : own
    })
    .orderBy('id', 'desc')
    .execute()
}

/** A payer's sends: the ones a refused fee bump replaces with a cancellation. */
function cancellable(purpose: EvmTxPurpose): boolean {
  return purpose === 'relay' || purpose === 'deploy'
}

/**
 * Sends the executor's transaction for (payment, purpose) at most once.
 *
 * A transaction recorded as succeeded is the one; one recorded as sent is looked up on the chain first
 * (mined or pending: that is the one, and the sweep bumps it when stuck; unknown to the node: broadcast
 * the same signed bytes again, unless its nonce has since been used by another transaction, in which
 * case it can never land and a new one is due). Only then is a new transaction estimated, then numbered,
 * signed and recorded by the key's sender (see sender.ts), then broadcast, in that order: a crash between
 * any two steps leaves a row that the next attempt (or the sweep) finds.
 */
export async function sendOnce(p: SendOnceParameters): Promise<{ hash: Hash; row: EvmTransactionRow }> {
  const { db, chain } = p
  const recorded = p.noPriorRecord ? [] : await recordedSteps(db, p.paymentId, p.purpose, p.refundId, p.step)
  const prior = recorded.filter((row) => row.purpose === p.purpose)
  // Landed and recorded, but the caller died before its own next write (the payment row): that
  // transaction is the step. Signing anew would pay twice (or, for a relay, fail a paid payment
  // because its authorization is already used).
  const succeeded = prior.find((row) => row.status === 'succeeded')
  if (succeeded) return { hash: succeeded.hash as Hash, row: succeeded }
  // A payer's send may have been cancelled (BumpGuard): signing it anew would undo the cancellation.
  const cancels = recorded.filter((row) => row.purpose === 'cancel')
  if (cancels.length > 0) {
    return cancelledStep(db, chain, prior, cancels)
  }
  // Newest first: a replacement comes before the transaction it replaced (same nonce), and whichever
  // of them is mined is the step. Asked of a node at or past the newest block seen (nodes.ts): a node
  // behind says "not found" of what is mined, and believing it would pay twice.
  for (const [nonce, rows] of byNonce(prior)) {
    const fate = await chain.nodes.fateOf(chain.executor.address, BigInt(nonce), rows.map(hashOf))
    if (fate.kind === 'landed' || fate.kind === 'pending')
      return { hash: fate.hash, row: rows.find((row) => row.hash === fate.hash)! }
    if (fate.kind === 'unused') return rebroadcast(db, chain, rows[0]!, p.beforeBump)
    for (const row of rows) await setTxStatus(db, row.hash, 'dropped')
  }

  const gas = withGasHeadroom(await p.estimateGas())
  const fees = p.beforeSign ? await p.sender.fees() : undefined
  if (p.beforeSign && fees) await p.beforeSign({ gas, ...fees })
  const reservation = p.reservation && fees ? await p.reservation({ gas, ...fees }) : undefined
  const row = await p.sender.record({
    paymentId: p.paymentId,
    purpose: p.purpose,
    ...(p.refundId !== undefined ? { refundId: p.refundId } : {}),
    ...(p.step !== undefined ? { step: p.step } : {}),
    to: p.to,
    data: p.data,
    gas,
    ...(fees ? { fees } : {}),
    ...(p.fence ? { fence: p.fence } : {}),
    ...(reservation ? { reservation } : {}),
  })
  try {
    await inSpan(
      'evm.send',
      { 'caipay.payment_id': p.paymentId, 'caipay.chain': chain.caip2, 'caipay.purpose': p.purpose },
      () => broadcast(chain, row.raw as Hex),
    )
  } catch (error) {
    // Its nonce went to another sender of the key: count again before numbering the next ones.
    if (nodeRefusal(error) === 'nonce_too_low') p.sender.forgetChainNonce()
    throw error
  }
  return { hash: row.hash as Hash, row }
}

/**
 * A step replaced by a cancellation: the step's own transaction if it won the nonce after all (it landed,
 * or a node still holds it); RetryLater while the nonce is not used yet (the sweep keeps the cancellation
 * broadcast and bumped: until it lands, the step's transaction could still be mined by a node that has
 * it); StepCancelled once another transaction took the nonce (a landed cancellation is recorded as such
 * first, which marks the step's transactions dropped). Asked of a node at or past the newest block seen.
 */
async function cancelledStep(
  db: Db,
  chain: EvmChain,
  prior: readonly EvmTransactionRow[],
  cancels: readonly EvmTransactionRow[],
): Promise<{ hash: Hash; row: EvmTransactionRow }> {
  const nonce = cancels[0]!.nonce
  const own = prior.filter((row) => row.nonce === nonce)
  const fate = await chain.nodes.fateOf(
    chain.executor.address,
    BigInt(nonce),
    [...own, ...cancels].map(hashOf),
  )
  const stepWon = (fate.kind === 'landed' || fate.kind === 'pending') && own.find((r) => r.hash === fate.hash)
  if (stepWon) return { hash: stepWon.hash as Hash, row: stepWon }
  if (fate.kind === 'pending' || fate.kind === 'unused')
    throw new RetryLater(`The cancellation of nonce ${nonce} has not landed yet.`)
  if (fate.kind === 'landed') await setTxStatus(db, fate.hash, 'succeeded')
  const code = cancels.find((row) => row.cancel_code !== null)?.cancel_code ?? null
  throw new StepCancelled(
    `Its transaction at nonce ${nonce} was replaced by a cancellation (its fee bump was refused${code ? `: ${code}` : ''}): it never lands.`,
    code,
  )
}

/** The same signed bytes again; dropped for its fees (base fee rose past its cap), a replacement. */
async function rebroadcast(
  db: Db,
  chain: EvmChain,
  row: EvmTransactionRow,
  guard: BumpGuard | undefined,
): Promise<{ hash: Hash; row: EvmTransactionRow }> {
  try {
    await broadcast(chain, row.raw as Hex)
  } catch (error) {
    if (!feesTooLow(error)) throw error
    const replacement = await replaceWithHigherFees(db, chain, row, guard)
    if (!replacement) throw error
    if (replacement.row.purpose === 'cancel' && row.purpose !== 'cancel')
      throw new RetryLater(
        `The ${row.purpose} ${row.hash} was replaced by the cancellation ${replacement.hash}.`,
      )
    return replacement
  }
  return { hash: row.hash as Hash, row }
}

/**
 * The key's in-flight transactions, looked after outside any payment's step (the watcher runs it between
 * blocks): one the node's pool lacks (a crash between record and send, a lost broadcast) is broadcast
 * again, byte for byte; one pending past `feeBumpAfterMs` is replaced with higher fees; a nonce the
 * chain has used for none of its recorded transactions is marked dropped (the step then sends anew).
 */
export async function sweepInFlight(db: Db, chain: EvmChain, guard?: BumpGuard): Promise<void> {
  const rows = await db
    .selectFrom('evm_transactions')
    .selectAll()
    .where('chain_id', '=', chain.caip2)
    .where('sender', '=', chain.executor.address.toLowerCase())
    .where('status', '=', 'sent')
    .orderBy('nonce')
    .orderBy('id', 'desc')
    .execute()
  if (rows.length === 0) return
  const address = chain.executor.address
  const [latest, pending] = await Promise.all([
    chain.publicClient.getTransactionCount({ address, blockTag: 'latest' }),
    chain.publicClient.getTransactionCount({ address, blockTag: 'pending' }),
  ])
  const now = Date.now()
  for (const [nonce, all] of byNonce(rows)) {
    const newest = all[0]!
    const age = now - newest.created_at.getTime()
    // Just recorded: its own step is broadcasting it right now.
    if (age < resendAfterMs) continue
    if (BigInt(nonce) >= BigInt(pending)) {
      await rebroadcast(db, chain, newest, guard).catch(() => {})
    } else if (BigInt(nonce) < BigInt(latest)) {
      // The counts above may come from any node; "dropped" only from one at or past the newest block.
      const fate = await chain.nodes.fateOf(address, BigInt(nonce), all.map(hashOf)).catch(() => undefined)
      if (fate?.kind === 'taken') for (const row of all) await setTxStatus(db, row.hash, 'dropped')
      // No job waits for a cancellation: it is recorded here (which drops the send it replaced).
      const landed = fate?.kind === 'landed' ? all.find((row) => row.hash === fate.hash) : undefined
      if (landed?.purpose === 'cancel') await setTxStatus(db, landed.hash, 'succeeded')
    } else if (age >= chain.feeBump.afterMs) {
      await replaceWithHigherFees(db, chain, newest, guard).catch(() => {})
    }
  }
}

/** Rows by nonce, in their order (a nonce's first row is its newest where the rows come newest first). */
function byNonce(rows: readonly EvmTransactionRow[]): Map<string, EvmTransactionRow[]> {
  const grouped = new Map<string, EvmTransactionRow[]>()
  for (const row of rows) grouped.set(row.nonce, [...(grouped.get(row.nonce) ?? []), row])
  return grouped
}

const hashOf = (row: EvmTransactionRow) => row.hash as Hash

/** How long the sweep leaves a new transaction to its own step's broadcast. */
const resendAfterMs = 2_000

function feesTooLow(error: unknown): boolean {
  return nodeRefusal(error) === 'fees_too_low'
}

/**
 * The gas limit for an estimate. The estimate is of the chain as it is now; the transaction runs on the
 * chain as it is when mined, and that can cost more: a token balance going from zero to non-zero costs
 * 17,100 gas more than the non-zero balance the estimate saw (a settlement that emptied the collection
 * address was mined first, and a relay estimated before it ran out of gas). Unused gas is not charged.
 */
export const withGasHeadroom = (estimate: bigint) => estimate + estimate / 10n + 25_000n

/** Nodes accept a replacement only with both fees at least 10 % higher; 12.5 % is geth's own step. */
const bump = (fee: bigint) => (fee * 1125n) / 1000n + 1n

/**
 * Signs, records and broadcasts a replacement of `row` (same nonce, same call, higher fees: the bumped
 * old fees or today's estimate, whichever is higher, up to `chain.feeBump.maxFeePerGas`). Every hash
 * stays recorded, so whichever one is mined is found. Undefined when the cap leaves no room to bump.
 * `guard` runs on exactly what the replacement will carry before it is signed; its refusal is thrown,
 * and its `cancel` makes the replacement a cancellation (purpose `cancel`, step the replaced purpose,
 * `cancel_code` the refusal's code): recorded before it is sent like every executor transaction. A
 * cancellation's own bumps keep its code (the row is copied).
 */
async function replaceWithHigherFees(
  db: Db,
  chain: EvmChain,
  row: EvmTransactionRow,
  guard: BumpGuard | undefined,
): Promise<{ hash: Hash; row: EvmTransactionRow } | undefined> {
  const old = parseTransaction(row.raw as Hex)
  if (old.type !== 'eip1559' || old.maxFeePerGas === undefined || old.maxPriorityFeePerGas === undefined)
    return undefined
  const cap = chain.feeBump.maxFeePerGas
  const estimate = await chain.publicClient.estimateFeesPerGas()
  const maxFeePerGas = min(max(bump(old.maxFeePerGas), estimate.maxFeePerGas), cap)
  const maxPriorityFeePerGas = min(
    max(bump(old.maxPriorityFeePerGas), estimate.maxPriorityFeePerGas),
    maxFeePerGas,
  )
  if (maxFeePerGas < bump(old.maxFeePerGas) || maxPriorityFeePerGas < bump(old.maxPriorityFeePerGas))
    return undefined
  const verdict =
    guard && old.to && old.gas !== undefined
      ? await guard(row, {
          to: old.to,
          data: old.data ?? '0x',
          gas: old.gas,
          maxFeePerGas,
          maxPriorityFeePerGas,
        })
      : undefined
  const fees = { nonce: Number(row.nonce), maxFeePerGas, maxPriorityFeePerGas }
  // A cancellation: nothing but the nonce, at the bumped fees (the service's cost, docs/security-model.md).
  const raw = await signTransaction(
    chain,
    verdict
      ? {
          type: 'eip1559',
          chainId: chain.chainId,
          to: chain.executor.address,
          value: 0n,
          gas: 21_000n,
          ...fees,
        }
      : {
          type: 'eip1559',
          chainId: chain.chainId,
          to: old.to ?? null,
          ...(old.data ? { data: old.data } : {}),
          value: old.value ?? 0n,
          ...(old.gas !== undefined ? { gas: old.gas } : {}),
          ...fees,
        },
  )
  const hash = keccak256(raw)
  const now = new Date()
  const replacing = verdict
    ? { purpose: 'cancel' as const, step: row.purpose, refund_id: null, cancel_code: verdict.cancel }
    : {}
  const replacement = await db
    .insertInto('evm_transactions')
    .values({ ...withoutId(row), ...replacing, hash, raw, status: 'sent', created_at: now, updated_at: now })
    .returningAll()
    .executeTakeFirstOrThrow()
  countFeeBump(chain.caip2)
  try {
    await broadcast(chain, raw)
  } catch (error) {
    // Still too low for this node: recorded and unknown to it, so the next attempt bumps again.
    if (!feesTooLow(error)) throw error
  }
  return { hash, row: replacement }
}

function withoutId({ id: _id, ...rest }: EvmTransactionRow) {
  return rest
}

const max = (a: bigint, b: bigint) => (a > b ? a : b)
const min = (a: bigint, b: bigint) => (a < b ? a : b)

/**
 * Sends (or finds) a step's transaction and waits, through the chain's watcher, until one of the step's
 * transactions (replacements included) has its confirmations, up to `timeoutMs`. A step whose
 * transactions were all dropped (their nonce went to another) sends again. Undefined receipt: nothing
 * mined yet (the caller hands the job back; the hashes stay recorded).
 */
export async function sendAndWait(
  watcher: EvmWatcher,
  step: { paymentId: string; purpose: EvmTxPurpose; refundId?: string; step?: string },
  send: () => Promise<Hash>,
  options: { timeoutMs: number; signal: AbortSignal; idle: JobRunContext['idle'] },
): Promise<{ hash: Hash; receipt: TransactionReceipt | undefined }> {
  const deadline = Date.now() + options.timeoutMs
  for (;;) {
    const hash = await send()
    // The job gives its runner slot back while the chain works.
    const outcome = await options.idle(
      watcher.wait(step.paymentId, step.purpose, {
        timeoutMs: Math.max(0, deadline - Date.now()),
        signal: options.signal,
        ...(step.refundId !== undefined ? { refundId: step.refundId } : {}),
        ...(step.step !== undefined ? { step: step.step } : {}),
      }),
    )
    if (outcome.kind === 'receipt') return { hash: outcome.receipt.transactionHash, receipt: outcome.receipt }
    if (outcome.kind === 'timeout' || Date.now() >= deadline) return { hash, receipt: undefined }
  }
}

/**
 * A job's executor step: sent by `send` (sendOnce: recorded under the job's fence before it is broadcast)
 * under one of the key's send slots, then waited for. A failure while its transaction may be out there,
 * and a receipt not seen in time, are RetryLater: the job comes back to the same transaction.
 */
export async function sendStepAndWait(
  db: Db,
  sender: EvmSender,
  watcher: EvmWatcher,
  step: { paymentId: string; purpose: EvmTxPurpose; refundId?: string; step?: string },
  send: () => Promise<Hash>,
  options: { timeoutMs: number; signal: AbortSignal; idle: JobRunContext['idle'] },
): Promise<{ hash: Hash; receipt: TransactionReceipt }> {
  const release = await sender.slot()
  const { hash, receipt } = await sendAndWait(watcher, step, send, options)
    .catch(async (error: unknown) => {
      throw await retryWhileInFlight(db, step.paymentId, step.purpose, error, step.refundId, step.step)
    })
    .finally(release)
  if (!receipt) throw new RetryLater(`The ${step.purpose} transaction ${hash} has no receipt yet.`)
  return { hash, receipt }
}

/**
 * What to throw for `error` from sending or watching (payment, purpose)'s transaction: once one may be out
 * there (a row still `sent`), any failure (a lost send answer, receipts unreadable: timeouts, 429s,
 * malformed answers) is `RetryLater`, so the job never gives up on a transaction that may land.
 */
export async function retryWhileInFlight(
  db: Db,
  paymentId: string,
  purpose: EvmTxPurpose,
  error: unknown,
  refundId?: string,
  step?: string,
): Promise<unknown> {
  if (error instanceof RetryLater) return error
  let query = db
    .selectFrom('evm_transactions')
    .select('id')
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', purpose)
    .where('status', '=', 'sent')
  if (refundId !== undefined) query = query.where('refund_id', '=', refundId)
  if (step !== undefined) query = query.where('step', '=', step)
  const row = await query.executeTakeFirst()
  return row === undefined ? error : new RetryLater(String(error))
}

export async function setTxStatus(db: Db, hash: string, status: EvmTxStatus): Promise<void> {
  await setTxStatuses(db, [hash], status)
}

/** setTxStatus for several transactions (a block's), in two statements. */
export async function setTxStatuses(db: Db, hashes: readonly string[], status: EvmTxStatus): Promise<void> {
  if (hashes.length === 0) return
  await db
    .updateTable('evm_transactions')
    .set({ status, updated_at: new Date() })
    .where('hash', 'in', hashes)
    .execute()
  if (status !== 'succeeded' && status !== 'reverted') return
  // Its nonce is taken: the other transactions signed for that nonce (replacements) can never land.
  await sql`
    UPDATE evm_transactions other SET status = 'dropped', updated_at = now()
    FROM evm_transactions mined
    WHERE mined.hash = ANY(${hashes}::text[]) AND other.chain_id = mined.chain_id
      AND other.sender = mined.sender AND other.nonce = mined.nonce AND other.hash <> mined.hash
      AND other.status = 'sent'`.execute(db)
}

/**
 * Polls for the receipt until `timeoutMs`; undefined when there is none yet, or not yet under
 * `chain.confirmations` blocks (re-read each time, so one removed by a reorg is not counted).
 */
export async function waitForReceipt(
  chain: EvmChain,
  hash: Hash,
  options: { timeoutMs: number; signal: AbortSignal },
): Promise<TransactionReceipt | undefined> {
  const deadline = Date.now() + options.timeoutMs
  // Fast nodes (and L2 sequencers) have the receipt within milliseconds: start short, back off to the interval.
  let waitMs = Math.min(25, chain.pollingIntervalMs)
  for (;;) {
    options.signal.throwIfAborted()
    const receipt = await findReceipt(chain, hash)
    if (receipt && (await confirmed(chain, receipt))) return receipt
    if (Date.now() >= deadline) return undefined
    await sleep(waitMs, options.signal)
    waitMs = Math.min(waitMs * 2, chain.pollingIntervalMs)
  }
}

async function confirmed(chain: EvmChain, receipt: TransactionReceipt): Promise<boolean> {
  if (chain.confirmations <= 1) return true
  const head = await chain.publicClient.getBlockNumber({ cacheTime: 0 })
  return head - receipt.blockNumber + 1n >= BigInt(chain.confirmations)
}

async function findReceipt(chain: EvmChain, hash: Hash): Promise<TransactionReceipt | undefined> {
  try {
    return await chain.publicClient.getTransactionReceipt({ hash })
  } catch (error) {
    if (error instanceof TransactionReceiptNotFoundError) return undefined
    throw error
  }
}

/**
 * Whether the node has the transaction at all (mined or in its pool), asked of a node at or past the
 * newest block seen: a replica behind does not know what was mined since.
 */
export async function isKnownTransaction(chain: EvmChain, hash: Hash): Promise<boolean> {
  return (await chain.nodes.find([hash])).kind !== 'unknown'
}

/** A node that already has these bytes says so in many ways; all of them mean "it is in". */
async function broadcast(chain: EvmChain, raw: Hex): Promise<void> {
  try {
    await chain.publicClient.sendRawTransaction({ serializedTransaction: raw })
  } catch (error) {
    if (nodeRefusal(error) === 'already_known') return
    throw error
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal.reason)
    }
    signal.addEventListener('abort', onAbort, { once: true })
  })
}
