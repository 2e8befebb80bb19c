import type { CollectData, PaymentOption } from '../contract/gateway.js'
import { abortable } from '../errors/abort.js'
import { PayError } from '../errors/PayError.js'
import {
  buildCollectDataUrl,
  type CollectDataMessage,
  type CollectDataUrlOptions,
  parseCollectDataMessage,
} from './collectData.js'
import type { CollectDataRequest } from './config.js'
import { type FlowData, type FlowRun, snapshotChanged, wrap } from './run.js'
import { invalidTransition } from './states.js'

/** The form an option asks for: its own, else the payment-wide one; none without a URL. */
export function formOf(data: Pick<FlowData, 'collectData'>, option: PaymentOption): CollectData | undefined {
  const form = option.collectData ?? data.collectData ?? undefined
  return form?.url ? form : undefined
}

/** The selected option's form, if any. */
export function selectedForm(data: FlowData): CollectData | undefined {
  return data.option ? formOf(data, data.option) : undefined
}

/** True once the selected option needs no form, or its form reported `IC_COMPLETE`. */
export function isCollectDataReady(data: FlowData): boolean {
  const form = selectedForm(data)
  return form === undefined || form.url === data.collectDataCompleted
}

export function selectedFormUrl(data: FlowData, options?: CollectDataUrlOptions): string {
  const form = selectedForm(data)
  if (!form) {
    throw new PayError({ code: 'collect_data_failed', message: 'The selected option has no form.' })
  }
  return buildCollectDataUrl(form, options)
}

/**
 * Feeds a message the form posted. `IC_COMPLETE` makes the flow ready to fetch actions; `IC_ERROR`
 * emits `error` (PayError `collect_data_failed`) and leaves the form open for a retry or `cancel()`.
 * Messages that are not the form's are ignored (undefined).
 */
export function completeCollectData(run: FlowRun, message: unknown): CollectDataMessage | undefined {
  const parsed = parseCollectDataMessage(message)
  if (!parsed) return undefined
  const { state } = run.data
  const form = selectedForm(run.data)
  if (state !== 'collectingData' || !form) {
    throw invalidTransition(state, 'fetchingActions', 'No data-collection form is open.')
  }
  if (parsed.type === 'complete') {
    run.data.collectDataCompleted = form.url
    snapshotChanged(run)
  } else {
    run.events.emit(
      'error',
      new PayError({
        code: 'collect_data_failed',
        message: 'The data-collection form reported an error.',
        context: { error: parsed.error },
      }),
    )
  }
  return parsed
}

/** Drives the form through `onCollectData` until it completes, passing back each error to the next try. */
export async function collectData(run: FlowRun): Promise<void> {
  const handler = run.config.onCollectData!
  let error: string | undefined
  while (!isCollectDataReady(run.data)) {
    const form = selectedForm(run.data)!
    const request: CollectDataRequest = {
      url: selectedFormUrl(run.data, run.config.collectDataUrl),
      ...(form.schema !== undefined && { schema: form.schema }),
      ...(error !== undefined && { error }),
    }
    let message: unknown
    try {
      message = await abortable(handler(request), run.controller.signal)
    } catch (cause) {
      throw wrap(cause, 'collect_data_failed', 'The data-collection form could not be completed.')
    }
    const outcome = completeCollectData(run, message)
    if (outcome?.type === 'error') error = outcome.error
    else if (!outcome) error = 'The form posted no completion message.'
  }
}
