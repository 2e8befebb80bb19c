import { encodeFunctionData, type Hash, type TransactionReceipt } from 'viem'
import type { Fence } from '../../jobs/fence.js'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import type { PaymentFinisher } from '../../payments/finisher.js'
import type { BatchedSettlement } from '../../payments/settlementItems.js'
import { loadPaymentAndSettlement } from '../../payments/settlements.js'
import type { Db } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import { type Authorization, authorizationFromJson } from './authorization.js'
import type { EvmChain } from './chain.js'
import { type Collection, type CollectionCall, collectionOf, relayCall } from './collection.js'
import { evmJobKinds, failPayment, type RelayPayload } from './outcome.js'
import { classifyPayerSignature, factoryRefusal, type PayerSignature } from './payerSignature.js'
import { settlementAddress } from './quote.js'
import type { EvmSender } from './sender.js'
import { recordedSteps, retryWhileInFlight, sendAndWait, sendOnce, setTxStatus } from './transactions.js'
import { hasTransfer, refuseOnRevert } from './transfers.js'
import type { EvmWatcher } from './watcher.js'

/** The token refused the authorization (used nonce, expired, bad signature, balance short): final. */
class AuthorizationRefused extends Error {}

/** An undeployed account cannot be deployed as its ERC-6492 wrapper says (factory refused or reverting): final. */
class DeploymentRefused extends Error {}

/**
 * A chain's sending pipeline in this process: the executor key's sender, the chain's watcher, and the
 * finisher that succeeds the payments a block paid together.
 */
export interface EvmRelayer {
  sender: EvmSender
  watcher: EvmWatcher
  finisher: PaymentFinisher
}

export interface JobSettings {
  chains: ReadonlyMap<string, EvmChain>
  relayers: ReadonlyMap<string, EvmRelayer>
  /** How long one run waits for a receipt before handing the job back (RetryLater). */
  receiptTimeoutMs: number
  /** How long a settlement batch collects payments before its transfer. */
  settlementIntervalMs: number
}

export function chainOf(settings: JobSettings, caip2: string): EvmChain {
  const chain = settings.chains.get(caip2)
  // Configuration changed under a queued job: retry (an operator may put the chain back), then give up.
  if (!chain) throw new Error(`Chain ${caip2} is not configured on this server.`)
  return chain
}

export function relayerOf(settings: JobSettings, chain: EvmChain): EvmRelayer {
  return settings.relayers.get(chain.caip2)!
}

/**
 * Gasless payments: submits the buyer's authorization from the executor, waits for the receipt, checks the
 * Transfer log, and finishes the payment (then queues the settlement). Exactly once: see sendOnce.
 */
