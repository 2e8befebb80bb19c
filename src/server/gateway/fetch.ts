import type { FetchBody, FetchResponse } from '../../contract/gateway.js'
import { fail, paramsError } from '../errors.js'
import { unixSeconds } from '../payments/views.js'
import type { Db } from '../store/db.js'
import { optionTerms, withTerms } from '../subscriptions/mandates.js'
import type { DriverRegistry } from './drivers.js'
import { hasBuildActions, signedActions, usableOption } from './option.js'
import { assertPayable, driverPayment, type GatewayPaymentRow, type OptionRead } from './payment.js'
import { saveBuilt, toStoredOption } from './store.js'

/**
 * Spec row 21: the option's actions with `build` resolved. Building happens once per quote: a repeated
 * fetch returns the same bytes, so whatever the wallet signs is what confirm compares against (until
 * the driver says the build can no longer land; then a fetch builds afresh).
 */
export async function fetchActions(input: {
  db: Db
  registry: DriverRegistry
  payment: GatewayPaymentRow
  /** The option as read with the payment (findGatewayPaymentAndOption); else it is looked up. */
  option?: OptionRead
  body: FetchBody
  now: Date
  /** The collected data comes with the confirm instead of through the hosted form first. */
  dataAtConfirm?: boolean
}): Promise<FetchResponse> {
  const { db, registry, payment, body, now } = input
  assertPayable(payment)
  const purpose = input.dataAtConfirm ? 'fetchBeforeData' : 'fetch'
  const { row, driver, asset } = await usableOption(
    db,
    registry,
    payment,
    body.optionId,
    now,
    purpose,
    input.option,
  )
  if (hasBuildActions(row) && !row.actions.some((a) => a.type === 'build' && a.build.data === body.data)) {
    throw paramsError('body.data', 'data is not the build data of this option.')
  }
  const ready = signedActions(row)
  const context = {
    payment: driverPayment(payment),
    option: toStoredOption(row),
    asset,
    now: unixSeconds(now),
  }
  // A stale build (e.g. an expired Solana blockhash) is replaced, so the wallet can sign again.
  const stale = row.built !== null && driver.builtUsable !== undefined && !(await driver.builtUsable(context))
  if (ready && !stale) return { actions: ready }
  if (!driver.build) fail('internal_error', `The driver of ${row.chain_id} cannot build actions.`)
  const built = await driver.build(context, body.data)
  // A driver's build replaces its state; a subscription's terms stay with the option (confirm needs them).
  const terms = optionTerms(row.state)
  const state = terms && built.state !== undefined ? withTerms(built.state, terms) : built.state
  const saved = await saveBuilt(db, row.id, built.actions, state, now, stale ? row.built : null)
  return { actions: saved.built ?? built.actions }
}
