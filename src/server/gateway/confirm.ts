import type { ConfirmBody, ConfirmResponse } from '../../contract/gateway.js'
import type { ConfirmContext } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { inSpan } from '../metrics/tracing.js'
import { toAmount } from '../payments/assets.js'
import {
  changePaymentInSteps,
  confirmWithJob,
  succeedPayment,
  transitionPayment,
} from '../payments/lifecycle.js'
import { testConfirmSteps } from '../payments/settlements.js'
import { statusJson, unixSeconds } from '../payments/views.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { activateSubscription } from '../subscriptions/lifecycle.js'
import { optionTerms } from '../subscriptions/mandates.js'
import type { DriverRegistry } from './drivers.js'
import { signedActions, usableOption } from './option.js'
import { assertPayable, driverPayment, type GatewayPaymentRow, type OptionRead } from './payment.js'
import { checkResults } from './results.js'
import { toStoredOption } from './store.js'

export interface ConfirmInput {
  db: Db
  config: ServerConfig
  registry: DriverRegistry
  payment: GatewayPaymentRow
  /** The option as read with the payment (findGatewayPaymentAndOption); else it is looked up. */
  option?: OptionRead
  body: ConfirmBody
  now: Date
  /** Runs in the transaction that moves the payment to processing (e.g. to record what was confirmed). */
  onProcessing?: (trx: Db) => Promise<void>
  /** The request's after-commit hook (RouteContext.afterCommit), offered to the driver's confirm. */
  afterCommit?: (fn: () => void) => void
  /** The caller's credential (API key id or app id): what the executor's failed sends are charged to. */
  credentialId: string
  /**
   * A FastPath (fastPath.ts): a live confirm its driver plans (ChainDriver.planConfirm) is one statement,
   * the move to processing carrying its event, job, wake-up and records, instead of a transaction.
   */
  oneStatement?: boolean
}

/**
 * Spec row 23. Every check that needs no state change runs first, on what was read before any write.
 * Test mode's driver decides at once and writes nothing, so its success is one statement
 * (changePaymentInSteps: processing, succeeded and, when the merchant settles the asset, settled).
 * Otherwise one transaction moves the payment `requires_action -> processing` with a conditional UPDATE
 * (so of racing confirms, cancels and the expiry sweep exactly one wins; the others get
 * `409 invalid_state`), lets the driver execute, and for a synchronous outcome moves on to `succeeded`
 * or `failed` before committing.
 */
export function confirmPayment(input: ConfirmInput): Promise<ConfirmResponse> {
  return inSpan('payment.confirm', { 'caipay.payment_id': input.payment.id }, () => confirm(input))
}

async function confirm(input: ConfirmInput): Promise<ConfirmResponse> {
  const { db, config, registry, payment, body, now } = input
  assertPayable(payment)
  const { row, driver, asset } = await usableOption(
    db,
    registry,
    payment,
    body.optionId,
    now,
    'confirm',
    input.option,
  )
  const actions = signedActions(row)
  if (!actions)
    fail('invalid_state', 'Fetch this option first: it has actions to build.', { optionId: row.id })
  checkResults(actions, body.results)

  const base: Omit<ConfirmContext, 'db'> = {
    payment: driverPayment(payment),
    option: toStoredOption(row),
    asset,
    actions,
    results: body.results,
    now: unixSeconds(now),
    credentialId: input.credentialId,
  }
  // A live confirm the driver plans is written as its plan (below): checks the plan carries are left to it.
  const planned = Boolean(input.oneStatement && payment.mode !== 'test' && !input.onProcessing)
  await driver.verify?.({ ...base, db, ...(planned ? { planned } : {}) })

  const optionAmount = toAmount(`caip19/${row.asset}`, row.amount, config)
  const confirmed = {
    selected_option_id: row.id,
    buyer: row.account,
    option_amount: JSON.stringify(optionAmount),
  }
  const decided = payment.mode === 'test' ? await driver.confirm({ ...base, db }) : undefined
  const plan = planned && !decided ? driver.planConfirm?.(base) : undefined
  if (plan && !plan.inserts?.length && (!plan.guard || plan.guard.relayGuardArguments)) {
    // A job alone along, and at most the relay guard (EVM gasless): the same move as below, as one named
    // statement.
    const processing = await confirmWithJob(db, {
      paymentId: payment.id,
      confirmed,
      job: { ...plan.job, now },
      now,
      relayGuard: plan.guard?.relayGuardArguments,
    }).catch((error: unknown) => {
      plan.guard?.refused(error)
      throw error
    })
    if (plan.afterCommit) input.afterCommit?.(plan.afterCommit)
    return answer(processing)
  }
  if (plan) {
    const processing = await transitionPayment(db, {
      paymentId: payment.id,
      from: 'requires_action',
      to: 'processing',
      set: confirmed,
      notExpiredAt: now,
      now,
      along: { job: { ...plan.job, now }, inserts: plan.inserts, guard: plan.guard?.check },
    }).catch((error: unknown) => {
      plan.guard?.refused(error)
      throw error
    })
    if (plan.afterCommit) input.afterCommit?.(plan.afterCommit)
    return answer(processing)
  }
  const final = await inTransaction(db, async (trx) => {
    if (decided?.status === 'succeeded') {
      const steps = await testConfirmSteps(trx, {
        payment,
        confirmed,
        asset: row.asset,
        value: row.amount,
        txId: decided.txId,
        settlementAsset: input.option?.settlementAsset,
        now,
      })
      const paid = await changePaymentInSteps(trx, steps)
      await input.onProcessing?.(trx)
      const terms = optionTerms(row.state)
      if (terms) {
        // The first period is paid and the mandate signed: the subscription is active from here.
        await activateSubscription(trx, {
          paymentId: payment.id,
          mandate: {
            buyer: row.account,
            asset: row.asset,
            amountPerPeriod: BigInt(row.amount),
            spender: terms.spender,
            state: { kind: row.kind, results: [...body.results] },
          },
          now,
        })
      }
      return paid
    }
    const processing = await transitionPayment(trx, {
      paymentId: payment.id,
      from: 'requires_action',
      to: 'processing',
      set: confirmed,
      notExpiredAt: now,
      now,
    })
    await input.onProcessing?.(trx)
    const outcome =
      decided ??
      (await driver.confirm({
        ...base,
        db: trx,
        ...(input.afterCommit ? { afterCommit: input.afterCommit } : {}),
      }))
    if (outcome.status === 'processing') return processing
    if (outcome.status === 'failed') {
      return transitionPayment(trx, {
        paymentId: payment.id,
        from: 'processing',
        to: 'failed',
        set: { failure_code: outcome.failureCode },
        now,
      })
    }
    const succeeded = await succeedPayment(trx, { paymentId: payment.id, txId: outcome.txId, now })
    return succeeded ?? processing
  })
  return answer(final)
}

function answer(row: Pick<PaymentRow, 'status' | 'tx_id'>): ConfirmResponse {
  const { status, isFinal, pollInMs } = statusJson(row)
  return { status, isFinal, pollInMs }
}
