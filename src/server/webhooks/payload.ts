import { captureHeldValue } from '../../contract/payment.js'
import {
  type AnyWebhookEvent,
  type WebhookPaymentSnapshot,
  type WebhookRefundEvent,
  type WebhookRefundSnapshot,
  type WebhookSubscriptionEvent,
  type WebhookSubscriptionSnapshot,
  webhookApiVersion,
} from '../../contract/webhooks.js'

/**
 * The payload of a payment event, WalletConnect Pay's webhook contract (`api_version` 2026-05-18): an
 * envelope around a full snapshot of the payment at the event's `payment_state_version`, with each stage
 * object null until the payment reached it. Rendered from the outbox row's snapshot (the payments row
 * as the change left it, see payments/lifecycle.ts), so it is the same however late it is rendered.
 */

/** The `payment_events` columns a payload needs. */
export interface PaymentEventForPayload {
  id: string
  type: string
  created_at: Date
  snapshot: Record<string, unknown>
}

type Snapshot = Record<string, unknown>

const text = (row: Snapshot, key: string): string | null => {
  const value = row[key]
  return value === null || value === undefined ? null : String(value)
}

/** Timestamps in the snapshot are PostgreSQL's JSON form; the payload has ISO 8601 UTC. */
const iso = (row: Snapshot, key: string): string | null => {
  const value = text(row, key)
  return value === null ? null : new Date(value).toISOString()
}

const amountOf = (value: unknown): { unit: string; value: string } | null => {
  if (!value || typeof value !== 'object') return null
  const { unit, value: amount } = value as { unit?: unknown; value?: unknown }
  return typeof unit === 'string' && typeof amount === 'string' ? { unit, value: amount } : null
}

/** `caip19/<chain>/<asset>` -> `<chain>` (the CAIP-2 part of a CAIP-19 id). */
function chainOfUnit(unit: string | undefined): string | null {
  if (!unit?.startsWith('caip19/')) return null
  const [namespace, reference] = unit.slice(7).split('/')[0]!.split(':')
  return namespace && reference ? `${namespace}:${reference}` : null
}

export function paymentSnapshot(row: Snapshot): WebhookPaymentSnapshot {
  const processingAt = iso(row, 'processing_at')
  const optionAmount = amountOf(row.option_amount)
  const succeededAt = iso(row, 'succeeded_at')
  const failedAt = iso(row, 'failed_at')
  const cancelledAt = iso(row, 'cancelled_at')
  const expiredAt = iso(row, 'expired_at')
  const settledAt = iso(row, 'settled_at')
  const settlementUnit = text(row, 'settlement_unit')
  const settlementValue = text(row, 'settlement_value')
  return {
    payment_id: String(row.id),
    merchant_id: String(row.merchant_id),
    live: row.mode === 'live',
    payment_state_version: Number(row.payment_state_version ?? 0),
    reference_id: String(row.reference_id),
    status: String(row.status),
    amount: { unit: String(row.amount_unit), value: String(row.amount_value) },
    created_at: iso(row, 'created_at')!,
    expires_at: iso(row, 'expires_at')!,
    // WalletConnect Pay's contract has the processing facts or no processing block, never one of nulls.
    processing:
      processingAt === null || optionAmount === null
        ? null
        : {
            processing_at: processingAt,
            option_amount: optionAmount,
            fee: null,
            // No fee: the merchant is expected to receive what the buyer pays.
            settlement_amount: optionAmount,
            buyer_caip10: text(row, 'buyer'),
            chain_caip2: chainOfUnit(optionAmount?.unit),
          },
    success: succeededAt === null ? null : { succeeded_at: succeededAt, tx_id: text(row, 'tx_id') ?? '' },
    failed: failedAt === null ? null : { failed_at: failedAt, failure_reason: text(row, 'failure_code') },
    cancelled:
      cancelledAt === null
        ? null
        : { cancelled_at: cancelledAt, cancellation_reason: text(row, 'cancelled_reason') },
    expired: expiredAt === null ? null : { expired_at: expiredAt },
    settled:
      settledAt === null
        ? null
        : {
            settled_at: settledAt,
            tx_id: text(row, 'settlement_tx_id') ?? '',
            amount:
              settlementUnit && settlementValue !== null
                ? { unit: settlementUnit, value: settlementValue }
                : null,
          },
    ...(row.capture_method === 'manual' ? { capture: captureSnapshot(row) } : {}),
  }
}

