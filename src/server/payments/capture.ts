import type { CaptureBody } from '../../contract/payment.js'
import { fail, paramsError } from '../errors.js'
import { newId } from '../ids.js'
import { type JobHandler, RetryLater } from '../jobs/runner.js'
import { recordRefundEvent } from '../refunds/events.js'
import { loadRefund } from '../refunds/finish.js'
import { enqueueRefundJob } from '../refunds/jobs.js'
import type { RefundRow } from '../refunds/schema.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { paidToken } from './assets.js'
import {
  type CapturedEntry,
  type CapturePlan,
  captureHeldPayment,
  loadPayment,
  type RefundValues,
  settlePayment,
  voidHeldPayment,
} from './lifecycle.js'
import { addSettlementItem } from './settlementItems.js'

/**
 * Authorize now, capture later (docs/capture.md): a manual-capture payment, once paid, is held (capture
 * status `authorized`, its money in the merchant's `authorized` ledger account) until the merchant
 * captures it (in full or in part: the captured part joins the normal settlement batches, the rest goes
 * back to the buyer as a refund), voids it (everything goes back), or `captureBy` passes (the expiry job
 * voids it, status `expired`). Each is one conditional UPDATE on the capture status, in the statement
 * that writes its ledger entries and its refund (payments/lifecycle.ts), so of racing captures, voids and
 * the expiry exactly one wins and the money moves once. One capture per payment: a second would need a
 * settlement item and a refund per capture, and a held remainder that a partial capture already gave back.
 */

export { captureExpiryJobKind } from './lifecycle.js'

interface Context {
  merchantId: string
  paymentId: string
  now: Date
  /** When a test-mode refund's simulated transfer happens (config sandboxRefundDelayMs). */
  sandboxDelayMs: number
}

/** What the payment allows next, for `invalid_state` answers. */
function allowedFor(payment: PaymentRow, now: Date): string[] {
  if (payment.capture_method !== 'manual') return []
  switch (payment.capture_status) {
    case 'authorized':
      return payment.capture_by && payment.capture_by > now ? ['capture', 'void'] : ['void']
    case 'partially_captured':
      // Its rest could not go back and is held: a void gives it back again.
      return payment.capture_failure_code ? ['void', 'refund'] : ['refund']
    case 'captured':
      return ['refund']
    default:
      return []
  }
}

/** `409 invalid_state` saying what the payment's capture is and what it allows now. */
function refuse(payment: PaymentRow, action: 'capture' | 'void', now: Date): never {
  const allowed = allowedFor(payment, now)
  const details = {
    paymentId: payment.id,
    status: payment.status,
    captureMethod: payment.capture_method,
    captureStatus: payment.capture_status,
    captureFailureCode: payment.capture_failure_code,
    allowed,
  }
  const allows = ` Allowed now: ${allowed.length > 0 ? allowed.join(', ') : 'nothing'}.`
  if (payment.capture_method !== 'manual')
    fail(
      'invalid_state',
      `This payment is captured automatically; only a payment created with capture "manual" can be ${action}ed.` +
        ' Refund it instead.',
      details,
    )
  if (payment.capture_status === null)
    fail(
      'invalid_state',
      `The payment is ${payment.status}; it can be ${action}ed once paid (capture status authorized).${allows}`,
      details,
    )
  if (payment.capture_status === 'authorized')
    fail(
      'invalid_state',
      payment.capture_failure_code
        ? `captureBy has passed and the held money could not go back (${payment.capture_failure_code}): void it again.${allows}`
        : `captureBy has passed: the payment is being voided by itself.${allows}`,
      details,
    )
  fail(
    'invalid_state',
    `The payment's capture is ${payment.capture_status}; it cannot be ${action}ed.${allows}`,
    details,
  )
}

async function merchantPayment(db: Db, ctx: Context): Promise<PaymentRow> {
  const payment = await db
    .selectFrom('payments')
    .selectAll()
    .where('id', '=', ctx.paymentId)
    .executeTakeFirst()
  if (!payment || payment.merchant_id !== ctx.merchantId)
    fail('payment_not_found', 'Payment not found.', { paymentId: ctx.paymentId })
  return payment as PaymentRow
}

