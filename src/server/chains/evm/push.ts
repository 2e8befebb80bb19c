import {
  type Address,
  concat,
  encodeAbiParameters,
  encodeFunctionData,
  erc20Abi,
  getAddress,
  getContractAddress,
  type Hash,
  type Hex,
  keccak256,
  numberToHex,
  parseAbiItem,
  parseEventLogs,
  stringToHex,
  type TransactionReceipt,
} from 'viem'
import { canonicalCaip } from '../../../caip/caip.js'
import type { PushRequest } from '../../../contract/gateway.js'
import type { ServerConfig } from '../../config.js'
import { rearmJob } from '../../jobs/queue.js'
import { type JobHandler, type JobLogger, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import { assertSendsAllowed } from '../../ledger/reconcile.js'
import { depositsRefunding, finishDepositRefund } from '../../payments/deposits.js'
import { applyPushTransfer, holdUnpaidPushes, type PushOutcome } from '../../payments/push.js'
import { type Db, inTransaction } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import type { PushContext } from '../types.js'
import { eip3009Abi } from './abi.js'
import type { EvmAsset, EvmChain } from './chain.js'
import { pushForwarderFactoryAbi, pushForwarderFactoryBytecode } from './forwarder/artifact.js'
import { confirmedBlock } from './ledger.js'
import { evmJobKinds } from './outcome.js'
import type { EvmPushTransferRow } from './pushSchema.js'
import { settlementAddress } from './quote.js'
import { chainOf, type JobSettings, relayerOf } from './relay.js'
import { sendOnce, sendStepAndWait, setTxStatus } from './transactions.js'
import { estimateExecutorTransfer, hasTransfer, refuseOnRevert, same } from './transfers.js'
import './pushSchema.js'

/**
 * EVM push payments (docs/push-payments.md): every payment gets its own deposit address, the
 * counterfactual CREATE2 address of a forwarder its chain's factory deploys (salt from the payment id),
 * offered as an EIP-681 link. The scan reads the tokens' Transfer logs into the deposit addresses up to a
 * confirmed block and records each one; the payment's sweep job then deploys the forwarder and empties it
 * into the collection address in one executor transaction through the factory (recorded before it is
 * sent, once per round, like every executor transaction), and only then applies what arrived
 * (payments/push.ts): the money is at the collection address when the ledger says so.
 */

/**
 * The deterministic deployment proxy (CREATE2 deployer) at the same address on Anvil and most public
 * chains: the factory's address follows from the executor's alone, so a deposit address is known before
 * anything is deployed.
 */
export const create2Deployer: Address = '0x4e59b44847b379578588920cA78FbF26c0B4956C'
const factorySalt = keccak256(stringToHex('caipay.push-forwarder-factory.v1'))

function factoryInitCode(owner: Address): Hex {
  return concat([pushForwarderFactoryBytecode, encodeAbiParameters([{ type: 'address' }], [owner])])
}

/** The chain's forwarder factory, owned (only it may sweep) by the executor. */
export function pushFactoryAddress(owner: Address): Address {
  return getContractAddress({
    opcode: 'CREATE2',
    from: create2Deployer,
    salt: factorySalt,
    bytecode: factoryInitCode(owner),
  })
}

/** The forwarder's CREATE2 salt: the payment's, so one payment has one deposit address per chain. */
export function depositSalt(paymentId: string): Hex {
  return keccak256(stringToHex(`caipay:push:${paymentId}`))
}

/** The forwarder every deposit address is a clone of: the factory's first contract (CREATE, nonce 1). */
export function pushForwarderImplementation(factory: Address): Address {
  return getContractAddress({ opcode: 'CREATE', from: factory, nonce: 1n })
}

/**
 * The payment's deposit address: the CREATE2 address of an EIP-1167 minimal proxy of the forwarder, what
 * PushForwarderFactory.depositAddress(salt) (OpenZeppelin's Clones) answers on chain.
 */
export function depositAddressOf(factory: Address, paymentId: string): Address {
  const implementation = pushForwarderImplementation(factory).slice(2).toLowerCase()
  const cloneCode: Hex = `0x3d602d80600a3d3981f3363d3d373d3d3d363d73${implementation}5af43d82803e903d91602b57fd5bf3`
  return getContractAddress({
    opcode: 'CREATE2',
    from: factory,
    salt: depositSalt(paymentId),
    bytecodeHash: keccak256(cloneCode),
  })
}

/**
 * An EIP-681 link to an ERC-20 `transfer` (`ethereum:<token>@<chainId>/transfer?address=&uint256=`): the
 * token as the target, the amount in the token's smallest unit as a plain integer.
 */
export function eip681TransferUrl(params: {
  token: Address
  chainId: number
  to: Address
  amount: bigint
}): string {
  return `ethereum:${getAddress(params.token)}@${params.chainId}/transfer?address=${getAddress(params.to)}&uint256=${params.amount}`
}

/**
 * The push request of one asset for the gateway's options: the payment's deposit address, recorded with
 * the amount its link asks (what the scan watches; the first record stays). The chain's scan cursor
 * starts at the head the first time a chain offers one. A chain without the deterministic deployment
 * proxy (and no factory already there) offers none: its forwarders could never be swept, so a buyer's
 * transfer would be stuck (docs/push-payments.md, "Not yet").
 *
 * Both codes are read in one request at the newest block seen, from a node whose head has it
 * (`EvmNodes.readAt`): a node behind the proxy's deployment is asked nothing (NodesBehind: no push
 * option this time, read again on the next call). Code found turns push on for the process (code does
 * not go away). "No code" holds for the block it was read at only: a later call reads again once a newer
 * block is seen (the proxy deployed since), at most once per block.
 */
export function createEvmPushQuoter(chain: EvmChain, db: Db, log: JobLogger) {
  const factory = pushFactoryAddress(chain.executor.address)
  let ready = false
  /** The block of the last "no code" answer. */
  let absentAt: bigint | undefined
  let reading: Promise<boolean> | undefined

  async function readReady(): Promise<boolean> {
    // Only the first read needs a fresh head (the scan cursor starts there); a recheck takes viem's
    // cached one, so an options call on a chain without the proxy rarely waits for the node.
    const head = await chain.publicClient.getBlockNumber(absentAt === undefined ? { cacheTime: 0 } : {})
    const block = head > chain.nodes.highest() ? head : chain.nodes.highest()
    if (absentAt !== undefined && block <= absentAt) return false
    const at = numberToHex(block)
    const [deployerCode, factoryCode] = (await chain.nodes.readAt(block, [
      { method: 'eth_getCode', params: [create2Deployer, at] },
      { method: 'eth_getCode', params: [factory, at] },
    ])) as [Hex | null, Hex | null]
    if (!hasCode(deployerCode) && !hasCode(factoryCode)) {
      if (absentAt === undefined)
        log.warn(
          { chain: chain.caip2, deployer: create2Deployer, block: block.toString() },
          'No push options on this chain: the deterministic deployment proxy is not deployed, so deposit addresses could not be swept (read again at newer blocks)',
        )
      absentAt = block
      return false
    }
    await db
      .insertInto('evm_push_scans')
      .values({ chain_id: chain.caip2, scanned_to: head })
      .onConflict((oc) => oc.column('chain_id').doNothing())
      .execute()
    if (absentAt !== undefined)
      log.info(
        { chain: chain.caip2, deployer: create2Deployer, block: block.toString() },
        'Push options on: the deterministic deployment proxy (or the factory) is deployed now',
      )
    ready = true
    return true
  }

  return async function pushRequest(ctx: PushContext): Promise<PushRequest | undefined> {
    const asset = chain.asset(ctx.asset.id)
    if (!asset || asset.push === false) return undefined
    if (!ready) {
      // One read at a time, shared; a failed one (nodes behind, unreachable) decides nothing.
      reading ??= readReady().finally(() => {
        reading = undefined
      })
      if (!(await reading)) return undefined
    }
    const address = depositAddressOf(factory, ctx.payment.id)
    await db
      .insertInto('evm_push_deposits')
      .values({
        payment_id: ctx.payment.id,
        asset: canonicalCaip(asset.id),
        chain_id: chain.caip2,
        address: address.toLowerCase(),
        amount: ctx.tokenAmount.toString(),
        created_at: new Date(),
      })
      .onConflict((oc) => oc.columns(['payment_id', 'asset']).doNothing())
      .execute()
    return {
      url: eip681TransferUrl({
        token: asset.token,
        chainId: chain.chainId,
        to: address,
        amount: ctx.tokenAmount,
      }),
      reference: address,
      recipient: address,
      asset: asset.id,
      amount: ctx.tokenAmount.toString(),
      expiresAt: ctx.expiresAt,
    }
  }
}

function hasCode(code: Hex | null | undefined): boolean {
  return typeof code === 'string' && code !== '0x'
}

/** How long after its expiry a payment's deposit address is still watched (late and duplicate transfers). */
export const lateWatchMs = 24 * 60 * 60 * 1000

/** Blocks per getLogs call (what public nodes accept) and deposit addresses per call (topic list). */
const logRange = 10_000n
const addressesPerCall = 200

const transferEvent = parseAbiItem('event Transfer(address indexed from, address indexed to, uint256 value)')

/**
 * One pass of the chain's push scan: the Transfer logs of its push tokens into the watched deposit
 * addresses, from where the last pass stopped up to a confirmed block (every read names its blocks),
 * each recorded once (`evm_push_transfers`, state `found`) and its payment's sweep job queued. Then what
 * arrived for payments that closed underpaid becomes deposits. Returns the transfers found.
 */
export async function scanEvmPushPayments(
  db: Db,
  chain: EvmChain,
  config: Pick<ServerConfig, 'push'>,
  now: Date = new Date(),
): Promise<number> {
  const cursor = await db
    .selectFrom('evm_push_scans')
    .select('scanned_to')
    .where('chain_id', '=', chain.caip2)
    .executeTakeFirst()
  if (!cursor) return 0
  const assets = chain.assets.filter((a) => a.push !== false)
  const confirmed = await confirmedBlock(chain)
  let from = BigInt(cursor.scanned_to) + 1n
  let found = 0
  while (from <= confirmed) {
    const to = from + logRange - 1n < confirmed ? from + logRange - 1n : confirmed
    const watched = await db
      .selectFrom('evm_push_deposits as d')
      .innerJoin('payments as p', 'p.id', 'd.payment_id')
      .select(['d.payment_id', 'd.asset', 'd.address'])
      .where('d.chain_id', '=', chain.caip2)
      .where('p.mode', '=', 'live')
      .where('p.expires_at', '>', new Date(now.getTime() - lateWatchMs))
      .execute()
    const byKey = new Map(watched.map((d) => [`${d.address}/${d.asset}`, d]))
    const addresses = [...new Set(watched.map((d) => getAddress(d.address)))]
    for (let i = 0; i < addresses.length && assets.length > 0; i += addressesPerCall) {
      const logs = await chain.nodes.getLogs({
        address: assets.map((a) => a.token),
        event: transferEvent,
        args: { to: addresses.slice(i, i + addressesPerCall) },
        fromBlock: from,
        toBlock: to,
      })
      for (const log of logs) {
        const asset = assets.find((a) => same(a.token, log.address))
        const deposit = asset && byKey.get(`${log.args.to!.toLowerCase()}/${canonicalCaip(asset.id)}`)
        const amount = log.args.value
        if (!asset || !deposit || !amount) continue
        // The transfer and its payment's sweep job together: a crash between them would leave a transfer
        // no later pass queues again (it is known by then).
        const inserted = await inTransaction(db, async (trx) => {
          const row = await recordPushTransfer(trx, chain, {
            paymentId: deposit.payment_id,
            asset: deposit.asset,
            depositAddress: deposit.address,
            log: { ...log, args: { from: log.args.from!, value: amount } },
            now,
          })
          if (row) await queueSweep(trx, deposit.payment_id, now)
          return row !== undefined
        })
        if (inserted) found += 1
      }
    }
    await db
      .updateTable('evm_push_scans')
      .set({ scanned_to: to })
      .where('chain_id', '=', chain.caip2)
      .execute()
    from = to + 1n
  }
  await holdUnpaidPushes(db, config, now)
  return found
}

/**
 * One Transfer log into a payment's deposit address, recorded `found` once (its log id); the caller
 * queues the payment's sweep in the same transaction. Whether this call recorded it.
 */
export async function recordPushTransfer(
  db: Db,
  chain: EvmChain,
  p: {
    paymentId: string
    asset: string
    depositAddress: string
    log: {
      transactionHash: Hash
      logIndex: number
      blockNumber: bigint
      args: { from: Address; value: bigint }
    }
    now: Date
  },
): Promise<boolean> {
  const row = await db
    .insertInto('evm_push_transfers')
    .values({
      log_id: `${p.log.transactionHash}:${p.log.logIndex}`,
      payment_id: p.paymentId,
      chain_id: chain.caip2,
      asset: p.asset,
      deposit_address: p.depositAddress.toLowerCase(),
      sender: p.log.args.from.toLowerCase(),
      amount: p.log.args.value.toString(),
      block: p.log.blockNumber,
      log_index: p.log.logIndex,
      holder: holderOf(chain.caip2, chain.executor.address),
      state: 'found',
      found_at: p.now,
    })
    .onConflict((oc) => oc.column('log_id').doNothing())
    .returning('log_id')
    .executeTakeFirst()
  return row !== undefined
}

/**
 * Queues the payment's sweep job for transfers just found: again when an earlier one has run, and taking
 * over one running now, whose run may have listed the found transfers before these (jobs/queue.ts).
 */
export async function queueSweep(db: Db, paymentId: string, now: Date): Promise<void> {
  await rearmJob(db, { kind: evmJobKinds.pushSweep, paymentId, now })
}

/**
 * Job `evm.push_sweep` of a payment: for each asset with found transfers, the forwarder's balance is
 * swept into the collection address (factory deployed first, once per chain), then every transfer that
 * arrived before that sweep is applied to the payment at the time it was found. A transfer that arrived
 * after the sweep waits for the next round. A forwarder found empty was swept already (only the factory,
 * owned by the executor, can move its tokens), so its found transfers are applied at once.
 */
export function pushSweepJob(settings: JobSettings, config: ServerConfig): JobHandler {
  return {
    maxAttempts: 10,
    retryDelayMs: (attempts) => Math.min(10_000, 250 * 2 ** attempts),
    async run(job, ctx) {
      const found = await ctx.db
        .selectFrom('evm_push_transfers')
        .selectAll()
        .where('payment_id', '=', job.payment_id)
        .where('state', '=', 'found')
        .orderBy('block')
        .orderBy('log_index')
        .execute()
      if (found.length === 0) return { swept: 'nothing found' }
      const outcomes: PushOutcome['kind'][] = []
      for (const assetId of [...new Set(found.map((t) => t.asset))]) {
        const rows = found.filter((t) => t.asset === assetId)
        const chain = chainOf(settings, rows[0]!.chain_id)
        const asset = chain.asset(assetId)
        if (!asset) throw new Error(`Asset ${assetId} is not configured on ${chain.caip2}.`)
        const position = await sweepDeposit(settings, ctx, job, chain, asset, rows)
        const covered = rows.filter(
          (t) =>
            position === 'empty' ||
            BigInt(t.block) < position.block ||
            (BigInt(t.block) === position.block && t.log_index < position.logIndex),
        )
        outcomes.push(...(await applySwept(ctx.db, config, chain, covered)))
      }
      // Arrived after the sweep, or found while this run was under way (the scan's queueing found the
      // job running and left it): another round.
      const left = await ctx.db
        .selectFrom('evm_push_transfers')
        .select('log_id')
        .where('payment_id', '=', job.payment_id)
        .where('state', '=', 'found')
        .execute()
      if (left.length > 0) throw new RetryLater(`${left.length} transfer(s) still to sweep; sweeping again.`)
      return { applied: outcomes }
    },
    async onGiveUp(job, error, ctx) {
      // The transfers stay `found` (counted in flight by reconciliation) for an operator to look at.
      ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'EVM push sweep gave up')
    },
  }
}

