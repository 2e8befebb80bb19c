import type { PaymentCreateBodyPreview, PaymentCreateResponse } from '../../contract/payment.js'
import type { ServerConfig } from '../config.js'
import type { AuthContext } from '../context.js'
import { fail, validationError } from '../errors.js'
import { newId } from '../ids.js'
import { wake } from '../jobs/wake.js'
import type { Db } from '../store/db.js'
import { namedStatement } from '../store/prepared.js'
import type { MerchantRow } from '../store/schema.js'
import { unitDisplay } from './assets.js'
import { captureExpiryJobKind } from './capture.js'
import { snapshotSql } from './lifecycle.js'
import { createdJson, unixSeconds } from './views.js'

/** The furthest a merchant may push a payment's expiry. */
const maxPaymentLifetimeSeconds = 30 * 24 * 60 * 60

/**
 * Inserts a payment (at `payment_state_version` 0) and its `payment.created` event in one statement,
 * only while its merchant exists (the merchant may come from the auth cache). Reports whether it was
 * inserted, and whether its event waits for an endpoint (an event nobody receives is written dispatched:
 * migration 011).
 */
const insertPayment = namedStatement<{ inserted: boolean; pending: boolean }>(`WITH merchant AS (
    SELECT 1 FROM merchants WHERE id = $2 AND deleted_at IS NULL
  ), inserted AS (
    INSERT INTO payments (id, merchant_id, partner_id, mode, reference_id, amount_unit, amount_value, status,
      expires_at, checkout, created_at, updated_at, capture_method, capture_by, source)
    SELECT $1, $2, $3, $4, $5, $6, $7, 'requires_action', $8, $9, $10, $10, $11, $12, $13 FROM merchant
    RETURNING *
  ), expiry AS (
    INSERT INTO jobs (kind, payment_id, run_at, locked_until, payload, result, last_error, created_at, updated_at)
    SELECT '${captureExpiryJobKind}', id, capture_by, NULL, '{}', NULL, NULL, created_at, created_at
    FROM inserted WHERE capture_method = 'manual'
  ), event AS (
    INSERT INTO payment_events (payment_id, type, payment_state_version, snapshot, created_at)
    SELECT id, 'payment.created', payment_state_version, ${snapshotSql('inserted')}, created_at
    FROM inserted
    RETURNING dispatched_at
  )
  SELECT EXISTS (SELECT 1 FROM inserted) AS inserted,
    EXISTS (SELECT 1 FROM event WHERE dispatched_at IS NULL) AS pending`)

/**
 * Inserts a new payment, `requires_action`, with its `payment.created` event; `404 merchant_not_found`
 * when the merchant is gone. Returns its id.
 */
export async function insertPaymentRow(
  db: Db,
  input: {
    auth: Pick<AuthContext, 'partnerId' | 'mode'>
    merchantId: string
    referenceId: string
    amount: { unit: string; value: string }
    expiresAt: Date
    checkout?: PaymentCreateBodyPreview['checkout']
    /** How the money arrives: `pull` (the gateway flow), `mandate` (a subscription's period). */
    source: 'pull' | 'mandate'
    /** Manual capture: held once paid until captured, voided, or voided by itself then (docs/capture.md). */
    captureBy?: Date
    now: Date
    afterCommit: (fn: () => void) => void
  },
): Promise<string> {
  const id = newId('payment')
  const [written] = (
    await insertPayment(
      db,
      id,
      input.merchantId,
      input.auth.partnerId,
      input.auth.mode,
      input.referenceId,
      input.amount.unit,
      input.amount.value,
      input.expiresAt,
      input.checkout ? JSON.stringify(input.checkout) : null,
      input.now,
      input.captureBy ? 'manual' : 'automatic',
      input.captureBy ?? null,
      input.source,
    )
  ).rows
  if (!written?.inserted) fail('merchant_not_found', 'Merchant not found.', { merchantId: input.merchantId })
  // The event waits for an endpoint: wake this process's webhook dispatcher, once it is committed.
  if (written.pending) input.afterCommit(wake)
  return id
}

/** A new payment for `merchant`, `requires_action` until it expires. */
export async function createPayment(
  db: Db,
  input: {
    auth: AuthContext
    merchant: Pick<MerchantRow, 'id'>
    /** Stable bodies have no `checkout`; the preview schema (which has it) validated preview calls. */
    body: PaymentCreateBodyPreview
    config: ServerConfig
    now: Date
    /** Runs a function once the insert is committed (the route's, under an Idempotency-Key). */
    afterCommit: (fn: () => void) => void
  },
): Promise<PaymentCreateResponse> {
  const { auth, merchant, body, config, now } = input
  const display = unitDisplay(body.amount.unit, config)
  if (!display) {
    throw validationError([{ path: 'body.amount.unit', message: `Unsupported unit ${body.amount.unit}.` }])
  }
  let expiresAt: Date
  if (body.expiresAt !== undefined) {
    const seconds = body.expiresAt - unixSeconds(now)
    if (seconds <= 0)
      throw validationError([{ path: 'body.expiresAt', message: 'expiresAt must be in the future.' }])
    if (seconds > maxPaymentLifetimeSeconds) {
      throw validationError([{ path: 'body.expiresAt', message: 'expiresAt is more than 30 days away.' }])
    }
    expiresAt = new Date(body.expiresAt * 1000)
  } else {
    expiresAt = new Date((unixSeconds(now) + config.paymentTtlSeconds) * 1000)
  }
  const captureBy = captureByOf(body, config, now, expiresAt)
  const id = await insertPaymentRow(db, {
    auth,
    merchantId: merchant.id,
    referenceId: body.referenceId,
    amount: body.amount,
    expiresAt,
    checkout: body.checkout,
    source: 'pull',
    ...(captureBy && { captureBy }),
    now,
    afterCommit: input.afterCommit,
  })
  return createdJson({ id, status: 'requires_action', expires_at: expiresAt }, config)
}

/**
 * A manual-capture payment's `captureBy` (undefined for automatic capture): after the payment's expiry
 * (a buyer may pay until then) and at most
 * `capture.maxHoldSeconds` after now; `capture.defaultHoldSeconds` after now when not given.
 */
function captureByOf(
  body: PaymentCreateBodyPreview,
  config: ServerConfig,
  now: Date,
  expiresAt: Date,
): Date | undefined {
  if (body.capture !== 'manual') {
    if (body.captureBy !== undefined)
      throw validationError([{ path: 'body.captureBy', message: 'captureBy needs capture "manual".' }])
    return undefined
  }
  const { defaultHoldSeconds, maxHoldSeconds } = config.capture
  const captureBy = body.captureBy ?? unixSeconds(now) + defaultHoldSeconds
  if (captureBy <= unixSeconds(expiresAt)) {
    const hint = body.captureBy === undefined ? ` (the default, ${defaultHoldSeconds} s from now)` : ''
    throw validationError([{ path: 'body.captureBy', message: `captureBy${hint} must be after expiresAt.` }])
  }
  const seconds = captureBy - unixSeconds(now)
  if (seconds > maxHoldSeconds) {
    throw validationError([
      {
        path: 'body.captureBy',
        message: `captureBy is more than ${maxHoldSeconds} seconds away (this server's longest hold).`,
      },
    ])
  }
  return new Date(captureBy * 1000)
}
