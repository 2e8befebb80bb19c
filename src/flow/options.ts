import type { PaymentOption } from '../contract/gateway.js'
import { isFinalStatus } from '../contract/statuses.js'
import { throwIfAborted } from '../errors/abort.js'
import { PayError } from '../errors/PayError.js'
import { formOf } from './collecting.js'
import type { LoadOptionsResult } from './config.js'
import { call, checkpoint, type FlowRun, finish, snapshotChanged, transition } from './run.js'
import { invalidTransition, type TerminalState } from './states.js'
import { validateOptions } from './validateOptions.js'

/**
 * From `loadingOptions`: advertises the signers' accounts and takes the options the service offers them; an options response
 * that already carries the payment's outcome ends the flow. Errors are the caller's to settle.
 */
export async function loadOptions(run: FlowRun): Promise<LoadOptionsResult> {
  throwIfAborted(run.controller.signal)
  const accounts = run.registry.accounts()
  run.data.accounts = accounts
  const response = await call(run, (signal) =>
    run.config.gateway.getOptions(run.paymentId, { accounts }, { signal }),
  )
  validateOptions(response, run.paymentId)
  run.data.options = response.options
  run.data.collectData = response.collectData ?? null
  run.merchant = response.info?.merchant.name
  const loaded: LoadOptionsResult = {
    options: response.options,
    ...(response.info && { info: response.info }),
  }
  run.events.emit('options', loaded)

  if (response.resultInfo) {
    finish(run, 'succeeded', response.resultInfo)
  } else if (response.info && isFinalStatus(response.info.status)) {
    finish(run, response.info.status as TerminalState)
  } else {
    transition(run, 'selecting')
  }
  await checkpoint(run)
  return run.data.result ? { ...loaded, result: run.data.result } : loaded
}

/**
 * A push option is paid by a transfer the buyer sends from any wallet (its `push.url`): nothing in it is
 * for this library to sign, so selecting or executing one is refused (`push_option`).
 */
export function assertPullOption(option: PaymentOption): void {
  if (!isPushOption(option)) return
  throw new PayError({
    code: 'push_option',
    message: 'A push option is paid by sending a transfer: show its URL; the wallet signs nothing for it.',
    context: { optionId: option.id, ...(option.push && { url: option.push.url }) },
  })
}

/** Whether the option is paid by a transfer the buyer sends (`source: "push"`). */
export function isPushOption(option: PaymentOption): boolean {
  return option.source === 'push' || option.push !== undefined
}

/**
 * What a wallet can offer when none of its signers can pay an option: the push options (each a URL to
 * show as a link or QR code for any wallet to pay). Empty while some pull option exists.
 */
export function pushFallback(options: readonly PaymentOption[]): PaymentOption[] {
  const push = options.filter(isPushOption)
  return push.length < options.length ? [] : push
}

/** Chooses an option; one with a data-collection form not completed yet moves the flow to `collectingData`. */
export function selectOption(run: FlowRun, optionId: string): void {
  const { state } = run.data
  if (state !== 'selecting' && state !== 'collectingData') {
    throw invalidTransition(state, 'selecting', `An option cannot be selected in state ${state}.`)
  }
  const option = run.data.options.find((candidate) => candidate.id === optionId)
  if (!option) {
    throw new PayError({
      code: 'unknown_option',
      message: 'No such option for this payment.',
      context: { optionId, known: run.data.options.map((o) => o.id) },
    })
  }
  assertPullOption(option)
  if (state === 'collectingData') transition(run, 'selecting')
  run.data.option = option
  const form = formOf(run.data, option)
  if (form && form.url !== run.data.collectDataCompleted) {
    transition(run, 'collectingData')
    run.events.emit('collectData', {
      url: form.url,
      ...(form.schema !== undefined && { schema: form.schema }),
    })
  }
  snapshotChanged(run)
}
