import {
  type Address,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  type Hex,
  parseAbiItem,
  parseEventLogs,
  type TransactionReceipt,
} from 'viem'
import { canonicalCaip, sameCaip } from '../../../caip/caip.js'
import { newId } from '../../ids.js'
import { rearmJob } from '../../jobs/queue.js'
import { type JobHandler, RetryLater } from '../../jobs/runner.js'
import { type Db, inTransaction } from '../../store/db.js'
import { eip3009Abi } from './abi.js'
import type { EvmAsset, EvmChain } from './chain.js'
import { pushForwarderFactoryAbi } from './forwarder/artifact.js'
import { confirmedBlock } from './ledger.js'
import { evmJobKinds } from './outcome.js'
import {
  depositAddressOf,
  depositSalt,
  ensureFactory,
  lateWatchMs,
  pushFactoryAddress,
  queueSweep,
  recordPushTransfer,
  sendStep,
} from './push.js'
import { chainOf, type JobSettings } from './relay.js'
import type { EvmStrayRecoveryRow } from './straySchema.js'
import { setTxStatus } from './transactions.js'
import { refuseOnRevert, same } from './transfers.js'
import './straySchema.js'

/**
 * Stray money at EVM deposit addresses (docs/push-payments.md, "Stray money"): what a payment's deposit
 * address holds that no push scan applies (native ETH, a token caipay does not configure, a configured
 * token on a chain whose scan does not watch the payment). `strayHoldings` reads it from the chain. An
 * operator moves native ETH or an unconfigured token with a recovery (`caipay deposits recover --to`): a
 * row recorded first, then job `evm.stray_recover` sends `factory.sweep(salt, token, to)` or
 * `factory.sweepNative(salt, to)` through the fenced executor path (purpose `recover`, step the recovery
 * id: recorded before it is sent, sent once); none of it is in the ledger, as it never reaches an address
 * the ledger carries. A configured token is adopted instead (adoptStrayTransfers): the payment's push
 * sweep brings it to the collection address and the ledger books it like any push transfer.
 */

/** `native` in the CLI; in rows, the chain's native asset as CAIP-19 (SLIP-44 60, ether). */
export const nativeAsset = (chainId: string) => `${chainId}/slip44:60`

/** The ERC-20 token of a CAIP-19 `…/erc20:0x…`, or undefined for the native asset. */
export function tokenOf(asset: string): Address | undefined {
  const match = /\/erc20:(0x[0-9a-fA-F]{40})$/.exec(asset)
  return match ? getAddress(match[1]!) : undefined
}

/** The chain's deposit address of the payment (the same wherever the factory's address is). */
export function strayDepositAddress(chain: EvmChain, paymentId: string): Address {
  return depositAddressOf(pushFactoryAddress(chain.executor.address), paymentId)
}

/**
 * The push assets of `chain` whose Transfer logs into the payment's deposit address its scan reads (the
 * payment offered them there, and it expired less than `lateWatchMs` ago): the scan's sweep, not a
 * recovery, moves them. Past that window a recovery adopts them like a configured token never offered.
 */
export async function watchedAssets(
  db: Db,
  chain: EvmChain,
  paymentId: string,
  now: Date = new Date(),
): Promise<string[]> {
  const rows = await db
    .selectFrom('evm_push_deposits as d')
    .innerJoin('payments as p', 'p.id', 'd.payment_id')
    .select('d.asset')
    .where('d.payment_id', '=', paymentId)
    .where('d.chain_id', '=', chain.caip2)
    .where('p.expires_at', '>', new Date(now.getTime() - lateWatchMs))
    .execute()
  return rows.map((r) => r.asset).filter((asset) => chain.asset(asset)?.push !== false)
}

/**
 * Who moves an asset found at a deposit address: `scan`, the push scan's sweep (the payment offered it
 * there); `deposit`, `caipay deposits recover` books it as the payment's (a configured token no scan
 * watches for it: another chain's, or `push: false`); `move`, `caipay deposits recover --to` moves it out
 * (native ETH, a token caipay does not configure on the chain).
 */
