import { encodeFunctionData, type Hash, type TransactionReceipt } from 'viem'
import { type JobHandler, type JobRunContext, RetryLater } from '../../jobs/runner.js'
import { loadPayment, succeedPayment } from '../../payments/lifecycle.js'
import type { Db } from '../../store/db.js'
import type { JobRow, PaymentRow } from '../../store/schema.js'
import { eip3009Abi } from './abi.js'
import { type Authorization, authorizationFromJson } from './authorization.js'
import type { EvmChain } from './chain.js'
import { evmJobKinds, failPayment, type RelayPayload, type SettlePayload } from './outcome.js'
import { merchantDestination } from './quote.js'
import { retryWhileInFlight, sendAndWait, sendOnce, setTxStatus } from './transactions.js'
import { hasTransfer, refuseOnRevert } from './transfers.js'

/** The token refused the authorization (used nonce, expired, bad signature, balance short): final. */
class AuthorizationRefused extends Error {}

export interface JobSettings {
  chains: ReadonlyMap<string, EvmChain>
  /** How long one run waits for a receipt before handing the job back (RetryLater). */
  receiptTimeoutMs: number
}

export function chainOf(settings: JobSettings, caip2: string): EvmChain {
  const chain = settings.chains.get(caip2)
  // Configuration changed under a queued job: retry (an operator may put the chain back), then give up.
  if (!chain) throw new Error(`Chain ${caip2} is not configured on this server.`)
  return chain
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
      const payment = await loadPayment(ctx.db, job.payment_id)
      if (payment.status !== 'processing') return { skipped: payment.status }
      const authorization = authorizationFromJson(payload.authorization)
      const send = () => submitRelay(ctx.db, chain, job.payment_id, authorization, payload.signature)
      let sent: Awaited<ReturnType<typeof sendAndWait>>
      try {
        sent = await sendAndWait(chain, send, { timeoutMs: settings.receiptTimeoutMs, signal: ctx.signal })
      } catch (error) {
        if (error instanceof AuthorizationRefused)
          return failPayment(ctx.db, ctx.log, job.payment_id, 'authorization_rejected', error.message)
        throw await retryWhileInFlight(ctx.db, job.payment_id, 'relay', error)
      }
      const { hash, receipt } = sent
      ctx.log.info({ paymentId: job.payment_id, hash }, 'Relayed EIP-3009 authorization')
      if (!receipt) throw new RetryLater(`Relay transaction ${hash} has no receipt yet.`)
      return finishRelay(ctx, chain, job, payment, payload, authorization, receipt)
    },
    async onGiveUp(job, error, ctx) {
      await failPayment(
        ctx.db,
        ctx.log,
        job.payment_id,
        'chain_unavailable',
        `Relay did not land: ${String(error)}`,
      )
    },
  }
}

/** The relay step alone: records and broadcasts (or finds) the relay transaction; returns its hash. */
export async function submitRelay(
  db: Db,
  chain: EvmChain,
  paymentId: string,
  authorization: Authorization,
  signature: `0x${string}`,
): Promise<Hash> {
  const { hash } = await sendOnce({
    db,
    chain,
    paymentId,
    purpose: 'relay',
    to: authorization.token,
    data: encodeFunctionData(relayCall(authorization, signature)),
    // The token's verdict before gas is spent: a used or expired authorization is refused by name.
    beforeSign: () => simulateRelay(chain, authorization, signature),
  })
  return hash
}

function relayCall(authorization: Authorization, signature: `0x${string}`) {
  const functionName =
    authorization.kind === 'ReceiveWithAuthorization'
      ? 'receiveWithAuthorization'
      : 'transferWithAuthorization'
  const args = [
    authorization.from,
    authorization.to,
    authorization.value,
    authorization.validAfter,
    authorization.validBefore,
    authorization.nonce,
    signature,
  ] as const
  return { abi: eip3009Abi, functionName, args } as const
}

/** Throws AuthorizationRefused when the token would refuse the relay now. */
function simulateRelay(chain: EvmChain, authorization: Authorization, signature: `0x${string}`) {
  return refuseOnRevert(
    chain.publicClient.simulateContract({
      account: chain.executor,
      address: authorization.token,
      ...relayCall(authorization, signature),
    }),
    (reason) => new AuthorizationRefused(`The token refused the authorization: ${reason}`),
  )
}

async function authorizationUsable(
  chain: EvmChain,
  authorization: Authorization,
  signature: `0x${string}`,
): Promise<boolean> {
  try {
    await simulateRelay(chain, authorization, signature)
    return true
  } catch (error) {
    if (error instanceof AuthorizationRefused) return false
    throw error
  }
}

async function finishRelay(
  ctx: JobRunContext,
  chain: EvmChain,
  job: JobRow,
  payment: PaymentRow,
  payload: RelayPayload,
  authorization: Authorization,
  receipt: TransactionReceipt,
) {
  const hash = receipt.transactionHash
  await setTxStatus(ctx.db, hash, receipt.status === 'success' ? 'succeeded' : 'reverted')
  if (receipt.status !== 'success') {
    // A revert that did not use the authorization (out of gas, say) leaves it to be relayed again: the
    // next attempt signs a new transaction, after the token's verdict (a used or expired one fails the
    // payment there). The token accepts an authorization once, so a second relay cannot charge twice.
    if (await authorizationUsable(chain, authorization, payload.signature))
      throw new Error(`Relay transaction ${hash} reverted with the authorization unused; relaying it again.`)
    return failPayment(
      ctx.db,
      ctx.log,
      job.payment_id,
      'relay_reverted',
      `Relay transaction ${hash} reverted.`,
    )
  }
  const expected = {
    token: authorization.token,
    from: authorization.from,
    to: authorization.to,
    value: authorization.value,
  }
  if (!hasTransfer(receipt, expected)) {
    return failPayment(
      ctx.db,
      ctx.log,
      job.payment_id,
      'transfer_missing',
      `Relay ${hash} moved no matching Transfer.`,
    )
  }
  const asset = chain.asset(payload.asset)
  const destination = asset && (await merchantDestination(ctx.db, chain, payment.merchant_id, asset))
  const fee = asset ? (authorization.value * BigInt(asset.settlementFeeBps)) / 10_000n : 0n
  const amount = authorization.value - fee
  const settle: SettlePayload | undefined =
    destination !== undefined && amount > 0n
      ? { chain: chain.caip2, asset: payload.asset, destination, amount: amount.toString() }
      : undefined
  await succeedPayment(ctx.db, {
    paymentId: job.payment_id,
    txId: hash,
    settlement: settle && { job: { kind: evmJobKinds.settle, payload: settle } },
  })
  ctx.log.info({ paymentId: job.payment_id, hash }, 'Live EVM payment succeeded')
  return { hash }
}