/** The refund that gives held money back to the account that paid, as a row of the change's statement. */
function heldRefund(
  payment: PaymentRow,
  amount: bigint,
  assetValue: bigint | null,
  reason: string,
  now: Date,
): RefundRow {
  return {
    id: newId('refund'),
    payment_id: payment.id,
    partner_id: payment.partner_id,
    merchant_id: payment.merchant_id,
    mode: payment.mode,
    amount_unit: payment.amount_unit,
    amount_value: amount.toString(),
    asset: paidToken(payment)?.asset ?? null,
    asset_value: assetValue === null ? null : assetValue.toString(),
    destination: payment.buyer,
    reason,
    paid_from: 'authorized',
    status: 'pending',
    failure_code: null,
    tx_id: null,
    created_at: now,
    updated_at: now,
    succeeded_at: null,
    failed_at: null,
  }
}

/** The refund's event and job, in the transaction that recorded it. */
async function startRefund(db: Db, refund: RefundRow, ctx: Context): Promise<RefundRow> {
  const row = await loadRefund(db, refund.id)
  await recordRefundEvent(db, row, 'refund.created', ctx.now)
  const runAt = row.mode === 'test' ? new Date(ctx.now.getTime() + ctx.sandboxDelayMs) : ctx.now
  await enqueueRefundJob(db, row, runAt, ctx.now)
  return row
}

/**
 * Captures a held payment, all of it or `amount` (in the payment's unit): the captured share of the token
 * that paid (rounded down; all of it for a full capture) goes authorized -> collected and into the open
 * settlement batch of the merchant's destination (test mode: settled at once), the rest is refunded to
 * the account that paid. Returns the payment as captured.
 */
export async function capturePayment(db: Db, ctx: Context & { body: CaptureBody }): Promise<PaymentRow> {
  const { now } = ctx
  return inTransaction(db, async (trx) => {
    const payment = await merchantPayment(trx, ctx)
    if (payment.capture_status !== 'authorized' || !payment.capture_by || payment.capture_by <= now)
      refuse(payment, 'capture', now)
    const authorized = BigInt(payment.amount_value)
    const amount = ctx.body.amount
    if (amount && amount.unit !== payment.amount_unit)
      throw paramsError('body.amount.unit', `must be the payment's unit, ${payment.amount_unit}.`)
    const captured = amount ? BigInt(amount.value) : authorized
    if (captured > authorized)
      throw paramsError('body.amount.value', `must be at most what was authorized, ${authorized}.`)
    const token = paidToken(payment)
    const capturedToken = token
      ? captured === authorized
        ? token.value
        : (token.value * captured) / authorized
      : null
    if (capturedToken !== null && capturedToken <= 0n)
      throw paramsError('body.amount', `is less than one unit of ${token!.asset}, the asset that paid.`)
    const rest = authorized - captured
    const refund =
      rest > 0n
        ? heldRefund(payment, rest, token ? token.value - capturedToken! : null, 'uncaptured', now)
        : undefined
    const plan = payment.capture_plan as CapturePlan | null
    const live = plan?.mode === 'live' ? plan : undefined
    const tokenCaptured = capturedToken ?? 0n
    const fee =
      live?.settlement && live.value !== '0'
        ? (BigInt(live.settlement.fee) * tokenCaptured) / BigInt(live.value)
        : 0n
    const settles = live
      ? live.settlement !== null && tokenCaptured - fee > 0n
      : plan?.mode === 'test' && plan.settlementAsset !== null
    const entry: CapturedEntry | undefined =
      live?.holder && tokenCaptured > 0n
        ? {
            asset: live.asset,
            holder: live.holder,
            value: tokenCaptured,
            to: live.settlement ? 'collected' : 'float',
          }
        : undefined
    const row = await captureHeldPayment(trx, {
      paymentId: payment.id,
      status: rest > 0n ? 'partially_captured' : 'captured',
      capturedValue: captured,
      settles,
      entry,
      refund: refund as RefundValues | undefined,
      now,
    })
    // Another capture, a void or the expiry won meanwhile: say what it left.
    if (!row) refuse(await merchantPayment(trx, ctx), 'capture', now)
    if (live?.settlement && settles) {
      // The payment.collected entry (authorized -> collected) is the capture's own: none from the item.
      await addSettlementItem(trx, {
        ...live.settlement,
        amount: tokenCaptured - fee,
        fee,
        holder: undefined,
        paymentId: payment.id,
        now,
      })
    }
    let final = row
    if (plan?.mode === 'test' && plan.settlementAsset !== null) {
      final =
        (await settlePayment(trx, {
          paymentId: payment.id,
          txId: `test:${payment.id}:settlement`,
          assetId: plan.settlementAsset,
          value: tokenCaptured,
          now,
        })) ?? row
    }
    if (refund) await startRefund(trx, refund, ctx)
    return refund ? loadPayment(trx, payment.id) : final
  })
}