/** A manual-capture payment's hold (docs/capture.md), null until it is paid. */
function captureSnapshot(row: Snapshot): WebhookPaymentSnapshot['capture'] {
  const status = text(row, 'capture_status') as
    | NonNullable<WebhookPaymentSnapshot['capture']>['status']
    | null
  if (status === null) return null
  const captured = text(row, 'captured_value')
  const unit = String(row.amount_unit)
  return {
    status,
    authorized_amount: { unit, value: String(row.amount_value) },
    captured_amount: captured === null ? null : { unit, value: captured },
    held_amount: {
      unit,
      value: captureHeldValue(status, text(row, 'capture_failure_code'), String(row.amount_value), captured),
    },
    failure_code: text(row, 'capture_failure_code') as 'transfer_failed' | null,
    capture_by: iso(row, 'capture_by')!,
    captured_at: iso(row, 'captured_at'),
    voided_at: iso(row, 'voided_at'),
  }
}

/** A refund event's snapshot is the refunds row (refunds/events.ts). */
export function refundSnapshot(row: Snapshot): WebhookRefundSnapshot {
  const asset = text(row, 'asset')
  const assetValue = text(row, 'asset_value')
  return {
    refund_id: String(row.id),
    payment_id: String(row.payment_id),
    merchant_id: String(row.merchant_id),
    live: row.mode === 'live',
    payment_state_version: Number(row.payment_state_version ?? 0),
    status: String(row.status) as WebhookRefundSnapshot['status'],
    amount: { unit: String(row.amount_unit), value: String(row.amount_value) },
    asset_amount: asset && assetValue !== null ? { unit: `caip19/${asset}`, value: assetValue } : null,
    destination: text(row, 'destination'),
    reason: text(row, 'reason'),
    tx_id: text(row, 'tx_id'),
    failure_code: text(row, 'failure_code'),
    created_at: iso(row, 'created_at')!,
    succeeded_at: iso(row, 'succeeded_at'),
    failed_at: iso(row, 'failed_at'),
  }
}

/** A subscription event's snapshot is the subscriptions row plus its payment (subscriptions/events.ts). */
export function subscriptionSnapshot(row: Snapshot): WebhookSubscriptionSnapshot {
  const asset = text(row, 'asset')
  const perPeriod = text(row, 'amount_per_period')
  return {
    subscription_id: String(row.id),
    merchant_id: String(row.merchant_id),
    live: row.mode === 'live',
    payment_id: String(row.payment_id),
    payment_state_version: Number(row.payment_state_version ?? 0),
    reference_id: String(row.reference_id),
    status: String(row.status),
    amount: { unit: String(row.amount_unit), value: String(row.amount_value) },
    interval: String(row.interval),
    interval_count: Number(row.interval_count),
    periods: row.periods === null || row.periods === undefined ? null : Number(row.periods),
    periods_charged: Number(row.periods_charged ?? 0),
    next_charge_at: iso(row, 'next_charge_at'),
    buyer_caip10: text(row, 'buyer'),
    amount_per_period: asset && perPeriod !== null ? { unit: `caip19/${asset}`, value: perPeriod } : null,
    spender_caip10: text(row, 'spender'),
    cancel_reason: text(row, 'cancel_reason'),
    created_at: iso(row, 'created_at')!,
    end_at: iso(row, 'end_at')!,
  }
}

/** The event as it is sent (and signed): the body bytes every attempt of every delivery reuses. */
export function renderPaymentEvent(event: PaymentEventForPayload): string {
  const envelope = {
    id: event.id,
    api_version: webhookApiVersion,
    created_at: event.created_at.toISOString(),
  }
  const payload: AnyWebhookEvent =
    event.snapshot.object === 'refund'
      ? { ...envelope, type: event.type as WebhookRefundEvent['type'], data: refundSnapshot(event.snapshot) }
      : event.snapshot.object === 'subscription'
        ? {
            ...envelope,
            type: event.type as WebhookSubscriptionEvent['type'],
            data: subscriptionSnapshot(event.snapshot),
          }
        : { ...envelope, type: event.type, data: paymentSnapshot(event.snapshot) }
  return JSON.stringify(payload)
}