export type StrayHandling = 'scan' | 'deposit' | 'move'

export interface StrayHolding {
  chainId: string
  depositAddress: Address
  /** CAIP-19. */
  asset: string
  /** Smallest units, at `block`. */
  balance: string
  handledBy: StrayHandling
  /** ERC-20 only: who sent it (Transfer logs into the address since the payment was made), with how much. */
  senders: { address: Address; amount: string }[]
  block: string
  /** The token could not be read (not an ERC-20 on this chain). */
  error?: string
}

const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)')
const logRange = 10_000n

/**
 * What the payment's deposit address on `chain` holds: native, each configured token and each of
 * `tokens`, every read at one block (the newest the chain's nodes have shown), and for tokens with a
 * balance or an arrival, their senders from the Transfer logs since `since` (the payment's creation).
 */
export async function strayHoldings(
  db: Db,
  chain: EvmChain,
  params: { paymentId: string; since: Date; tokens: readonly Address[]; senders?: boolean },
): Promise<StrayHolding[]> {
  const address = strayDepositAddress(chain, params.paymentId)
  await chain.publicClient.getBlockNumber({ cacheTime: 0 })
  const block = chain.nodes.highest()
  const watched = await watchedAssets(db, chain, params.paymentId)
  const handledBy = (asset: string): StrayHandling =>
    watched.some((w) => sameCaip(w, asset)) ? 'scan' : chain.asset(asset) ? 'deposit' : 'move'
  const base = { chainId: chain.caip2, depositAddress: address, block: block.toString() }
  const native = await chain.publicClient.getBalance({ address, blockNumber: block })
  const holdings: StrayHolding[] = [
    { ...base, asset: nativeAsset(chain.caip2), balance: native.toString(), handledBy: 'move', senders: [] },
  ]
  const tokens = [...chain.assets.map((a) => a.token), ...params.tokens].filter(
    (token, i, all) => all.findIndex((t) => same(t, token)) === i,
  )
  let fromBlock: bigint | undefined
  for (const token of tokens) {
    const asset = `${chain.caip2}/erc20:${token}`
    const holding: StrayHolding = { ...base, asset, balance: '0', handledBy: handledBy(asset), senders: [] }
    holdings.push(holding)
    try {
      const balance = await chain.publicClient.readContract({
        address: token,
        abi: erc20Abi,
        functionName: 'balanceOf',
        args: [address],
        blockNumber: block,
      })
      holding.balance = balance.toString()
    } catch (error) {
      holding.error = `not readable as an ERC-20 at block ${block}: ${firstLine(error)}`
      continue
    }
    if (params.senders === false) continue
    try {
      fromBlock ??= await firstBlockAfter(chain, params.since, block)
      holding.senders = await sendersOf(chain, token, address, fromBlock, block)
    } catch (error) {
      holding.error = `its Transfer logs could not be read up to block ${block}: ${firstLine(error)}`
    }
  }
  return holdings
}

/** The Transfer logs of `token` into `to` over [fromBlock, toBlock], in ranges public nodes accept. */
async function transfersInto(
  chain: EvmChain,
  token: Address,
  to: Address,
  fromBlock: bigint,
  toBlock: bigint,
) {
  const found = []
  for (let from = fromBlock; from <= toBlock; from += logRange) {
    const end = from + logRange - 1n < toBlock ? from + logRange - 1n : toBlock
    found.push(
      ...(await chain.nodes.getLogs({
        address: token,
        event: transferEvent,
        args: { to },
        fromBlock: from,
        toBlock: end,
      })),
    )
  }
  return found
}

/** The Transfer logs of `token` into `to`, summed by sender. */
async function sendersOf(
  chain: EvmChain,
  token: Address,
  to: Address,
  fromBlock: bigint,
  toBlock: bigint,
): Promise<{ address: Address; amount: string }[]> {
  const sums = new Map<Address, bigint>()
  for (const log of await transfersInto(chain, token, to, fromBlock, toBlock)) {
    const sender = getAddress(log.args.from!)
    sums.set(sender, (sums.get(sender) ?? 0n) + (log.args.value ?? 0n))
  }
  return [...sums].map(([address, amount]) => ({ address, amount: amount.toString() }))
}

