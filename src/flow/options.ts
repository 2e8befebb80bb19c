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