/**
 * Sweeps the forwarder of the found transfers' deposit address; answers where the sweep's Transfer is in
 * the chain (what arrived before it moved with it), or `empty` when nothing was left to move.
 */
async function sweepDeposit(
  settings: JobSettings,
  ctx: JobRunContext,
  job: JobRow,
  chain: EvmChain,
  asset: EvmAsset,
  rows: readonly EvmPushTransferRow[],
): Promise<{ block: bigint; logIndex: number } | 'empty'> {
  const forwarder = getAddress(rows[0]!.deposit_address)
  const factory = pushFactoryAddress(chain.executor.address)
  // A round is named by its newest arrival: a job run again after a crash finds its recorded sweep.
  const step = `${asset.token.toLowerCase()}:${rows.at(-1)!.log_id}`
  const recorded = await ctx.db
    .selectFrom('evm_transactions')
    .select('id')
    .where('payment_id', '=', job.payment_id)
    .where('purpose', '=', 'sweep')
    .where('step', '=', step)
    .executeTakeFirst()
  if (!recorded) {
    // At or past the newest arrival and the newest block seen: a lagging node's "empty" would apply
    // transfers no sweep has moved.
    const newest = BigInt(rows.at(-1)!.block)
    const seen = chain.nodes.highest()
    const balance = await chain.publicClient.readContract({
      address: asset.token,
      abi: erc20Abi,
      functionName: 'balanceOf',
      args: [forwarder],
      blockNumber: seen > newest ? seen : newest,
    })
    if (balance === 0n) return 'empty'
    await ensureFactory(settings, ctx, job, chain)
  }
  const data = encodeFunctionData({
    abi: pushForwarderFactoryAbi,
    functionName: 'sweep',
    args: [depositSalt(job.payment_id), asset.token, chain.executor.address],
  })
  const receipt = await sendStep(
    settings,
    ctx,
    chain,
    { paymentId: job.payment_id, purpose: 'sweep', step },
    {
      to: factory,
      data,
      estimateGas: () =>
        refuseOnRevert(
          chain.publicClient.estimateGas({ account: chain.executor, to: factory, data }),
          (reason) => new Error(`The push forwarder factory refused the sweep: ${reason}`),
        ),
    },
  )
  const moved = parseEventLogs({
    abi: eip3009Abi,
    eventName: 'Transfer',
    logs: receipt.logs,
    strict: true,
  }).find(
    (log) =>
      same(log.address, asset.token) &&
      same(log.args.from, forwarder) &&
      same(log.args.to, chain.executor.address),
  )
  if (receipt.status !== 'success') {
    await setTxStatus(ctx.db, receipt.transactionHash, 'reverted')
    throw new Error(`Sweep ${receipt.transactionHash} reverted; sweeping again with a new transaction.`)
  }
  await setTxStatus(ctx.db, receipt.transactionHash, 'succeeded')
  // Nothing moved: an earlier sweep had taken everything that arrived before this one.
  if (!moved) return { block: receipt.blockNumber, logIndex: Number.MAX_SAFE_INTEGER }
  return { block: receipt.blockNumber, logIndex: moved.logIndex }
}

