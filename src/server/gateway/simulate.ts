import { namespaceOf, sameCaip } from '../../caip/caip.js'
import type {
  SimulateBody,
  SimulatePushBody,
  SimulatePushResponse,
  StatusResponse,
} from '../../contract/payment.js'
import type { ServerConfig } from '../config.js'
import { fail, paramsError } from '../errors.js'
import { newId } from '../ids.js'
import { defaultTestAssets, toAmount } from '../payments/assets.js'
import { markCancelled } from '../payments/cancel.js'
import { transitionPayment } from '../payments/lifecycle.js'
import { applyPushTransfer, holdUnpaidPushes } from '../payments/push.js'
import { succeedTestPayment } from '../payments/settlements.js'
import { statusJson } from '../payments/views.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { tokenAmountFor } from './quote.js'

/**
 * Sandbox accounts that "pay" a forced outcome, so its events carry the processing facts a real payment
 * has (WalletConnect Pay's webhook contract has the whole processing block or none).
 */
const sandboxBuyers: Record<string, string> = {
  eip155: '0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed',
  solana: `Sandbox${'1'.repeat(36)}`,
}

/**
 * What a buyer would have picked: the payment's own asset for a crypto amount, else the first test
 * asset that can pay it, quoted as an option is; no facts when none can.
 */
function sandboxPayer(payment: PaymentRow, config: ServerConfig) {
  const amount = { unit: payment.amount_unit, value: payment.amount_value }
  for (const asset of defaultTestAssets) {
    const value = tokenAmountFor(amount, {
      id: asset.asset,
      symbol: asset.symbol,
      name: asset.name,
      usdRate: asset.usdRate,
      decimals: asset.decimals,
    })
    const buyer = sandboxBuyers[namespaceOf(asset.chainId)]
    if (value === null || !buyer) continue
    return {
      buyer: `${asset.chainId}:${buyer}`,
      option_amount: JSON.stringify(toAmount(`caip19/${asset.asset}`, value.toString(), config)),
    }
  }
  return {}
}

/**
 * The sandbox's forced outcomes. `succeeded` and `failed` pass through `processing` like a real payment
 * (from `requires_action` or `processing`); `expired` and `cancelled` only leave `requires_action`.
 * A final payment refuses with `409 invalid_state`. What pushed transfers brought to a payment that is
 * now expired or cancelled becomes its `underpaid` deposits, as the live scan makes them.
 */
export async function simulateOutcome(input: {
  db: Db
  config: ServerConfig
  payment: PaymentRow
  outcome: SimulateBody['outcome']
  now: Date
}): Promise<StatusResponse> {
  const { db, payment, outcome, now } = input
  if (payment.mode !== 'test') fail('not_sandbox_api_key', 'Outcomes can only be simulated in test mode.')
  const row = await inTransaction(db, async (trx) => {
    const toProcessing = async () => {
      if (payment.status !== 'requires_action') return
      await transitionPayment(trx, {
        paymentId: payment.id,
        from: 'requires_action',
        to: 'processing',
        set: sandboxPayer(payment, input.config),
        now,
      })
    }
    switch (outcome) {
      case 'succeeded': {
        await toProcessing()
        const paid = payment.option_amount ?? { unit: payment.amount_unit, value: payment.amount_value }
        const asset = paid.unit.startsWith('caip19/') ? paid.unit.slice(7) : undefined
        return succeedTestPayment(trx, { payment, asset, value: paid.value, now })
      }
      case 'failed':
        await toProcessing()
        return transitionPayment(trx, {
          paymentId: payment.id,
          from: 'processing',
          to: 'failed',
          set: { failure_code: 'declined_user' },
          now,
        })
      case 'expired':
        return transitionPayment(trx, { paymentId: payment.id, from: 'requires_action', to: 'expired', now })
      case 'cancelled':
        return markCancelled(trx, { paymentId: payment.id, reason: 'cancelled_by_merchant', now })
    }
  })
  if (outcome === 'expired' || outcome === 'cancelled')
    await holdUnpaidPushes(db, input.config, now, payment.id)
  return statusJson(row)
}

/**
 * The sandbox's pushed transfer (`POST /v1/test/payments/{id}/push`): a transfer of `amount` of a test
 * asset, as if found by the payment's reference, applied by the live path's own rules
 * (payments/push.ts): it counts toward the open payment, completes it, or is a deposit. On a payment no
 * longer open, what earlier transfers brought becomes its `underpaid` deposits first (held, or refunded
 * at once with `push.underpaid` `refund`), as the live scan would have made them.
 */
export async function simulatePush(input: {
  db: Db
  config: ServerConfig
  payment: PaymentRow
  body: SimulatePushBody
  now: Date
}): Promise<SimulatePushResponse> {
  const { db, config, payment, body, now } = input
  if (payment.mode !== 'test')
    fail('not_sandbox_api_key', 'Pushed transfers can only be simulated in test mode.')
  const price = { unit: payment.amount_unit, value: payment.amount_value }
  const candidates = defaultTestAssets.filter((a) => !body.asset || sameCaip(a.asset, body.asset))
  const priced = candidates
    .map((a) => ({ asset: a, due: tokenAmountFor(price, { id: a.asset, ...a }) }))
    .find((c) => c.due !== null && c.due > 0n)
  if (!priced) throw paramsError('body.asset', 'No test asset can pay this payment.')
  const { asset } = priced
  const due = priced.due!
  const buyer = sandboxBuyers[namespaceOf(asset.chainId)]
  if (payment.status !== 'requires_action' || payment.expires_at.getTime() <= now.getTime())
    await holdUnpaidPushes(db, config, now, payment.id)
  const outcome = await applyPushTransfer(db, {
    config,
    transfer: {
      paymentId: payment.id,
      signature: `test:push:${newId('request')}`,
      chainId: asset.chainId,
      asset: asset.asset,
      holder: `${asset.chainId}:${buyer ?? 'sandbox'}`,
      sender: buyer ? `${asset.chainId}:${buyer}` : null,
      amount: body.amount ? BigInt(body.amount) : due,
      slot: 0,
    },
    due,
    // Test mode settles at once and sends nothing: no job of these kinds is ever queued.
    settlement: { intervalMs: 0, jobKind: 'test.settle', depositRefundJobKind: 'test.deposit_refund' },
    now,
  })
  const row = await db
    .selectFrom('payments')
    .select('status')
    .where('id', '=', payment.id)
    .executeTakeFirstOrThrow()
  const amount = body.amount ? BigInt(body.amount) : due
  const total = outcome.kind === 'pending' || outcome.kind === 'succeeded' ? outcome.received : amount
  const base = { status: row.status, received: total.toString(), due: due.toString() }
  switch (outcome.kind) {
    case 'deposit':
      return { outcome: 'deposit', ...base, depositId: outcome.depositId, reason: outcome.reason }
    case 'succeeded':
      return {
        outcome: 'succeeded',
        ...base,
        ...(outcome.depositId ? { depositId: outcome.depositId, reason: 'overpaid' as const } : {}),
      }
    default:
      return { outcome: 'pending', ...base }
  }
}
