import { PayError } from '../../errors/PayError.js'
import type { ServerConfig } from '../config.js'
import { submitCollectedData } from '../gateway/collectSubmit.js'
import { confirmPayment } from '../gateway/confirm.js'
import type { DriverRegistry } from '../gateway/drivers.js'
import { findGatewayPayment, type GatewayPaymentRow } from '../gateway/payment.js'
import { findOption } from '../gateway/store.js'
import type { Db } from '../store/db.js'
import { type Confirmation, isRepeatedConfirmation, recordConfirmation } from './confirmations.js'
import { wcpStatus } from './translate.js'
import type { WcpConfirmBody, WcpStatusResponse } from './wire.js'

/**
 * The SDK's confirm over the gateway's: `collectedData` goes through the hosted form's own path first,
 * and a repeat of the confirm that already moved the payment on (the SDK retries on a 5xx, a 429 or a
 * lost connection, with no Idempotency-Key) answers the current status instead of `invalid_state`.
 */
export async function wcpConfirm(input: {
  db: Db
  config: ServerConfig
  registry: DriverRegistry
  payment: GatewayPaymentRow
  body: WcpConfirmBody
  now: Date
  /** The caller's credential: charged for the executor's fees a failed send costs. */
  credentialId: string
}): Promise<WcpStatusResponse> {
  const { db, payment, body, now } = input
  const confirmation: Confirmation = { optionId: body.optionId, results: body.results.map((r) => r.data[0]!) }
  if (payment.status !== 'requires_action' && (await isRepeatedConfirmation(db, payment.id, confirmation)))
    return wcpStatus(payment)
  if (body.collectedData) {
    const option = await findOption(db, payment.id, body.optionId)
    // Data for an option that asks for none is not stored: the hosted form would refuse it too.
    if (option?.collect_data_required) {
      const fields = Object.fromEntries(body.collectedData.fields.map((f) => [f.id, f.value]))
      await submitCollectedData({ db, payment, body: { optionId: option.id, fields }, now })
    }
  }
  try {
    await confirmPayment({
      ...input,
      body: { optionId: confirmation.optionId, results: [...confirmation.results] },
      onProcessing: (trx) => recordConfirmation(trx, payment.id, confirmation, now),
    })
  } catch (error) {
    // The repeat raced its own first attempt and lost the move to processing.
    const raced =
      error instanceof PayError &&
      error.code === 'invalid_state' &&
      (await isRepeatedConfirmation(db, payment.id, confirmation))
    if (!raced) throw error
  }
  return wcpStatus(await findGatewayPayment(db, payment.id, payment.mode, now))
}