/** The chain's forwarder factory, deployed through the CREATE2 deployer when it has no code yet. */
export async function ensureFactory(settings: JobSettings, ctx: JobRunContext, job: JobRow, chain: EvmChain) {
  const factory = pushFactoryAddress(chain.executor.address)
  const code = await chain.publicClient.getCode({ address: factory })
  if (code && code !== '0x') return
  const data = concat([factorySalt, factoryInitCode(chain.executor.address)])
  const receipt = await sendStep(
    settings,
    ctx,
    chain,
    { paymentId: job.payment_id, purpose: 'deploy', step: 'push_factory' },
    {
      to: create2Deployer,
      data,
      estimateGas: () =>
        refuseOnRevert(
          chain.publicClient.estimateGas({ account: chain.executor, to: create2Deployer, data }),
          (reason) =>
            new Error(`Cannot deploy the push forwarder factory through ${create2Deployer}: ${reason}`),
        ),
    },
  )
  await setTxStatus(ctx.db, receipt.transactionHash, receipt.status === 'success' ? 'succeeded' : 'reverted')
  const deployed = await chain.publicClient.getCode({ address: factory, blockNumber: receipt.blockNumber })
  if (!deployed || deployed === '0x') throw new Error(`The push forwarder factory is not at ${factory}.`)
}

