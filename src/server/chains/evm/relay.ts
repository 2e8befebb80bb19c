import { encodeFunctionData, type Hash, type TransactionReceipt } from 'viem'
import type { Fence } from '../../jobs/fence.js'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { holderOf } from '../../ledger/entries.js'
import type { PaymentFinisher } from '../../payments/finisher.js'
import {
  activeCooldown,
  coolDownPayer,
  cooldownMessage,
  GasBudgetExhausted,
  type RelayGuardSettings,
  reserveGas,
  settleGasCharge,
} from '../../payments/relayGuards.js'
import type { BatchedSettlement } from '../../payments/settlementItems.js'
import { loadPaymentAndSettlement } from '../../payments/settlements.js'
import type { Db } from '../../store/db.js'
import type { JobRow } from '../../store/schema.js'
import { type Authorization, authorizationFromJson } from './authorization.js'
import type { EvmChain } from './chain.js'
import { type Collection, type CollectionCall, collectionOf, relayCall } from './collection.js'
import { evmJobKinds, failPayment, type RelayPayload } from './outcome.js'
import { payerSubjects } from './payerCooldown.js'
import { classifyPayerSignature, factoryRefusal, type PayerSignature } from './payerSignature.js'
import { settlementAddress } from './quote.js'
import type { EvmFees, EvmSender } from './sender.js'
import {
  recordedSteps,
  retryWhileInFlight,
  sendAndWait,
  sendOnce,
  setTxStatus,
  withGasHeadroom,
} from './transactions.js'
import { hasTransfer, refuseOnRevert } from './transfers.js'
import type { EvmWatcher } from './watcher.js'

/** The token refused the authorization (used nonce, expired, bad signature, balance short): final. */
class AuthorizationRefused extends Error {}

/** The payer is cooled down (its relay reverted on chain before): nothing is sent for it. */
class PayerCoolingDown extends Error {}

/** The payment's relay reverted on chain already: it is never relayed again. */
class RelayReverted extends Error {}

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
  /** Payer cool-downs and per-credential gas budgets (payments/relayGuards.ts). */
  guards: RelayGuardSettings
  /** config.fastPaths (fastPath.ts): a relay job's first send skips the lookup of earlier records. */
  fastPaths: boolean
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
      // What a new relay must pass once its gas limit and fees are fixed, before it is signed.
      const beforeSign = async (sent: { gas: bigint } & EvmFees) => {
        // One revert ends the payment (finishRelay), even when the run that saw it stopped before failing it.
        if (await hasRevertedRelay(ctx.db, job.payment_id))
          throw new RelayReverted(`A relay of payment ${job.payment_id} already reverted on chain.`)
        const cooling = await activeCooldown(ctx.db, chain.caip2, await payerSubjects(chain, collection.from))
        if (cooling) throw new PayerCoolingDown(cooldownMessage(cooling))
        await simulateCollection(chain, call, sent)
        if (payload.credentialId === undefined) return
        await reserveGas(ctx.db, settings.guards, {
          chainId: chain.caip2,
          credentialId: payload.credentialId,
          paymentId: job.payment_id,
          amount: sent.gas * sent.maxFeePerGas,
        })
      }
      // The first claim's first send: no record of this step can exist yet (SendOnceParameters.noPriorRecord).
      let first = settings.fastPaths && job.attempts === 1
      const send = () => {
        const noPriorRecord = first
        first = false
        return submitCollection(ctx.db, chain, relayer.sender, job.payment_id, call, {
          fence: ctx.fence,
          beforeSign,
          noPriorRecord,
        })
      }
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
        if (error instanceof PayerCoolingDown)
          return failPayment(ctx, job.payment_id, 'payer_cooling_down', error.message)
        if (error instanceof RelayReverted)
          return failPayment(ctx, job.payment_id, 'relay_reverted', error.message)
        if (error instanceof GasBudgetExhausted)
          return failPayment(ctx, job.payment_id, 'gas_budget_exhausted', error.message)
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
      return finishRelay(settings, ctx, chain, job, payload, collection, receipt, settlementDestination)
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

async function hasRevertedRelay(db: Db, paymentId: string): Promise<boolean> {
  const row = await db
    .selectFrom('evm_transactions')
    .select('id')
    .where('payment_id', '=', paymentId)
    .where('purpose', '=', 'relay')
    .where('status', '=', 'reverted')
    .executeTakeFirst()
  return row !== undefined
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
  options: {
    fence?: Fence | undefined
    beforeSign?: ((sent: { gas: bigint } & EvmFees) => Promise<void>) | undefined
    noPriorRecord?: boolean
  } = {},
): Promise<Hash> {
  const { fence, beforeSign } = options
  const { hash } = await sendOnce({
    db,
    chain,
    sender,
    paymentId,
    purpose: 'relay',
    ...(fence ? { fence } : {}),
    ...(options.noPriorRecord ? { noPriorRecord: true } : {}),
    to: call.to,
    data: encodeFunctionData(call as Parameters<typeof encodeFunctionData>[0]),
    // The estimate is the contract's verdict before gas is spent: a used or expired signature is refused
    // by name.
    estimateGas: () => estimateCollection(chain, sender, call),
    // Exactly what is signed, where it will run: a payer whose signature is valid only at gas price 0
    // (a plain eth_call) or only in the latest block is refused here, before any gas is spent.
    beforeSign: beforeSign ?? ((sent) => simulateCollection(chain, call, sent)),
  })
  return hash
}