/**
 * The first block at or after `time` less an hour (clocks differ), by bisection over [0, head]: nothing
 * can have been sent to a deposit address before its payment (and so its address) existed.
 */
async function firstBlockAfter(chain: EvmChain, time: Date, head: bigint): Promise<bigint> {
  const target = BigInt(Math.floor(time.getTime() / 1000) - 3600)
  let low = 0n
  let high = head
  while (low < high) {
    const middle = (low + high) / 2n
    const { timestamp } = await chain.publicClient.getBlock({ blockNumber: middle })
    if (timestamp < target) low = middle + 1n
    else high = middle
  }
  return low
}

function firstLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0]!
}

/**
 * Records a recovery of `asset` at the payment's deposit address on `chainId` to `to`, and queues the job
 * that sends it (again when it already ran for the payment: its row is reused). One recovery of an asset
 * at a time: a second while one is queued is refused.
 */
export async function queueRecovery(
  db: Db,
  params: {
    paymentId: string
    chainId: string
    depositAddress: Address
    asset: string
    to: Address
    now: Date
  },
): Promise<EvmStrayRecoveryRow> {
  const queued = await db
    .selectFrom('evm_stray_recoveries')
    .select('id')
    .where('payment_id', '=', params.paymentId)
    .where('chain_id', '=', params.chainId)
    .where('asset', '=', params.asset)
    .where('status', '=', 'queued')
    .executeTakeFirst()
  if (queued) throw new Error(`Recovery ${queued.id} of ${params.asset} is already queued for this payment.`)
  const row = await db
    .insertInto('evm_stray_recoveries')
    .values({
      id: newId('recovery'),
      payment_id: params.paymentId,
      chain_id: params.chainId,
      deposit_address: params.depositAddress.toLowerCase(),
      asset: params.asset,
      to_address: params.to.toLowerCase(),
      status: 'queued',
      created_at: params.now,
      updated_at: params.now,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
  await rearmJob(db, { kind: evmJobKinds.strayRecover, paymentId: params.paymentId, now: params.now })
  return row
}

/**
 * The payment's chains for stray money: every configured chain whose deposit address for it is one the
 * payment offered (the same factory, so the same executor key and deployment proxy). Throws a one-line
 * Error for an unknown or test-mode payment, or one that never offered an EVM deposit address.
 */
export async function strayChains(
  db: Db,
  chains: readonly EvmChain[],
  paymentId: string,
): Promise<{ createdAt: Date; amount: { unit: string; value: string }; chains: EvmChain[] }> {
  const payment = await db
    .selectFrom('payments')
    .select(['mode', 'created_at', 'amount_unit', 'amount_value'])
    .where('id', '=', paymentId)
    .executeTakeFirst()
  if (!payment) throw new Error(`No payment ${paymentId}.`)
  if (payment.mode !== 'live')
    throw new Error(`Payment ${paymentId} is a test-mode payment: it has no deposit address on a chain.`)
  const offered = await db
    .selectFrom('evm_push_deposits')
    .select('address')
    .distinct()
    .where('payment_id', '=', paymentId)
    .execute()
  if (offered.length === 0) throw new Error(`Payment ${paymentId} never offered an EVM deposit address.`)
  const matching = chains.filter((chain) =>
    offered.some((o) => same(o.address, strayDepositAddress(chain, paymentId))),
  )
  if (matching.length === 0)
    throw new Error(
      `No configured EVM chain has payment ${paymentId}'s deposit address (${offered.map((o) => o.address).join(', ')}); is its executor key configured?`,
    )
  return {
    createdAt: payment.created_at,
    amount: { unit: payment.amount_unit, value: String(payment.amount_value) },
    chains: matching,
  }
}

/** `caipay deposits stray`: what the payment's deposit address holds on each of its chains, and its recoveries. */
export async function inspectStray(
  db: Db,
  chains: readonly EvmChain[],
  params: { paymentId: string; tokens: readonly Address[] },
): Promise<{ holdings: StrayHolding[]; recoveries: EvmStrayRecoveryRow[] }> {
  const found = await strayChains(db, chains, params.paymentId)
  const holdings: StrayHolding[] = []
  for (const chain of found.chains)
    holdings.push(
      ...(await strayHoldings(db, chain, {
        paymentId: params.paymentId,
        since: found.createdAt,
        tokens: params.tokens,
      })),
    )
  return { holdings, recoveries: await listRecoveries(db, { paymentId: params.paymentId }) }
}

/**
 * `caipay deposits recover`: what `asset` (`native` or a token address) at the payment's deposit address
 * on `chainId` becomes. A configured token no scan watches for the payment there is adopted
 * (adoptStrayTransfers: the push sweep books it as the payment's); native ETH or an unconfigured token is
 * moved to `to` (a recovery, when the address holds some at the newest block the nodes show). Throws a
 * one-line Error when it cannot.
 */
export async function requestRecovery(
  db: Db,
  chains: readonly EvmChain[],
  params: {
    paymentId: string
    chainId: string
    asset: 'native' | Address
    to: Address | undefined
    /** What an amount is in a configured token (gateway/quote.ts tokenAmountFor); null: not priceable in it. */
    tokenAmount: (amount: { unit: string; value: string }, asset: EvmAsset) => bigint | null
    now: Date
  },
): Promise<
  | { kind: 'recovery'; recovery: EvmStrayRecoveryRow }
  | { kind: 'deposit'; asset: string; depositAddress: Address; transfers: number }
> {
  const found = await strayChains(db, chains, params.paymentId)
  const chain = found.chains.find((c) => sameCaip(c.caip2, params.chainId))
  if (!chain)
    throw new Error(
      `Payment ${params.paymentId} has no deposit address on ${params.chainId} (its chains: ${found.chains.map((c) => c.caip2).join(', ')}).`,
    )
  const asset =
    params.asset === 'native' ? nativeAsset(chain.caip2) : `${chain.caip2}/erc20:${getAddress(params.asset)}`
  if ((await watchedAssets(db, chain, params.paymentId)).some((w) => sameCaip(w, asset)))
    throw new Error(
      `${asset} is swept into the collection address by the push scan for payment ${params.paymentId}; what arrived is in "caipay deposits list".`,
    )
  const configured = chain.asset(asset)
  if (configured) {
    if (params.to)
      throw new Error(
        `${asset} is configured on ${chain.caip2}: it is booked as payment ${params.paymentId}'s deposit and goes back to its sender by the deposit rules; omit --to.`,
      )
    const due = params.tokenAmount(found.amount, configured)
    if (due === null || due <= 0n)
      throw new Error(`Payment ${params.paymentId} is not priced in ${asset}; nothing was booked.`)
    const transfers = await adoptStrayTransfers(db, chain, {
      paymentId: params.paymentId,
      asset: configured,
      since: found.createdAt,
      due,
      now: params.now,
    })
    return { kind: 'deposit', asset, depositAddress: strayDepositAddress(chain, params.paymentId), transfers }
  }
  if (!params.to) throw new Error(`${asset} is not configured on ${chain.caip2}: give --to, where it goes.`)
  const holding = (
    await strayHoldings(db, chain, {
      paymentId: params.paymentId,
      since: found.createdAt,
      tokens: params.asset === 'native' ? [] : [getAddress(params.asset)],
      senders: false,
    })
  ).find((h) => sameCaip(h.asset, asset))!
  if (holding.error) throw new Error(`${asset}: ${holding.error}`)
  if (BigInt(holding.balance) === 0n)
    throw new Error(
      `${holding.depositAddress} holds no ${asset} at block ${holding.block}; nothing to recover.`,
    )
  const recovery = await queueRecovery(db, {
    paymentId: params.paymentId,
    chainId: chain.caip2,
    depositAddress: holding.depositAddress,
    asset,
    to: params.to,
    now: params.now,
  })
  return { kind: 'recovery', recovery }
}

/**
 * A configured token at the payment's deposit address on a chain whose scan does not watch it for the
 * payment: its Transfer logs since the payment was made, up to the chain's confirmed block, are recorded
 * as the scan records a found transfer (once each, by log), with the payment's deposit record for the
 * asset, and the payment's push sweep is queued. From there it is a push transfer like any: swept into
 * the collection address, then applied (counted toward an open payment; a deposit, `late` or
 * `duplicate`, sent back to its sender at once, for a closed one). Answers how many were new; none is
 * an Error (nothing to recover).
 */
export async function adoptStrayTransfers(
  db: Db,
  chain: EvmChain,
  params: { paymentId: string; asset: EvmAsset; since: Date; due: bigint; now: Date },
): Promise<number> {
  const address = strayDepositAddress(chain, params.paymentId)
  const confirmed = await confirmedBlock(chain)
  const from = await firstBlockAfter(chain, params.since, confirmed)
  const logs = await transfersInto(chain, params.asset.token, address, from, confirmed)
  const asset = canonicalCaip(params.asset.id)
  const added = await inTransaction(db, async (trx) => {
    await trx
      .insertInto('evm_push_deposits')
      .values({
        payment_id: params.paymentId,
        asset,
        chain_id: chain.caip2,
        address: address.toLowerCase(),
        amount: params.due.toString(),
        created_at: params.now,
      })
      .onConflict((oc) => oc.columns(['payment_id', 'asset']).doNothing())
      .execute()
    let inserted = 0
    for (const log of logs) {
      if (!log.args.value) continue
      const logged = { ...log, args: { from: log.args.from!, value: log.args.value } }
      const recorded = await recordPushTransfer(trx, chain, {
        paymentId: params.paymentId,
        asset,
        depositAddress: address,
        log: logged,
        now: params.now,
      })
      if (recorded) inserted += 1
    }
    if (inserted > 0) await queueSweep(trx, params.paymentId, params.now)
    return inserted
  })
  if (added === 0)
    throw new Error(
      `No transfer of ${asset} into ${address} up to block ${confirmed} that is not recorded already; nothing to recover.`,
    )
  return added
}

export function listRecoveries(db: Db, filter: { paymentId?: string }): Promise<EvmStrayRecoveryRow[]> {
  let query = db.selectFrom('evm_stray_recoveries').selectAll()
  if (filter.paymentId) query = query.where('payment_id', '=', filter.paymentId)
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(1000).execute()
}

/**
 * Job `evm.stray_recover` of a payment: each queued recovery is one executor transaction through the
 * factory (deployed first when it has no code), recorded before it is sent and found again after a
 * crash; the amount moved is read from the receipt (the token's Transfer log, or the factory's
 * NativeSwept event) and recorded with the transaction.
 */
export function strayRecoverJob(settings: JobSettings): JobHandler {
  return {
    maxAttempts: 10,
    retryDelayMs: (attempts) => Math.min(10_000, 250 * 2 ** attempts),
    async run(job, ctx) {
      const queued = await ctx.db
        .selectFrom('evm_stray_recoveries')
        .selectAll()
        .where('payment_id', '=', job.payment_id)
        .where('status', '=', 'queued')
        .orderBy('created_at')
        .execute()
      const moved: { id: string; amount: string; txHash: string }[] = []
      for (const recovery of queued) {
        const chain = chainOf(settings, recovery.chain_id)
        // Since it was queued, the payment may have offered this token here: the scan's sweep has it now.
        if ((await watchedAssets(ctx.db, chain, job.payment_id)).some((w) => sameCaip(w, recovery.asset))) {
          await finish(
            ctx.db,
            recovery.id,
            { status: 'failed', error: 'watched by the push scan' },
            ctx.now(),
          )
          continue
        }
        const token = tokenOf(recovery.asset)
        const to = getAddress(recovery.to_address)
        const factory = pushFactoryAddress(chain.executor.address)
        const data: Hex = token
          ? encodeFunctionData({
              abi: pushForwarderFactoryAbi,
              functionName: 'sweep',
              args: [depositSalt(job.payment_id), token, to],
            })
          : encodeFunctionData({
              abi: pushForwarderFactoryAbi,
              functionName: 'sweepNative',
              args: [depositSalt(job.payment_id), to],
            })
        const recorded = await ctx.db
          .selectFrom('evm_transactions')
          .select('id')
          .where('payment_id', '=', job.payment_id)
          .where('purpose', '=', 'recover')
          .where('step', '=', recovery.id)
          .executeTakeFirst()
        if (!recorded) await ensureFactory(settings, ctx, job, chain)
        const receipt = await sendStep(
          settings,
          ctx,
          chain,
          { paymentId: job.payment_id, purpose: 'recover', step: recovery.id },
          {
            to: factory,
            data,
            estimateGas: () =>
              refuseOnRevert(
                chain.publicClient.estimateGas({ account: chain.executor, to: factory, data }),
                (reason) => new Error(`The push forwarder factory refused the recovery: ${reason}`),
              ),
          },
        )
        if (receipt.status !== 'success') {
          await setTxStatus(ctx.db, receipt.transactionHash, 'reverted')
          throw new Error(
            `Recovery ${receipt.transactionHash} reverted; sending again with a new transaction.`,
          )
        }
        await setTxStatus(ctx.db, receipt.transactionHash, 'succeeded')
        const amount = movedBy(receipt, { token, from: getAddress(recovery.deposit_address), to, factory })
        await finish(
          ctx.db,
          recovery.id,
          { status: 'moved', amount: amount.toString(), tx_hash: receipt.transactionHash },
          ctx.now(),
        )
        moved.push({ id: recovery.id, amount: amount.toString(), txHash: receipt.transactionHash })
      }
      // Queued while this run was under way (the queueing found the job running and left it): again.
      const left = await ctx.db
        .selectFrom('evm_stray_recoveries')
        .select('id')
        .where('payment_id', '=', job.payment_id)
        .where('status', '=', 'queued')
        .execute()
      if (left.length > 0)
        throw new RetryLater(`${left.length} recovery(ies) queued meanwhile; running again.`)
      return { moved }
    },
    async onGiveUp(job, error, ctx) {
      // The money stays at the deposit address; the operator sees the failure and may recover again.
      await ctx.db
        .updateTable('evm_stray_recoveries')
        .set({ status: 'failed', error: String(error).slice(0, 500), updated_at: ctx.now() })
        .where('payment_id', '=', job.payment_id)
        .where('status', '=', 'queued')
        .execute()
      ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'EVM stray recovery gave up')
    },
  }
}

function finish(
  db: Db,
  id: string,
  set: { status: 'moved' | 'failed'; amount?: string; tx_hash?: string; error?: string },
  now: Date,
) {
  return db
    .updateTable('evm_stray_recoveries')
    .set({ ...set, updated_at: now })
    .where('id', '=', id)
    .where('status', '=', 'queued')
    .execute()
}

/** What the recovery moved: the token's Transfer from the forwarder to `to`, or the NativeSwept amount. */
function movedBy(
  receipt: TransactionReceipt,
  expected: { token: Address | undefined; from: Address; to: Address; factory: Address },
): bigint {
  if (expected.token) {
    const log = parseEventLogs({
      abi: eip3009Abi,
      eventName: 'Transfer',
      logs: receipt.logs,
      strict: true,
    }).find(
      (l) =>
        same(l.address, expected.token!) && same(l.args.from, expected.from) && same(l.args.to, expected.to),
    )
    return log?.args.value ?? 0n
  }
  const swept = parseEventLogs({
    abi: pushForwarderFactoryAbi,
    eventName: 'NativeSwept',
    logs: receipt.logs,
    strict: true,
  }).find((l) => same(l.address, expected.factory))
  return swept?.args.amount ?? 0n
}
