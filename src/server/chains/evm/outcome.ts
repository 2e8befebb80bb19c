import type { Address, Hash } from 'viem'
import type { JobRunContext } from '../../jobs/runner.js'
import { failPayment as failProcessingPayment } from '../../payments/lifecycle.js'
import type { AuthorizationJson } from './authorization.js'
import type { Permit2Json } from './collection.js'

/** Job kinds of live EVM payments. One job of a kind per payment (see jobs/queue.ts). */
export const evmJobKinds = {
  /** Gasless: submit the buyer's EIP-3009 authorization from the executor, then settle. */
  relay: 'evm.relay',
  /** Direct: check the buyer's own transfer to the merchant's destination. */
  verifyTransfer: 'evm.verify_transfer',
  /**
   * A settlement batch (queued under its first payment when it opens, due when it closes): forward the
   * collected amounts of its payments to the merchant's destination in one transfer.
   */
  settle: 'evm.settle',
  /** A push payment's deposit address swept into the collection address, then what arrived applied. */
  pushSweep: 'evm.push_sweep',
  /** A push payment's deposits being refunded, each sent back to its sender. */
  depositRefund: 'evm.deposit_refund',
  /** Stray money at a payment's deposit address moved out as an operator asked (`caipay deposits recover`). */
  strayRecover: 'evm.stray_recover',
} as const

export interface RelayPayload {
  chain: string
  asset: string
  /** An EIP-3009 payment: the authorization offered; a Permit2 payment: the permit offered. */
  authorization?: AuthorizationJson
  permit2?: Permit2Json
  /** As the wallet returned it: 65 bytes, an ERC-1271 signature, or an ERC-6492 wrapper. */
  signature: `0x${string}`
  /**
   * The credential (API key id or app id) whose caller asked for the payment: the executor's gas its
   * relay may lose is charged to that credential's budget (payments/relayGuards.ts). Jobs queued before
   * the budget existed carry none.
   */
  credentialId?: string
  /**
   * The authorization pays the merchant's destination itself (x402's `payTo`), not the collection
   * address: the payment has no settlement step.
   */
  direct?: boolean
}

export interface VerifyTransferPayload {
  chain: string
  asset: string
  hash: Hash
  from: Address
  to: Address
  value: string
  /** Unix seconds: a transfer mined before the quote cannot pay it. */
  notBefore: number
}

/** A settlement job queued before batches: one payment's whole settlement (see settle.ts). */
export interface SettlePayload {
  chain: string
  asset: string
  destination: Address
  /** Token minor units sent to the destination (after the fee). */
  amount: string
}

/**
 * Why a live payment failed, kept in `failure_code` for operators (the wire shows only `declined_user`,
 * so these render as null) and logged with the details.
 */
export type EvmFailureCode =
  | 'authorization_rejected'
  | 'deployment_refused'
  | 'allowance_missing'
  | 'relay_reverted'
  | 'payer_cooling_down'
  | 'gas_budget_exhausted'
  | 'payer_gas_budget_exhausted'
  | 'transfer_missing'
  | 'transaction_not_found'
  | 'transaction_reverted'
  | 'wrong_contract'
  | 'transfer_predates_quote'
  | 'chain_unavailable'

/** processing -> failed, unless someone else already finished the payment. */
export async function failPayment(
  ctx: Pick<JobRunContext, 'db' | 'log' | 'fence'>,
  paymentId: string,
  code: EvmFailureCode,
  reason: string,
): Promise<{ failed: EvmFailureCode; reason: string }> {
  // Under the step's fence: a step whose claim was taken over fails nothing (its verdict may be stale).
  const failed = await failProcessingPayment(ctx.db, { paymentId, failureCode: code, fence: ctx.fence })
  if (failed) ctx.log.warn({ paymentId, failureCode: code, reason }, 'Live EVM payment failed')
  return { failed: code, reason }
}