export function relayJob(settings: JobSettings): JobHandler {
  return {
    async run(job, ctx) {
      const payload = job.payload as RelayPayload
      const chain = chainOf(settings, payload.chain)
      // The merchant's settlement destination comes with the payment: one statement, not a second after the receipt.
      const { payment, settlementDestination } = await loadPaymentAndSettlement(
        ctx.db,
        job.payment_id,
        payload.direct ? undefined : payload.asset,
      )
      if (payment.status !== 'processing') return { skipped: payment.status }
      const collection = collectionOf(chain, payload)
      // By the payer's code now, not at confirm: an account deployed since (by this job's own earlier
      // run, or by its owner) is relayed with its inner signature and no deployment.
      const signed = await classifyPayerSignature(chain, collection.from, payload.signature)
      if (signed.kind === 'undeployed') {
        if (!payload.authorization) {
          return failPayment(ctx, job.payment_id, 'deployment_refused', permit2CannotDeploy)
        }
        const authorization = authorizationFromJson(payload.authorization)
        const deployed = await deployAccount(settings, ctx, chain, job.payment_id, authorization, signed)
        if (deployed) return deployed
      }
      // Readiness is a question before the first send only: once a relay is recorded in flight, its own
      // receipt decides (a landed Permit2 pull has used the allowance the check would wait for).
      // (Only collections with a readiness check pay for the lookup: EIP-3009 relays have none.)
      const waiting =
        collection.ready && (await recordedSteps(ctx.db, job.payment_id, 'relay')).length === 0
          ? await collection.ready()
          : undefined
      if (waiting?.final) return failPayment(ctx, job.payment_id, waiting.code, waiting.reason)
      if (waiting) throw new RetryLater(waiting.reason)
      const call = collection.call(signed.signature)
      const relayer = relayerOf(settings, chain)
      const send = () => submitCollection(ctx.db, chain, relayer.sender, job.payment_id, call, ctx.fence)
      let sent: Awaited<ReturnType<typeof sendAndWait>>
      const release = await relayer.sender.slot()
      try {
        sent = await sendAndWait(relayer.watcher, { paymentId: job.payment_id, purpose: 'relay' }, send, {
          timeoutMs: settings.receiptTimeoutMs,
          signal: ctx.signal,
          idle: ctx.idle,
        })
      } catch (error) {
        if (error instanceof AuthorizationRefused)
          return failPayment(ctx, job.payment_id, 'authorization_rejected', error.message)
        throw await retryWhileInFlight(ctx.db, job.payment_id, 'relay', error)
      } finally {
        release()
      }
      const { hash, receipt } = sent
      ctx.log.info(
        { paymentId: job.payment_id, hash, method: collection.method },
        'Relayed the payer signature',
      )
      if (!receipt) throw new RetryLater(`Relay transaction ${hash} has no receipt yet.`)
      return finishRelay(settings, ctx, chain, job, payload, collection, call, receipt, settlementDestination)
    },
    async onGiveUp(job, error, ctx) {
      await failPayment(ctx, job.payment_id, 'chain_unavailable', `Relay did not land: ${String(error)}`)
    },
  }
}

/**
 * The ERC-6492 step: the executor deploys the payer's account through its (allow-listed) factory, as a
 * recorded transaction of its own (purpose `deploy`, exactly once like the relay). Before it is signed, the
 * deployment and the relay are simulated together, so an account that would not pay is never deployed.
 * Returns the payment's failure when the deployment is refused; undefined once the account is there.
 */
async function deployAccount(
  settings: JobSettings,
  ctx: JobRunContext,
  chain: EvmChain,
  paymentId: string,
  authorization: Authorization,
  signed: Extract<PayerSignature, { kind: 'undeployed' }>,
) {
  const refused = factoryRefusal(chain, signed.factory)
  if (refused && !refused.valid)
    return failPayment(ctx, paymentId, 'deployment_refused', `The account ${refused.reason}.`)
  const relayer = relayerOf(settings, chain)
  const send = async () => {
    const { hash } = await sendOnce({
      db: ctx.db,
      chain,
      sender: relayer.sender,
      paymentId,
      purpose: 'deploy',
      fence: ctx.fence,
      to: signed.factory,
      data: signed.factoryData,
      estimateGas: async () => {
        await simulateDeployAndRelay(chain, authorization, signed)
        return chain.publicClient.estimateGas({
          account: chain.executor,
          to: signed.factory,
          data: signed.factoryData,
          prepare: false,
        })
      },
    })
    return hash
  }
  let sent: Awaited<ReturnType<typeof sendAndWait>>
  try {
    sent = await sendAndWait(relayer.watcher, { paymentId, purpose: 'deploy' }, send, {
      timeoutMs: settings.receiptTimeoutMs,
      signal: ctx.signal,
      idle: ctx.idle,
    })
  } catch (error) {
    if (error instanceof DeploymentRefused)
      return failPayment(ctx, paymentId, 'deployment_refused', error.message)
    throw await retryWhileInFlight(ctx.db, paymentId, 'deploy', error)
  }
  if (!sent.receipt) throw new RetryLater(`Deployment ${sent.hash} has no receipt yet.`)
  await setTxStatus(ctx.db, sent.hash, sent.receipt.status === 'success' ? 'succeeded' : 'reverted')
  ctx.log.info({ paymentId, hash: sent.hash, account: authorization.from }, 'Deployed an ERC-6492 account')
  const code = await chain.publicClient.getCode({ address: authorization.from })
  if (code === undefined || code === '0x') {
    return failPayment(
      ctx,
      paymentId,
      'deployment_refused',
      `Deployment ${sent.hash} left no code at ${authorization.from}.`,
    )
  }
  return undefined
}

