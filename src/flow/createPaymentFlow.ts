import { createSignerRegistry } from '../actions/registry.js'
import { randomHex } from '../client/random.js'
import type { CollectData, PaymentOption } from '../contract/gateway.js'
import { abortError, throwIfAborted } from '../errors/abort.js'
import { PayError } from '../errors/PayError.js'
import type { PaymentReview } from '../review/types.js'
import type { CollectDataMessage, CollectDataUrlOptions } from './collectData.js'
import {
  collectData,
  completeCollectData,
  isCollectDataReady,
  selectedForm,
  selectedFormUrl,
} from './collecting.js'
import type { LoadOptionsResult, PaymentFlowOptions, ResumeFlowOptions } from './config.js'
import { confirm, poll } from './confirming.js'
import { Emitter } from './emitter.js'
import { loadOptions, selectOption } from './options.js'
import {
  checkpoint,
  checkpointOrReport,
  enter,
  type FlowData,
  type FlowRun,
  finish,
  snapshotOf,
  transition,
  wrap,
} from './run.js'
import { fetchActions, reviewActions, signActions } from './signing.js'
import { type FlowSnapshot, parseFlowSnapshot } from './snapshot.js'
import {
  assertTransition,
  canTransition,
  type FlowState,
  invalidTransition,
  isTerminalState,
  type TerminalState,
} from './states.js'
import type { FlowEvents, PaymentResult } from './types.js'

export type {
  CollectDataHandler,
  CollectDataRequest,
  LoadOptionsResult,
  PaymentFlowOptions,
  ReconcileRequest,
  ResumeFlowOptions,
} from './config.js'

/**
 * The wallet side of one payment: `idle -> loadingOptions -> selecting -> collectingData? ->
 * fetchingActions -> signing -> confirming -> polling -> succeeded | failed | expired | cancelled`.
 *
 * `execute()` resolves with the result whenever the service holds a final status for the payment
 * (including `cancelled` after a user rejection or `cancel()`), and rejects with a PayError when the
 * flow stops locally (`failed` with a local or gateway error, `cancelled` by an abort).
 *
 * Each job lives in its own module: options.ts, collecting.ts, signing.ts, confirming.ts and
 * exposure.ts (rebuilds after `quote_expired`); this class runs them in order and ends the flow.
 */
class PaymentFlow extends Emitter<FlowEvents> {
  readonly paymentId: string
  readonly #run: FlowRun
  #running: Promise<PaymentResult> | undefined
  #cancelling: Promise<PaymentResult> | undefined
  #reviewing: Promise<PaymentReview> | undefined
  #busy = 0

  constructor(config: ResumeFlowOptions, paymentId: string, data: FlowData) {
    super()
    this.paymentId = paymentId
    this.#run = {
      paymentId,
      config,
      data,
      events: this,
      registry: createSignerRegistry(config.signers),
      controller: new AbortController(),
      rebuilds: 0,
    }
    const external = config.signal
    // Already aborted: the first call ends the flow, once there can be listeners to see it.
    if (external?.aborted) this.#run.controller.abort(abortError(external))
    else external?.addEventListener('abort', () => this.#onExternalAbort(external), { once: true })
  }

