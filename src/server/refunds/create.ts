import { parseAccountId, parseAssetId, sameCaip } from '../../caip/caip.js'
import type { RefundBody } from '../../contract/refund.js'
import { fail, paramsError } from '../errors.js'
import { newId } from '../ids.js'
import { paidToken } from '../payments/assets.js'
import { voidPayment } from '../payments/capture.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { recordRefundEvent } from './events.js'
import { enqueueRefundJob } from './jobs.js'
import type { RefundRow, RefundSource } from './schema.js'

export interface CreateRefundParams {
  merchantId: string
  body: RefundBody
  now: Date
  /** When a test-mode refund's simulated transfer happens (the window to simulate a failure). */
  sandboxDelayMs: number
}

/**
 * Records a refund `pending` with its event and its job, under the payment's row lock: every refund of
 * a payment is decided after the ones before it committed, so together they never exceed what was paid
 * (the refunds_within_payment trigger refuses it anyway). The amount sent back in the paid asset is the
 * refunded share of what the buyer paid, rounded down; the refund that completes the payment sends
 * exactly what is left of it, so the sum is what was paid to the unit.
 */
export async function createRefund(db: Db, params: CreateRefundParams): Promise<RefundRow> {
  const { body, now } = params
  return inTransaction(db, async (trx) => {
    const payment = (await trx
      .selectFrom('payments')
      .selectAll()
      .where('id', '=', body.paymentId)
      .where('merchant_id', '=', params.merchantId)
      .forUpdate()
      .executeTakeFirst()) as PaymentRow | undefined
    if (!payment) fail('payment_not_found', 'Payment not found.', { paymentId: body.paymentId })
    // Held money not yet captured is given back by voiding the hold (docs/capture.md): all of it or none.
    if (payment.capture_status === 'authorized') return refundByVoid(trx, payment, params)
    if (payment.status !== 'succeeded') {
      fail(
        'payment_not_succeeded',
        `Only a succeeded payment can be refunded; this one is ${payment.status}.`,
      )
    }
    const sums = await trx
      .selectFrom('refunds')
      .select((eb) => [
        eb.fn.coalesce(eb.fn.sum<string>('amount_value'), eb.val('0')).as('amount'),
        eb.fn.coalesce(eb.fn.sum<string>('asset_value'), eb.val('0')).as('asset'),
      ])
      .where('payment_id', '=', payment.id)
      .where('status', '<>', 'failed')
      .executeTakeFirstOrThrow()
    const paid = BigInt(payment.amount_value)
    const remaining = paid - BigInt(sums.amount)
    if (remaining <= 0n)
      fail('already_refunded', 'This payment is already refunded.', { paymentId: payment.id })
    if (body.amount && body.amount.unit !== payment.amount_unit)
      throw paramsError('body.amount.unit', `must be the payment's unit, ${payment.amount_unit}.`)
    const amount = body.amount ? BigInt(body.amount.value) : remaining
    if (amount > remaining) {
      fail(
        'invalid_state',
        `Only ${remaining} (${payment.amount_unit}) of this payment remains refundable.`,
        {
          paymentId: payment.id,
          remaining: remaining.toString(),
        },
      )
    }

    const token = paidToken(payment)
    let assetValue: bigint | null = null
    if (token) {
      assetValue = amount === remaining ? token.value - BigInt(sums.asset) : (token.value * amount) / paid
      if (assetValue <= 0n)
        throw paramsError('body.amount', `is less than one unit of ${token.asset}, the asset that paid.`)
    }
    const destination = body.destination ?? payment.buyer
    if (destination === null) {
      if (payment.mode === 'live')
        throw paramsError('body.destination', 'is required: no account paid this payment.')
    } else if (token && !sameCaip(parseAccountId(destination).chainId, parseAssetId(token.asset).chainId)) {
      throw paramsError(
        'body.destination',
        `must be an account on ${parseAssetId(token.asset).chainId}, the chain the payment was paid on.`,
      )
    }
    if (payment.mode === 'live' && !token)
      fail('invalid_state', 'This payment has no paid asset to send back.', { paymentId: payment.id })

    const [row] = await trx
      .insertInto('refunds')
      .values({
        id: newId('refund'),
        payment_id: payment.id,
        partner_id: payment.partner_id,
        merchant_id: payment.merchant_id,
        mode: payment.mode,
        amount_unit: payment.amount_unit,
        amount_value: amount,
        asset: token?.asset ?? null,
        asset_value: assetValue,
        destination,
        reason: body.reason ?? null,
        paid_from: await sourceOf(trx, payment),
        status: 'pending',
        failure_code: null,
        tx_id: null,
        created_at: now,
        updated_at: now,
        succeeded_at: null,
        failed_at: null,
      })
      .returningAll()
      .execute()
    const refund = row!
    await recordRefundEvent(trx, refund, 'refund.created', now)
    const runAt = payment.mode === 'test' ? new Date(now.getTime() + params.sandboxDelayMs) : now
    await enqueueRefundJob(trx, refund, runAt, now)
    return refund
  })
}

/**
 * A refund asked of a payment still held for capture is its void: the void's refund answers, and a part
 * of it is refused (capture the rest, or void it all).
 */
async function refundByVoid(db: Db, payment: PaymentRow, params: CreateRefundParams): Promise<RefundRow> {
  const { body } = params
  if (
    body.amount &&
    (body.amount.unit !== payment.amount_unit || body.amount.value !== String(payment.amount_value))
  )
    fail(
      'invalid_state',
      'This payment is authorized and not captured: refund all of it (a void), or capture the part to keep ' +
        '(POST /v1/payments/{id}/capture with the amount), which gives the rest back.',
      { paymentId: payment.id, captureStatus: 'authorized', allowed: ['capture', 'void'] },
    )
  if (body.destination !== undefined)
    throw paramsError(
      'body.destination',
      'is not taken for a held payment: a void pays back the account that paid.',
    )
  const { refund } = await voidPayment(db, {
    merchantId: params.merchantId,
    paymentId: payment.id,
    reason: body.reason,
    now: params.now,
    sandboxDelayMs: params.sandboxDelayMs,
  })
  if (!refund) fail('invalid_state', 'This payment has nothing to give back.', { paymentId: payment.id })
  return refund
}

/**
 * Where the money comes from: the payment's own collected funds while its settlement has not fixed
 * what the merchant gets (it then pays the merchant what remains after this refund), else the
 * collection address's float (settled payments, and direct payments that never passed through it).
 */
async function sourceOf(db: Db, payment: PaymentRow): Promise<RefundSource> {
  if (payment.settlement_status !== 'pending') return 'float'
  const fixed = await db
    .selectFrom('settlement_amounts')
    .select('payment_id')
    .where('payment_id', '=', payment.id)
    .executeTakeFirst()
  return fixed ? 'float' : 'collected'
}