/** Both steps of an undeployed account's payment in one `eth_simulateV1`, as the executor would send them. */
async function simulateDeployAndRelay(
  chain: EvmChain,
  authorization: Authorization,
  signed: Extract<PayerSignature, { kind: 'undeployed' }>,
) {
  const { results } = await chain.publicClient.simulateCalls({
    account: chain.executor.address,
    calls: [
      { to: signed.factory, data: signed.factoryData },
      { to: authorization.token, ...relayCall(authorization, signed.signature) },
    ],
  })
  const [deployment, relay] = results
  if (deployment?.status !== 'success')
    throw new DeploymentRefused(`The factory ${signed.factory} would revert: ${String(deployment?.error)}`)
  if (relay?.status !== 'success')
    throw new DeploymentRefused(
      `The token would refuse the authorization once the account is deployed: ${String(relay?.error)}`,
    )
}

const permit2CannotDeploy =
  'An undeployed (ERC-6492) account cannot pay through Permit2: Permit2 does not deploy the account.'

/** The relay step alone: records and broadcasts (or finds) the relay transaction; returns its hash. */
export function submitRelay(
  db: Db,
  chain: EvmChain,
  sender: EvmSender,
  paymentId: string,
  authorization: Authorization,
  signature: `0x${string}`,
): Promise<Hash> {
  return submitCollection(db, chain, sender, paymentId, {
    to: authorization.token,
    ...relayCall(authorization, signature),
  })
}

async function submitCollection(
  db: Db,
  chain: EvmChain,
  sender: EvmSender,
  paymentId: string,
  call: CollectionCall,
  fence?: Fence,
): Promise<Hash> {
  const { hash } = await sendOnce({
    db,
    chain,
    sender,
    paymentId,
    purpose: 'relay',
    ...(fence ? { fence } : {}),
    to: call.to,
    data: encodeFunctionData(call as Parameters<typeof encodeFunctionData>[0]),
    // The estimate is the contract's verdict before gas is spent: a used or expired signature is refused
    // by name.
    estimateGas: () => estimateCollection(chain, sender, call),
  })
  return hash
}

const refusedBy = (reason: string) =>
  new AuthorizationRefused(`The contract refused the payer's signature: ${reason}`)

/**
 * Why the token would refuse the EIP-3009 relay now (its refusal, as a message), or undefined when it
 * would take it. Other failures (the node unreachable) throw.
 */
export async function relayRefusal(
  chain: EvmChain,
  authorization: Authorization,
  signature: `0x${string}`,
): Promise<string | undefined> {
  try {
    await simulateRelay(chain, authorization, signature)
    return undefined
  } catch (error) {
    if (error instanceof AuthorizationRefused) return error.message
    throw error
  }
}

/** Throws AuthorizationRefused when the token would refuse the EIP-3009 relay now. */
function simulateRelay(chain: EvmChain, authorization: Authorization, signature: `0x${string}`) {
  return simulateCollection(chain, { to: authorization.token, ...relayCall(authorization, signature) })
}

/** Throws AuthorizationRefused when the contract would refuse the collection now. */
function simulateCollection(chain: EvmChain, call: CollectionCall) {
  return refuseOnRevert(
    chain.publicClient.simulateContract({
      account: chain.executor,
      address: call.to,
      abi: call.abi,
      functionName: call.functionName,
      args: call.args,
    } as Parameters<typeof chain.publicClient.simulateContract>[0]),
    refusedBy,
  )
}

/**
 * The collection's gas after its simulation: the contract's verdict by one eth_call (a used or expired
 * signature is refused by name, nothing paid), the gas shared by the key's collections of this contract
 * and function within a block.
 */