  get flowId(): string {
    return this.#run.data.flowId
  }
  get state(): FlowState {
    return this.#run.data.state
  }
  get accounts(): readonly string[] {
    return this.#run.data.accounts
  }
  get options(): readonly PaymentOption[] {
    return this.#run.data.options
  }
  get selectedOption(): PaymentOption | undefined {
    return this.#run.data.option ?? undefined
  }
  /** The form the selected option asks for, if any. */
  get collectData(): CollectData | undefined {
    return selectedForm(this.#run.data)
  }
  /** True once the selected option needs no form, or its form reported `IC_COMPLETE`. */
  get collectDataReady(): boolean {
    return isCollectDataReady(this.#run.data)
  }
  get result(): PaymentResult | undefined {
    return this.#run.data.result ?? undefined
  }

  /** Plain JSON; `resumePaymentFlow(snapshot, deps)` continues from it. */
  snapshot(): FlowSnapshot {
    return snapshotOf(this.#run)
  }

  /** Advertises the signers' accounts (possibly none) and receives the payment options. */
  async loadOptions(): Promise<LoadOptionsResult> {
    // Outside the try: a second call is a programming error that does not end the flow.
    transition(this.#run, 'loadingOptions')
    this.#busy++
    try {
      return await loadOptions(this.#run)
    } catch (error) {
      return { options: [], result: await this.#settle(error) }
    } finally {
      this.#busy--
    }
  }

  /** Chooses an option; one with a data-collection form moves the flow to `collectingData`. */
  select(optionId: string): void {
    selectOption(this.#run, optionId)
  }

  /** The selected option's form URL with `prefill` (required fields only), `theme`, `themeVariables`. */
  collectDataUrl(options?: CollectDataUrlOptions): string {
    return selectedFormUrl(this.#run.data, options)
  }

  /**
   * Feeds a message the form posted. `IC_COMPLETE` makes the flow ready to fetch actions; `IC_ERROR`
   * emits `error` (PayError `collect_data_failed`) and leaves the form open for a retry or `cancel()`.
   * Messages that are not the form's are ignored (undefined).
   */
  completeCollectData(message: unknown): CollectDataMessage | undefined {
    return completeCollectData(this.#run, message)
  }

  /**
   * Fetches/builds the selected option's actions (the flow moves to `signing`), runs the signing guard
   * and resolves with what the actions do, decoded; emits `review`. Nothing is signed: `execute()` then
   * signs exactly these actions, `cancel()` refuses them. Errors end the flow as in `execute()`.
   */
  async review(): Promise<PaymentReview> {
    const refusal =
      this.#running || this.#busy > 0
        ? 'The flow is busy; listen to the review event.'
        : this.#run.config.guard === 'off' || !this.#run.config.review
          ? 'The review needs the signing guard and a reviewer (the review option).'
          : this.#run.data.state === 'confirming' || this.#run.data.state === 'polling'
            ? 'The actions are already signed.'
            : this.#refusal()
    const { state } = this.#run.data
    if (refusal) throw invalidTransition(state, 'signing', refusal)
    this.#busy++
    const reviewing = (async () => {
      try {
        while (this.#run.data.state !== 'signing') await this.#step()
        return (await reviewActions(this.#run)).review!
      } catch (error) {
        await this.#settle(error)
        throw wrap(error, 'internal_error', 'The payment flow failed.')
      } finally {
        this.#busy--
        this.#reviewing = undefined
      }
    })()
    this.#reviewing = reviewing
    return reviewing
  }

  /** Fetches/builds, signs every action in order, confirms and polls until final. Continues a resumed flow. */
  execute(): Promise<PaymentResult> {
    if (this.#running) return this.#running
    // One job at a time: an execute() called while review() works goes on from where it stops.
    const reviewing = this.#reviewing
    if (reviewing) return reviewing.then(this.execute.bind(this), this.execute.bind(this))
    const { state, result } = this.#run.data
    if (result) return Promise.resolve(result)
    // Programming errors: rejected without ending the flow.
    const refusal = this.#refusal()
    if (refusal) return Promise.reject(invalidTransition(state, 'fetchingActions', refusal))
    const running = this.#execute().finally(() => {
      this.#running = undefined
    })
    this.#running = running
    return running
  }

  /** Stops local work and cancels the payment at the service; resolves with the `cancelled` result. */
  cancel(): Promise<PaymentResult> {
    if (this.#cancelling) return this.#cancelling
    const { state, result } = this.#run.data
    if (state === 'cancelled' && result) return Promise.resolve(result)
    try {
      assertTransition(state, 'cancelled')
    } catch (error) {
      return Promise.reject(error)
    }
    const cancelling = (async () => {
      this.#run.controller.abort(
        new PayError({ code: 'aborted', message: 'The payment was cancelled.', context: { by: 'cancel' } }),
      )
      const refused = await this.#cancelAtGateway()
      return refused ? this.#endLocally('cancelled', refused) : this.#end('cancelled')
    })()
    this.#cancelling = cancelling
    return cancelling
  }

  async #execute(): Promise<PaymentResult> {
    const run = this.#run
    this.#busy++
    try {
      await checkpoint(run)
      while (!isTerminalState(run.data.state)) {
        throwIfAborted(run.controller.signal)
        await this.#step()
      }
      await checkpointOrReport(run)
      return run.data.result!
    } catch (error) {
      return await this.#settle(error)
    } finally {
      this.#busy--
    }
  }

  /** Why the flow cannot go on to fetch and sign yet, if it cannot. */
  #refusal(): string | undefined {
    const { state, option } = this.#run.data
    return isTerminalState(state)
      ? `The flow already ended (${state}).`
      : state === 'idle' || state === 'loadingOptions'
        ? 'Load options and select one first.'
        : state === 'selecting' && !option
          ? 'Select an option first.'
          : state === 'collectingData' && !this.collectDataReady && !this.#run.config.onCollectData
            ? 'The data-collection form has not completed.'
            : undefined
  }

  /** One job per state; each ends with a transition. */
  async #step(): Promise<void> {
    const run = this.#run
    switch (run.data.state) {
      case 'selecting':
        return enter(run, 'fetchingActions')
      case 'collectingData':
        if (!this.collectDataReady) await collectData(run)
        return enter(run, 'fetchingActions')
      case 'fetchingActions':
        return fetchActions(run)
      case 'signing':
        return signActions(run)
      case 'confirming':
        return confirm(run)
      case 'polling':
        return poll(run)
      default:
        throw invalidTransition(run.data.state, 'fetchingActions')
    }
  }

  /**
   * Ends the flow after an error. It resolves only when the service holds a final status: a user
   * rejection the service accepted as a cancel, or an expired payment. Anything else ends the flow
   * locally (`cancelled` when aborted or when the cancel was refused, `failed` otherwise) and rejects.
   */
  async #settle(error: unknown): Promise<PaymentResult> {
    if (this.#cancelling) return this.#cancelling
    const signal = this.#run.controller.signal
    const failure = signal.aborted
      ? abortError(signal)
      : wrap(error, 'internal_error', 'The payment flow failed.')
    const { state } = this.#run.data
    if (isTerminalState(state)) throw failure

    if (failure.code === 'user_rejected') {
      const refused = await this.#cancelAtGateway()
      if (refused) return this.#endLocally('cancelled', failure, refused)
      this.emit('error', failure)
      return this.#end('cancelled')
    }
    if (failure.code === 'payment_expired' && canTransition(state, 'expired')) return this.#end('expired')
    return this.#endLocally(failure.code === 'aborted' ? 'cancelled' : 'failed', failure)
  }

  /** An end the service holds too: the result, `final`, and a snapshot that says so. */
  async #end(status: TerminalState): Promise<PaymentResult> {
    const ended = finish(this.#run, status)
    await checkpointOrReport(this.#run)
    return ended
  }

  /**
   * An end the service does not (yet) share: no result and no `final`, just the state and the errors
   * (`failure`, then what else went wrong on the way out); rejects with `failure`.
   */
  async #endLocally(state: 'cancelled' | 'failed', failure: PayError, ...also: PayError[]): Promise<never> {
    transition(this.#run, state)
    for (const error of [failure, ...also]) this.emit('error', error)
    await checkpointOrReport(this.#run)
    throw failure
  }

  #onExternalAbort(external: AbortSignal): void {
    this.#run.controller.abort(abortError(external))
    // Work in progress settles itself; an idle flow ends here so listeners still see it stop.
    if (this.#busy === 0 && !this.#cancelling && !isTerminalState(this.#run.data.state)) {
      this.#settle(external.reason).catch(() => undefined)
    }
  }

  async #cancelAtGateway(): Promise<PayError | undefined> {
    try {
      await this.#run.config.gateway.cancel(this.paymentId, {
        idempotencyKey: `caipay-${this.flowId}-cancel`,
      })
      return undefined
    } catch (error) {
      return wrap(error, 'internal_error', 'The payment could not be cancelled at the service.')
    }
  }
}

export type { PaymentFlow }

export function createPaymentFlow(options: PaymentFlowOptions): PaymentFlow {
  const { paymentId, ...config } = options
  return new PaymentFlow(config, paymentId, {
    flowId: randomHex(16),
    state: 'idle',
    accounts: [],
    options: [],
    collectData: null,
    option: null,
    collectDataCompleted: null,
    actions: null,
    exposure: [],
    results: [],
    inFlight: null,
    pollInMs: null,
    result: null,
  })
}

/**
 * Continues a flow from a stored snapshot: recorded results are reused, never signed again. A snapshot
 * taken while options were loading restarts at `idle`: nothing had been decided yet.
 */
export function resumePaymentFlow(snapshot: unknown, options: ResumeFlowOptions): PaymentFlow {
  const { version: _version, paymentId, ...data } = parseFlowSnapshot(snapshot)
  if (data.state === 'loadingOptions') data.state = 'idle'
  return new PaymentFlow(options, paymentId, { ...data, exposure: data.exposure ?? [] } as FlowData)
}