/** One executor step, sent once (recorded before it is sent, under the job's fence) and waited for. */
export async function sendStep(
  settings: JobSettings,
  ctx: JobRunContext,
  chain: EvmChain,
  step: { paymentId: string; purpose: 'sweep' | 'deploy' | 'deposit' | 'recover'; step: string },
  tx: { to: Address; data: Hex; estimateGas: () => Promise<bigint> },
): Promise<TransactionReceipt> {
  const relayer = relayerOf(settings, chain)
  const send = async (): Promise<Hash> => {
    const { hash } = await sendOnce({
      db: ctx.db,
      chain,
      sender: relayer.sender,
      ...step,
      fence: ctx.fence,
      ...tx,
    })
    return hash
  }
  const { receipt } = await sendStepAndWait(ctx.db, relayer.sender, relayer.watcher, step, send, {
    timeoutMs: settings.receiptTimeoutMs,
    signal: ctx.signal,
    idle: ctx.idle,
  })
  return receipt
}

/**
 * Applies swept transfers to their payment (payments/push.ts), each as of the time it was found (a
 * transfer found before the payment expired counts toward it), then marks it applied: applyPushTransfer
 * takes each transfer once, so a crash between the two applies nothing twice.
 */
async function applySwept(
  db: Db,
  config: ServerConfig,
  chain: EvmChain,
  rows: readonly EvmPushTransferRow[],
): Promise<PushOutcome['kind'][]> {
  const kinds: PushOutcome['kind'][] = []
  for (const row of rows) {
    const deposit = await db
      .selectFrom('evm_push_deposits')
      .select('amount')
      .where('payment_id', '=', row.payment_id)
      .where('asset', '=', row.asset)
      .executeTakeFirstOrThrow()
    const outcome = await applyPushTransfer(db, {
      config,
      transfer: {
        paymentId: row.payment_id,
        signature: row.log_id,
        chainId: chain.caip2,
        asset: row.asset,
        holder: row.holder,
        sender: `${chain.caip2}:${getAddress(row.sender)}`,
        amount: BigInt(row.amount),
        slot: Number(row.block),
      },
      due: BigInt(deposit.amount),
      settlement: {
        intervalMs: config.settlementIntervalMs,
        jobKind: evmJobKinds.settle,
        depositRefundJobKind: evmJobKinds.depositRefund,
        // Late or paid twice: the sender is known (the Transfer log names it), so it goes back at once.
        refundsLate: true,
        settlementDestination: (destination) => settlementAddress(chain, destination),
      },
      now: row.found_at,
    })
    await db
      .updateTable('evm_push_transfers')
      .set({ state: 'applied' })
      .where('log_id', '=', row.log_id)
      .execute()
    kinds.push(outcome.kind)
  }
  return kinds
}