/**
 * Voids a held payment: everything goes back to the account that paid (one refund from the authorized
 * funds). `expired`: the expiry job's void, only once `captureBy` has passed. A partial capture whose
 * rest could not go back (`capture_failure_code`) is voided too: its rest is given back again, its
 * capture status stays `partially_captured`. Returns the payment and the refund.
 */
export async function voidPayment(
  db: Db,
  ctx: Context & { status?: 'voided' | 'expired'; reason?: string | undefined },
): Promise<{ payment: PaymentRow; refund: RefundRow | undefined }> {
  const { now } = ctx
  const status = ctx.status ?? 'voided'
  return inTransaction(db, async (trx) => {
    const payment = await merchantPayment(trx, ctx)
    const restHeld =
      status === 'voided' &&
      payment.capture_status === 'partially_captured' &&
      payment.capture_failure_code !== null
    if (payment.capture_status !== 'authorized' && !restHeld) refuse(payment, 'void', now)
    const token = paidToken(payment)
    const refund = restHeld
      ? heldRefund(
          payment,
          BigInt(payment.amount_value) - BigInt(payment.captured_value ?? 0),
          await failedReturnValue(trx, payment.id),
          'uncaptured',
          now,
        )
      : heldRefund(
          payment,
          BigInt(payment.amount_value),
          token ? token.value : null,
          ctx.reason ?? (status === 'expired' ? 'capture_expired' : 'voided'),
          now,
        )
    const row = await voidHeldPayment(trx, {
      paymentId: payment.id,
      status,
      rest: restHeld,
      refund: refund as RefundValues,
      now,
    })
    if (!row) refuse(await merchantPayment(trx, ctx), 'void', now)
    const started = await startRefund(trx, refund, ctx)
    return { payment: await loadPayment(trx, payment.id), refund: started }
  })
}

/** What the last failed refund of held money was to send, in the paid token (null: no token, test mode). */
async function failedReturnValue(db: Db, paymentId: string): Promise<bigint | null> {
  const failed = await db
    .selectFrom('refunds')
    .select('asset_value')
    .where('payment_id', '=', paymentId)
    .where('paid_from', '=', 'authorized')
    .where('status', '=', 'failed')
    .orderBy('failed_at', 'desc')
    .limit(1)
    .executeTakeFirst()
  return failed?.asset_value == null ? null : BigInt(failed.asset_value)
}

/**
 * At `captureBy`: a payment still authorized is voided by itself (capture status `expired`). One not yet
 * final waits (its buyer may still pay until it expires, and a paid one is held); one that ended unpaid,
 * or was captured or voided, needs nothing.
 */
export function captureExpiryJob(sandboxDelayMs: number): JobHandler {
  return {
    async run(job, ctx) {
      const payment = await loadPayment(ctx.db, job.payment_id)
      if (payment.status === 'requires_action' || payment.status === 'processing')
        throw new RetryLater(
          `Payment ${payment.id} is ${payment.status}; its hold is decided once it is final.`,
        )
      if (payment.capture_status !== 'authorized')
        return { skipped: payment.capture_status ?? payment.status }
      const now = ctx.now()
      if (payment.capture_by && payment.capture_by > now)
        throw new RetryLater(
          `Payment ${payment.id} may be captured until ${payment.capture_by.toISOString()}.`,
        )
      try {
        const { refund } = await voidPayment(ctx.db, {
          merchantId: payment.merchant_id,
          paymentId: payment.id,
          status: 'expired',
          now,
          sandboxDelayMs,
        })
        return { expired: payment.id, refundId: refund?.id ?? null }
      } catch (error) {
        // A capture or a void won the race: nothing left to expire.
        const current = await loadPayment(ctx.db, payment.id)
        if (current.capture_status !== 'authorized') return { skipped: current.capture_status }
        throw error
      }
    },
  }
}