async function estimateCollection(chain: EvmChain, sender: EvmSender, call: CollectionCall): Promise<bigint> {
  await simulateCollection(chain, call)
  return sender.gas(`${call.to}:${call.functionName}`, () =>
    refuseOnRevert(
      chain.publicClient.estimateContractGas({
        account: chain.executor,
        // Only eth_estimateGas: preparing a local account's request would fill nonce and fees too.
        prepare: false,
        address: call.to,
        abi: call.abi,
        functionName: call.functionName,
        args: call.args,
      } as Parameters<typeof chain.publicClient.estimateContractGas>[0]),
      refusedBy,
    ),
  )
}

async function collectionUsable(chain: EvmChain, call: CollectionCall): Promise<boolean> {
  try {
    await simulateCollection(chain, call)
    return true
  } catch (error) {
    if (error instanceof AuthorizationRefused) return false
    throw error
  }
}

async function finishRelay(
  settings: JobSettings,
  ctx: JobRunContext,
  chain: EvmChain,
  job: JobRow,
  payload: RelayPayload,
  collection: Collection,
  call: CollectionCall,
  receipt: TransactionReceipt,
  settlementDestination: string | undefined,
) {
  const hash = receipt.transactionHash
  if (receipt.status !== 'success') {
    await setTxStatus(ctx.db, hash, 'reverted')
    // A revert that did not use the authorization (out of gas, say) leaves it to be relayed again: the
    // next attempt signs a new transaction, after the token's verdict (a used or expired one fails the
    // payment there). The token accepts an authorization once, so a second relay cannot charge twice.
    if (await collectionUsable(chain, call))
      throw new Error(`Relay transaction ${hash} reverted with the authorization unused; relaying it again.`)
    // A Permit2 pull also reverts when the payer's allowance is gone (its approve reorged away, or
    // withdrawn before the pull was mined) while the permit itself is unused: that is the state before
    // the first send, so wait for the allowance again until the permit's deadline.
    const waiting = await collection.ready?.()
    if (waiting?.final) return failPayment(ctx, job.payment_id, waiting.code, waiting.reason)
    if (waiting) throw new RetryLater(`Relay transaction ${hash} reverted. ${waiting.reason}`)
    return failPayment(ctx, job.payment_id, 'relay_reverted', `Relay transaction ${hash} reverted.`)
  }
  const expected = {
    token: collection.token,
    from: collection.from,
    to: collection.to,
    value: collection.value,
  }
  if (!hasTransfer(receipt, expected)) {
    await setTxStatus(ctx.db, hash, 'succeeded')
    return failPayment(ctx, job.payment_id, 'transfer_missing', `Relay ${hash} moved no matching Transfer.`)
  }
  const asset = payload.direct ? undefined : chain.asset(payload.asset)
  const destination = asset && settlementAddress(chain, settlementDestination)
  const fee = asset ? (collection.value * BigInt(asset.settlementFeeBps)) / 10_000n : 0n
  // The ledger's holding address: the money is the service's to account for only when it reached it.
  const holder =
    collection.to.toLowerCase() === chain.executor.address.toLowerCase()
      ? holderOf(chain.caip2, collection.to)
      : undefined
  const amount = collection.value - fee
  const batched: BatchedSettlement | undefined =
    destination !== undefined && amount > 0n
      ? {
          chain: chain.caip2,
          asset: payload.asset,
          destination,
          amount,
          intervalMs: settings.settlementIntervalMs,
          jobKind: evmJobKinds.settle,
          holder,
          fee,
        }
      : undefined
  // Gasless money with nowhere to settle stays at the collection address: the ledger's float.
  const unsettled =
    holder !== undefined && !batched ? { asset: payload.asset, holder, value: collection.value } : undefined
  // With the other payments of its block: the transaction's record and the payment in one database
  // transaction for all of them.
  await relayerOf(settings, chain).finisher.succeed({
    paymentId: job.payment_id,
    txId: hash,
    settlement: batched,
    unsettled,
  })
  ctx.log.info({ paymentId: job.payment_id, hash }, 'Live EVM payment succeeded')
  return { hash }
}
