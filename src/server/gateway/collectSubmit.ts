import * as z from 'zod/mini'
import { CollectDataSubmitBody } from '../../contract/collectData.js'
import { bodyValidationError, fail, validationError } from '../errors.js'
import type { Db } from '../store/db.js'
import { assertFields } from './collectData.js'
import { assertPayable, type GatewayPaymentRow } from './payment.js'
import { findOption, saveCollectedData } from './store.js'

/**
 * What the hosted form posts. The option id is the credential: it is random, handed only to the wallet
 * that asked for options, and travels in the form URL; a separate token would ride in the same URL and
 * add nothing. The data is write-only for callers: no endpoint returns it.
 */
export async function submitCollectedData(input: {
  db: Db
  payment: GatewayPaymentRow
  body: unknown
  now: Date
}): Promise<{ paymentId: string; optionId: string; completed: true }> {
  const parsed = z.safeParse(CollectDataSubmitBody, input.body ?? {})
  if (!parsed.success) throw bodyValidationError(parsed.error.issues)
  const { optionId, fields } = parsed.data
  if (!optionId) throw validationError([{ path: 'body.optionId', message: 'optionId is required.' }])
  const { db, payment, now } = input
  assertPayable(payment)
  const option = await findOption(db, payment.id, optionId)
  if (!option) fail('payment_not_found', 'No such option for this payment.', { paymentId: payment.id })
  if (!option.collect_data_required) fail('invalid_state', 'This option does not collect data.', { optionId })
  assertFields(fields, now)
  const clean = {
    fullName: fields.fullName!.trim(),
    dateOfBirth: fields.dateOfBirth!,
    country: fields.country!,
  }
  await saveCollectedData(db, { paymentId: payment.id, optionId, fields: clean }, now)
  return { paymentId: payment.id, optionId, completed: true }
}