/**
 * Job `evm.deposit_refund` of a payment: each of its deposits being refunded is sent back to its sender
 * from the collection address (an ERC-20 transfer, recorded before it is sent, once per deposit), then
 * booked `refunds -> world` (payments/deposits.ts).
 */
export function depositRefundJob(settings: JobSettings): JobHandler {
  return {
    maxAttempts: 10,
    retryDelayMs: (attempts) => Math.min(10_000, 250 * 2 ** attempts),
    async run(job, ctx) {
      const sent: string[] = []
      for (const deposit of await depositsRefunding(ctx.db, job.payment_id)) {
        const chain = chainOf(settings, deposit.chain_id)
        const asset = chain.asset(deposit.asset)
        if (!asset) throw new Error(`Asset ${deposit.asset} is not configured on ${chain.caip2}.`)
        if (!deposit.sender) throw new Error(`Deposit ${deposit.id} has no sender to send back to.`)
        const to = getAddress(deposit.sender.slice(deposit.sender.lastIndexOf(':') + 1))
        const args = [to, BigInt(deposit.amount)] as const
        const receipt = await sendStep(
          settings,
          ctx,
          chain,
          { paymentId: job.payment_id, purpose: 'deposit', step: deposit.id },
          {
            to: asset.token,
            data: encodeFunctionData({ abi: eip3009Abi, functionName: 'transfer', args }),
            estimateGas: async () => {
              await assertSendsAllowed(ctx.db, holderOf(chain.caip2, chain.executor.address))
              return estimateExecutorTransfer(chain, asset.token, args, 'deposit refund')
            },
          },
        )
        const expected = { token: asset.token, from: chain.executor.address, to, value: args[1] }
        if (!hasTransfer(receipt, expected)) {
          await setTxStatus(ctx.db, receipt.transactionHash, 'reverted')
          throw new Error(
            `Deposit refund ${receipt.transactionHash} did not transfer the amount; sending again.`,
          )
        }
        await setTxStatus(ctx.db, receipt.transactionHash, 'succeeded')
        await finishDepositRefund(ctx.db, { id: deposit.id, txId: receipt.transactionHash, now: ctx.now() })
        sent.push(receipt.transactionHash)
      }
      return { sent }
    },
    async onGiveUp(job, error, ctx) {
      // The deposits stay `refunding` (their money in refunds owed) for an operator to look at.
      ctx.log.error({ paymentId: job.payment_id, error: String(error) }, 'EVM deposit refund gave up')
    },
  }
}
