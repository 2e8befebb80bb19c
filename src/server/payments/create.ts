import { sql } from 'kysely'
import type { PaymentCreateBodyPreview, PaymentCreateResponse } from '../../contract/payment.js'
import type { ServerConfig } from '../config.js'
import type { AuthContext } from '../context.js'
import { fail, validationError } from '../errors.js'
import type { PlannedInsert } from '../idempotency.js'
import { newId } from '../ids.js'
import { wake } from '../jobs/wake.js'
import type { Db } from '../store/db.js'
import type { MerchantRow } from '../store/schema.js'
import { unitDisplay } from './assets.js'
import { createdEventInsert } from './lifecycle.js'
import { rememberPaymentFacts } from './paymentFacts.js'
import { createdJson, unixSeconds } from './views.js'

/** The furthest a merchant may push a payment's expiry. */
const maxPaymentLifetimeSeconds = 30 * 24 * 60 * 60

/**
 * A new payment as one planned INSERT (see defineInsertRoute): the row at `payment_state_version` 0,
 * the guard that its merchant still exists, and its `payment.created` event, written by the same
 * statement only when the payment is.
 */
export function paymentInsertPlan(input: {
  db: Db
  auth: AuthContext
  merchant: Pick<MerchantRow, 'id'>
  /** Stable bodies have no `checkout`; the preview schema (which has it) validated preview calls. */
  body: PaymentCreateBodyPreview
  config: ServerConfig
  now: Date
}): PlannedInsert<PaymentCreateResponse> {
  const { db, auth, merchant, body, config, now } = input
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
  const id = newId('payment')
  return {
    table: 'payments',
    row: {
      id,
      partner_id: auth.partnerId,
      merchant_id: merchant.id,
      mode: auth.mode,
      reference_id: body.referenceId,
      amount_unit: body.amount.unit,
      amount_value: body.amount.value,
      status: 'requires_action',
      expires_at: expiresAt,
      checkout: body.checkout ? JSON.stringify(body.checkout) : null,
      created_at: now,
      updated_at: now,
    },
    // The merchant may come from the auth cache, so the insert itself checks it still exists. The
    // key is the only condition, so the cached generic plan can only be the primary key (prepared.ts).
    guard: {
      holds: sql<boolean>`COALESCE((SELECT deleted_at IS NULL FROM merchants WHERE id = ${merchant.id}), false)`,
      refuse: () => fail('merchant_not_found', 'Merchant not found.', { merchantId: merchant.id }),
    },
    follow: createdEventInsert(),
    // The event committed with the payment and waits for an endpoint (not written dispatched, as an
    // event nobody receives is): wake this process's webhook dispatcher now.
    report: sql<boolean>`EXISTS (SELECT 1 FROM followed WHERE dispatched_at IS NULL)`,
    afterInsert: (pending) => {
      if (pending) wake()
      // The wallet's options call usually follows: it can quote without reading the payment first.
      rememberPaymentFacts(db, {
        id,
        mode: auth.mode,
        merchant_id: merchant.id,
        amount_unit: body.amount.unit,
        amount_value: body.amount.value,
        expires_at: expiresAt,
      })
    },
    result: createdJson({ id, status: 'requires_action', expires_at: expiresAt }, config),
  }
}