const refusedBy = (reason: string) =>
  new AuthorizationRefused(`The contract refused the payer's signature: ${reason}`)

/**
 * Why the token would refuse the EIP-3009 relay now (its refusal, as a message), or, when it would take
 * it, what the relay may cost at worst (gas limit x max fee per gas, wei): simulated as the executor
 * would send it (estimated gas limit with its headroom, today's fees, the pending block). Other failures
 * (the node unreachable) throw.
 */
export async function relayRefusal(
  chain: EvmChain,
  authorization: Authorization,
  signature: `0x${string}`,
): Promise<{ refusal: string } | { worstCaseFee: bigint }> {
  try {
    await simulateRelay(chain, authorization, signature)
    const call = { to: authorization.token, ...relayCall(authorization, signature) }
    const [gas, fees] = await Promise.all([
      refuseOnRevert(
        chain.publicClient.estimateContractGas({
          account: chain.executor,
          prepare: false,
          address: call.to,
          abi: call.abi,
          functionName: call.functionName,
          args: call.args,
        } as Parameters<typeof chain.publicClient.estimateContractGas>[0]),
        refusedBy,
      ),
      chain.publicClient.estimateFeesPerGas(),
    ])
    const limit = withGasHeadroom(gas)
    await simulateCollection(chain, call, {
      gas: limit,
      maxFeePerGas: fees.maxFeePerGas,
      maxPriorityFeePerGas: fees.maxPriorityFeePerGas,
    })
    return { worstCaseFee: limit * fees.maxFeePerGas }
  } catch (error) {
    if (error instanceof AuthorizationRefused) return { refusal: error.message }
    throw error
  }
}

/** Throws AuthorizationRefused when the token would refuse the EIP-3009 relay now. */
function simulateRelay(chain: EvmChain, authorization: Authorization, signature: `0x${string}`) {
  return simulateCollection(chain, { to: authorization.token, ...relayCall(authorization, signature) })
}

/**
 * Throws AuthorizationRefused when the contract would refuse the collection now. With `sent` (the gas
 * limit and fees a transaction is about to be signed with), it is simulated as that transaction: from
 * the executor, with those fields, at the pending block. A plain eth_call runs at gas price 0 in the
 * latest block, and a payer account can answer differently there than on chain.
 */
async function simulateCollection(chain: EvmChain, call: CollectionCall, sent?: { gas: bigint } & EvmFees) {
  const simulation = refuseOnRevert(
    chain.publicClient.simulateContract({
      account: chain.executor,
      address: call.to,
      abi: call.abi,
      functionName: call.functionName,
      args: call.args,
      ...(sent
        ? {
            gas: sent.gas,
            maxFeePerGas: sent.maxFeePerGas,
            maxPriorityFeePerGas: sent.maxPriorityFeePerGas,
            blockTag: 'pending',
          }
        : {}),
    } as Parameters<typeof chain.publicClient.simulateContract>[0]),
    refusedBy,
  )
  try {
    await simulation
  } catch (error) {
    // Out of gas at the limit about to be signed: the estimate was short (a node's bad answer), not the
    // payer's refusal. Nothing is sent; the job estimates again on its next attempt.
    if (sent && /out of gas|outofgas/i.test(String(error instanceof Error ? error.message : error)))
      throw new Error(`The relay would run out of gas at the limit ${sent.gas}; estimating again.`)
    throw error
  }
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

async function finishRelay(
  settings: JobSettings,
  ctx: JobRunContext,
  chain: EvmChain,
  job: JobRow,
  payload: RelayPayload,
  collection: Collection,
  receipt: TransactionReceipt,
  settlementDestination: string | undefined,
) {
  const hash = receipt.transactionHash
  const spent = receipt.gasUsed * receipt.effectiveGasPrice
  const charge = { chainId: chain.caip2, credentialId: payload.credentialId, paymentId: job.payment_id }
  if (receipt.status !== 'success') {
    // It passed a simulation of exactly what was sent, so what made it revert is something no
    // simulation here reproduces (state changed in its block ahead of it: an allowance withdrawn, an
    // account's answer flipped; out of gas by the same means). Relaying again would let the payer
    // repeat that at the executor's cost: one revert fails the payment, charges its gas to the caller's
    // credential and cools the payer down.
    const reason = `its relay ${hash} reverted on chain after passing its simulation`
    await settleGasCharge(ctx.db, { ...charge, spent })
    await coolDownPayer(ctx.db, {
      chainId: chain.caip2,
      subjects: await payerSubjects(chain, collection.from),
      settings: settings.guards,
      reason,
      paymentId: job.payment_id,
    })
    await setTxStatus(ctx.db, hash, 'reverted')
    return failPayment(
      ctx,
      job.payment_id,
      'relay_reverted',
      `Relay transaction ${hash} reverted on chain after passing its simulation; ${spent} wei of gas spent; the payer is cooled down.`,
    )
  }
  const expected = {
    token: collection.token,
    from: collection.from,
    to: collection.to,
    value: collection.value,
  }
  if (!hasTransfer(receipt, expected)) {
    await settleGasCharge(ctx.db, { ...charge, spent })
    await setTxStatus(ctx.db, hash, 'succeeded')
    return failPayment(ctx, job.payment_id, 'transfer_missing', `Relay ${hash} moved no matching Transfer.`)
  }
  await settleGasCharge(ctx.db, charge)
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
