import { type RawBuilder, sql } from 'kysely'
import type { ConfirmBody, ConfirmResponse } from '../../contract/gateway.js'
import { PayError } from '../../errors/PayError.js'
import type { ConfirmContext } from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import { type RoutePlan, runRoutePlan, StalePlan } from '../idempotency.js'
import { toAmount } from '../payments/assets.js'
import { rememberFinal } from '../payments/finalStatuses.js'
import {
  changePaymentInSteps,
  paymentStepsWrite,
  succeedPayment,
  transitionPayment,
} from '../payments/lifecycle.js'
import { testConfirmSteps } from '../payments/settlements.js'
import { statusJson, unixSeconds } from '../payments/views.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import type { DriverRegistry } from './drivers.js'
import { type FetchedRead, stillAsFetched } from './fetchedReads.js'
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
  /**
   * Payment and option come from a read an earlier request made: the write holds only where this
   * condition still does, and otherwise throws StalePlan (see planConfirmOnFetched).
   */
  stillAsRead?: RawBuilder<boolean>
  body: ConfirmBody
  now: Date
  /** Runs in the transaction that moves the payment to processing (e.g. to record what was confirmed). */
  onProcessing?: (trx: Db) => Promise<void>
}

/** Spec row 23, checked and written at once (see planConfirm). */
export async function confirmPayment(input: ConfirmInput): Promise<ConfirmResponse> {
  return runRoutePlan(input.db, await planConfirm(input))
}

/**
 * Spec row 23. Every check that needs no state change runs first, on what was read before any write.
 * Test mode's driver decides at once and writes nothing, so its success is one planned statement (all
 * steps, and under an Idempotency-Key the key's answer too: paymentStepsWrite). Otherwise one transaction
 * moves the payment `requires_action -> processing` with a conditional UPDATE (so of racing confirms,
 * cancels and the expiry sweep exactly one wins; the others get `409 invalid_state`), lets the driver
 * execute, and for a synchronous outcome moves on to `succeeded` or `failed` before committing.
 */
export async function planConfirm(input: ConfirmInput): Promise<RoutePlan<ConfirmResponse>> {
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
  }
  await driver.verify?.({ ...base, db })

  const optionAmount = toAmount(`caip19/${row.asset}`, row.amount, config)
  const confirmed = {
    selected_option_id: row.id,
    buyer: row.account,
    option_amount: JSON.stringify(optionAmount),
  }
  const decided = payment.mode === 'test' ? await driver.confirm({ ...base, db }) : undefined
  const txId = decided?.status === 'succeeded' ? decided.txId : undefined
  const testSuccess =
    txId === undefined
      ? undefined
      : await testConfirmSteps(db, {
          payment,
          confirmed,
          asset: row.asset,
          value: row.amount,
          txId,
          settlementAsset: input.option?.settlementAsset,
          now,
        })
  // A success's answer is known before it is written: the status its last step sets.
  if (testSuccess && !input.onProcessing) {
    const status = testSuccess.steps.findLast((step) => step.set.status)!.set.status!
    const paid = { status, tx_id: txId! }
    const steps = paymentStepsWrite(db, testSuccess, answer(paid))
    const { stillAsRead } = input
    const write = stillAsRead
      ? {
          ...steps,
          holds: sql<boolean>`(${steps.holds}) AND (${stillAsRead})`,
          refuse: () => Promise.reject(new StalePlan()),
        }
      : steps
    const { afterWrite } = write
    // Once committed, the payment's final answer is known: its next status poll needs no read.
    const remember = () =>
      rememberFinal(db, payment.id, {
        merchantId: payment.merchant_id,
        mode: payment.mode,
        answer: statusJson(paid),
      })
    return {
      write: {
        ...write,
        afterWrite: (reported) => {
          afterWrite?.(reported)
          remember()
        },
      },
    }
  }
  return {
    run: async (db) => {
      const final = await inTransaction(db, async (trx) => {
        if (testSuccess) {
          const paid = await changePaymentInSteps(trx, testSuccess)
          await input.onProcessing?.(trx)
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
        const outcome = decided ?? (await driver.confirm({ ...base, db: trx }))
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
    },
  }
}

/**
 * planConfirm on the read the option's fetch kept (gateway/fetchedReads.ts), so that test mode's confirm
 * is one statement. Only its single guarded write is taken from such a plan: a refusal, or work that
 * needs a transaction, is undefined here, and the caller plans on a fresh read.
 */
export async function planConfirmOnFetched(
  input: Omit<ConfirmInput, 'payment' | 'option' | 'stillAsRead'> & { fetched: FetchedRead },
): Promise<RoutePlan<ConfirmResponse> | undefined> {
  const { fetched, ...rest } = input
  try {
    const plan = await planConfirm({
      ...rest,
      payment: fetched.payment,
      option: fetched.option,
      stillAsRead: stillAsFetched(fetched),
    })
    return 'write' in plan ? plan : undefined
  } catch (error) {
    if (error instanceof PayError) return undefined
    throw error
  }
}

function answer(row: Pick<PaymentRow, 'status' | 'tx_id'>): ConfirmResponse {
  const { status, isFinal, pollInMs } = statusJson(row)
  return { status, isFinal, pollInMs }
}
