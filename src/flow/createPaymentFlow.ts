import { EventEmitter } from 'eventemitter3'
import { guardActions, stillAuthorized } from '../actions/guard.js'
import { createSignerRegistry, type SignerRegistry } from '../actions/registry.js'
import { isUserRejection } from '../actions/rejection.js'
import { resolveActions } from '../actions/resolve.js'
import { type RoutedAction, routeActions } from '../actions/route.js'
import type { Signer } from '../actions/types.js'
import type { GatewayApi } from '../client/gatewayApi.js'
import { randomHex } from '../client/random.js'
import type { PaymentStatus } from '../contract/common.js'
import type { CollectData, GatewayPayment, PaymentOption, WalletRpcAction } from '../contract/gateway.js'
import { isFinalStatus } from '../contract/statuses.js'
import { broadcastingMethods } from '../contract/walletMethods.js'
import { abortable, abortError, throwIfAborted } from '../errors/abort.js'
import { isPayError, PayError, type PayErrorCode } from '../errors/PayError.js'
import {
  buildCollectDataUrl,
  type CollectDataMessage,
  type CollectDataUrlOptions,
  parseCollectDataMessage,
} from './collectData.js'
import { type PollOptions, pollUntilFinal } from './poll.js'
import { type FlowSnapshot, parseFlowSnapshot, snapshotVersion } from './snapshot.js'
import {
  assertTransition,
  canTransition,
  type FlowState,
  invalidTransition,
  isTerminalState,
  type TerminalState,
} from './states.js'
import type { ActionEvent, FlowEvents, PaymentResult, StatusEvent } from './types.js'
import { validateOptions } from './validateOptions.js'

export interface CollectDataRequest {
  /** The form URL with `prefill`/`theme`/`themeVariables` applied. */
  url: string
  schema?: string
  /** The `error` text of the previous attempt's `IC_ERROR`, when retrying. */
  error?: string
}

/** Opens the hosted form and resolves with the message it posted (`event.data`, string or object). */
export type CollectDataHandler = (request: CollectDataRequest) => Promise<unknown>

export interface ReconcileRequest {
  index: number
  chainId: string
  method: string
  params: readonly unknown[]
}

export interface PaymentFlowOptions {
  gateway: GatewayApi
  paymentId: string
  /** One signer per namespace; only their accounts are advertised. */
  signers: readonly Signer[]
  /** The signing guard; on by default. */
  guard?: 'on' | 'off'
  poll?: PollOptions
  /** Stops local work at once (PayError `aborted`); the payment itself is left as it is. */
  signal?: AbortSignal
  /** Lets `execute()` drive the data-collection form itself (otherwise call `completeCollectData`). */
  onCollectData?: CollectDataHandler
  collectDataUrl?: CollectDataUrlOptions
  /** Awaited at every checkpoint of `execute()`, notably before each signer call and after each result. */
  persist?: (snapshot: FlowSnapshot) => void | Promise<void>
  /**
   * After a crash while an action was with its signer, says what became of it: its result (e.g. a
   * transaction hash found on chain) to reuse, or null to sign again. Without it, an unrecorded
   * broadcasting action (`eth_sendTransaction`) fails the flow with `action_in_doubt`.
   */
  reconcile?: (request: ReconcileRequest) => Promise<string | null | undefined>
}

export type ResumeFlowOptions = Omit<PaymentFlowOptions, 'paymentId'>

export interface LoadOptionsResult {
  options: readonly PaymentOption[]
  info?: GatewayPayment
  /** Set when the flow already ended: the payment was paid or closed before this wallet got to it. */
  result?: PaymentResult
}

interface FlowData {
  flowId: string
  state: FlowState
  accounts: string[]
  options: PaymentOption[]
  collectData: CollectData | null
  option: PaymentOption | null
  collectDataCompleted: string | null
  actions: WalletRpcAction[] | null
  /** Actions signed in earlier rounds of this payment (before a rebuild); they may still execute. */
  earlier: WalletRpcAction[]
  results: string[]
  inFlight: number | null
  pollInMs: number | null
  result: PaymentResult | null
}

/**
 * The wallet side of one payment: `idle -> loadingOptions -> selecting -> collectingData? ->
 * fetchingActions -> signing -> confirming -> polling -> succeeded | failed | expired | cancelled`.
 *
 * `execute()` resolves with the result whenever the service holds a final status for the payment
 * (including `cancelled` after a user rejection or `cancel()`), and rejects with a PayError when the
 * flow stops locally (`failed` with a local or gateway error, `cancelled` by an abort).
 */
class PaymentFlow extends EventEmitter<FlowEvents> {
  readonly paymentId: string
  readonly #gateway: GatewayApi
  readonly #registry: SignerRegistry
  readonly #config: ResumeFlowOptions
  readonly #controller = new AbortController()
  #data: FlowData
  #running: Promise<PaymentResult> | undefined
  #cancelling: Promise<PaymentResult> | undefined
  #busy = 0
  #rebuilds = 0

  constructor(config: ResumeFlowOptions, paymentId: string, data: FlowData) {
    super()
    this.paymentId = paymentId
    this.#gateway = config.gateway
    this.#registry = createSignerRegistry(config.signers)
    this.#config = config
    this.#data = data
    const external = config.signal
    // Already aborted: the first call ends the flow, once there can be listeners to see it.
    if (external?.aborted) this.#controller.abort(abortError(external))
    else external?.addEventListener('abort', () => this.#onExternalAbort(external), { once: true })
  }

  get flowId(): string {
    return this.#data.flowId
  }
  get state(): FlowState {
    return this.#data.state
  }
  get accounts(): readonly string[] {
    return this.#data.accounts
  }
  get options(): readonly PaymentOption[] {
    return this.#data.options
  }
  get selectedOption(): PaymentOption | undefined {
    return this.#data.option ?? undefined
  }
  /** The form the selected option asks for, if any. */
  get collectData(): CollectData | undefined {
    return this.#data.option ? this.#formOf(this.#data.option) : undefined
  }
  /** True once the selected option needs no form, or its form reported `IC_COMPLETE`. */
  get collectDataReady(): boolean {
    const form = this.collectData
    return form === undefined || form.url === this.#data.collectDataCompleted
  }
  get result(): PaymentResult | undefined {
    return this.#data.result ?? undefined
  }

  /** Plain JSON; `resumePaymentFlow(snapshot, deps)` continues from it. */
  snapshot(): FlowSnapshot {
    const { flowId, ...rest } = this.#data
    return JSON.parse(
      JSON.stringify({ version: snapshotVersion, flowId, paymentId: this.paymentId, ...rest }),
    ) as FlowSnapshot
  }

  /** Advertises the signers' accounts (possibly none) and receives the payment options. */
  async loadOptions(): Promise<LoadOptionsResult> {
    this.#transition('loadingOptions')
    this.#busy++
    try {
      throwIfAborted(this.#controller.signal)
      const accounts = this.#registry.accounts()
      this.#data.accounts = accounts
      const response = await this.#call((signal) =>
        this.#gateway.getOptions(this.paymentId, { accounts }, { signal }),
      )
      validateOptions(response, this.paymentId)
      this.#data.options = response.options
      this.#data.collectData = response.collectData ?? null
      const loaded: LoadOptionsResult = {
        options: response.options,
        ...(response.info && { info: response.info }),
      }
      this.emit('options', loaded)

      if (response.resultInfo) {
        this.#finish('succeeded', response.resultInfo)
      } else if (response.info && isFinalStatus(response.info.status)) {
        this.#finish(response.info.status as TerminalState)
      } else {
        this.#transition('selecting')
      }
      await this.#checkpoint()
      return this.#data.result ? { ...loaded, result: this.#data.result } : loaded
    } catch (error) {
      return { options: [], result: await this.#settle(error) }
    } finally {
      this.#busy--
    }
  }

  /** Chooses an option; one with a data-collection form moves the flow to `collectingData`. */
  select(optionId: string): void {
    const { state } = this.#data
    if (state !== 'selecting' && state !== 'collectingData') {
      throw invalidTransition(state, 'selecting', `An option cannot be selected in state ${state}.`)
    }
    const option = this.#data.options.find((candidate) => candidate.id === optionId)
    if (!option) {
      throw new PayError({
        code: 'unknown_option',
        message: 'No such option for this payment.',
        context: { optionId, known: this.#data.options.map((o) => o.id) },
      })
    }
    if (state === 'collectingData') this.#transition('selecting')
    this.#data.option = option
    const form = this.#formOf(option)
    if (form && form.url !== this.#data.collectDataCompleted) {
      this.#transition('collectingData')
      this.emit('collectData', { url: form.url, ...(form.schema !== undefined && { schema: form.schema }) })
    }
    if (this.listenerCount('snapshot') > 0) this.#emitSnapshot()
  }

  /** The selected option's form URL with `prefill` (required fields only), `theme`, `themeVariables`. */
  collectDataUrl(options?: CollectDataUrlOptions): string {
    const form = this.collectData
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
  completeCollectData(message: unknown): CollectDataMessage | undefined {
    const parsed = parseCollectDataMessage(message)
    if (!parsed) return undefined
    const { state } = this.#data
    const form = this.collectData
    if (state !== 'collectingData' || !form) {
      throw invalidTransition(state, 'fetchingActions', 'No data-collection form is open.')
    }
    if (parsed.type === 'complete') {
      this.#data.collectDataCompleted = form.url
      if (this.listenerCount('snapshot') > 0) this.#emitSnapshot()
    } else {
      this.emit(
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

  /** Fetches/builds, signs every action in order, confirms and polls until final. Continues a resumed flow. */
  execute(): Promise<PaymentResult> {
    if (this.#running) return this.#running
    const { state, option, result } = this.#data
    if (result) return Promise.resolve(result)
    // Programming errors: rejected without ending the flow.
    const refusal = isTerminalState(state)
      ? `The flow already ended (${state}).`
      : state === 'idle' || state === 'loadingOptions'
        ? 'Load options and select one first.'
        : state === 'selecting' && !option
          ? 'Select an option first.'
          : state === 'collectingData' && !this.collectDataReady && !this.#config.onCollectData
            ? 'The data-collection form has not completed.'
            : undefined
    if (refusal) return Promise.reject(invalidTransition(state, 'fetchingActions', refusal))
    const running = this.#run().finally(() => {
      this.#running = undefined
    })
    this.#running = running
    return running
  }

  /** Stops local work and cancels the payment at the service; resolves with the `cancelled` result. */
  cancel(): Promise<PaymentResult> {
    if (this.#cancelling) return this.#cancelling
    const { state, result } = this.#data
    if (state === 'cancelled' && result) return Promise.resolve(result)
    try {
      assertTransition(state, 'cancelled')
    } catch (error) {
      return Promise.reject(error)
    }
    const cancelling = (async () => {
      this.#controller.abort(
        new PayError({ code: 'aborted', message: 'The payment was cancelled.', context: { by: 'cancel' } }),
      )
      const refused = await this.#cancelAtGateway()
      return refused ? this.#endLocally('cancelled', refused) : this.#end('cancelled')
    })()
    this.#cancelling = cancelling
    return cancelling
  }

  async #run(): Promise<PaymentResult> {
    this.#busy++
    try {
      await this.#checkpoint()
      while (!isTerminalState(this.#data.state)) {
        throwIfAborted(this.#controller.signal)
        await this.#step()
      }
      await this.#checkpointOrReport()
      return this.#data.result!
    } catch (error) {
      return await this.#settle(error)
    } finally {
      this.#busy--
    }
  }

  /** One step per state; a step ends with a transition. */
  async #step(): Promise<void> {
    switch (this.#data.state) {
      case 'selecting':
        return this.#enter('fetchingActions')
      case 'collectingData':
        if (!this.collectDataReady) await this.#collectData()
        return this.#enter('fetchingActions')
      case 'fetchingActions':
        return this.#fetchActions()
      case 'signing':
        return this.#sign()
      case 'confirming':
        return this.#confirm()
      case 'polling':
        return this.#poll()
      default:
        throw invalidTransition(this.#data.state, 'fetchingActions')
    }
  }

  async #collectData(): Promise<void> {
    const handler = this.#config.onCollectData!
    const signal = this.#controller.signal
    let error: string | undefined
    while (!this.collectDataReady) {
      const form = this.collectData!
      const request: CollectDataRequest = {
        url: this.collectDataUrl(this.#config.collectDataUrl),
        ...(form.schema !== undefined && { schema: form.schema }),
        ...(error !== undefined && { error }),
      }
      let message: unknown
      try {
        message = await abortable(handler(request), signal)
      } catch (cause) {
        throw wrap(cause, 'collect_data_failed', 'The data-collection form could not be completed.')
      }
      const outcome = this.completeCollectData(message)
      if (outcome?.type === 'error') error = outcome.error
      else if (!outcome) error = 'The form posted no completion message.'
    }
  }

  async #fetchActions(): Promise<void> {
    const option = this.#data.option!
    const actions = await resolveActions(option.actions, async (data) => {
      const response = await this.#call((signal) =>
        this.#gateway.fetchActions(this.paymentId, { optionId: option.id, data }, { signal }),
      )
      return response.actions
    })
    this.#data.actions = actions
    this.#data.results = []
    this.#data.inFlight = null
    await this.#enter('signing')
  }

  async #sign(): Promise<void> {
    const option = this.#data.option!
    const actions = this.#data.actions!
    const signal = this.#controller.signal
    // Route and check every action before signing the first: an option that cannot complete signs nothing.
    const routed = routeActions(this.#registry, actions)
    if (this.#config.guard !== 'off') {
      const context = { accounts: this.#data.accounts, amount: option.amount }
      const earlier = await abortable(this.#stillAuthorized(this.#data.earlier), signal)
      await abortable(guardActions(routed, { ...context, stillAuthorized: earlier }), signal)
    }
    await this.#reconcileInFlight(routed)

    const { results } = this.#data
    for (let index = results.length; index < routed.length; index++) {
      const { signer, request } = routed[index]!
      const event = { index, count: routed.length, chainId: request.chainId, method: request.method }
      this.#data.inFlight = index
      this.emit('action', { ...event, phase: 'start' })
      await this.#checkpoint()
      let result: unknown
      try {
        result = await abortable(
          signer.request({ ...request, followedByMore: index < routed.length - 1, signal }),
          signal,
        )
      } catch (cause) {
        throw wrap(cause, 'signer_failed', 'The signer failed.', event)
      }
      if (typeof result !== 'string' || result.length === 0) {
        throw new PayError({
          code: 'signer_failed',
          message: 'The signer returned no result.',
          context: event,
        })
      }
      this.#record(result, { ...event, phase: 'signed' })
      await this.#checkpointOrReport()
    }
    this.#transition('confirming')
    await this.#checkpointOrReport()
  }

  /** A resumed flow whose last snapshot shows an action with its signer but no result recorded. */
  async #reconcileInFlight(routed: readonly RoutedAction[]): Promise<void> {
    const { inFlight, results } = this.#data
    if (inFlight === null) return
    const entry = routed[inFlight]
    if (entry && inFlight === results.length) {
      const { chainId, method, params } = entry.request
      const facts = { index: inFlight, count: routed.length, chainId, method }
      if (this.#config.reconcile) {
        const found = await abortable(
          this.#config.reconcile({ index: inFlight, chainId, method, params }),
          this.#controller.signal,
        )
        if (typeof found === 'string' && found.length > 0) this.#record(found, { ...facts, phase: 'signed' })
      } else if (broadcastingMethods.includes(method)) {
        throw new PayError({
          code: 'action_in_doubt',
          message: 'An action may have been sent before the wallet stopped; it is not sent again.',
          context: facts,
        })
      }
    }
    this.#data.inFlight = null
    await this.#checkpoint()
  }

  #record(result: string, event: ActionEvent): void {
    // The result is in the snapshot before anything else happens, so a crash cannot lose it.
    this.#data.results.push(result)
    this.#data.inFlight = null
    this.emit('action', { ...event, result })
  }

  async #confirm(): Promise<void> {
    const option = this.#data.option!
    const body = { optionId: option.id, results: [...this.#data.results] }
    let response: StatusEvent & { txId?: string }
    try {
      // A stable key: a resumed flow confirming again gets the first answer, never a second submission.
      const idempotencyKey = `caipay-${this.flowId}-confirm-${fingerprint(body.results)}`
      response = await this.#call((signal) =>
        this.#gateway.confirm(this.paymentId, body, { signal, idempotencyKey }),
      )
    } catch (error) {
      if (isPayError(error, 'quote_expired') && (await this.#mayRebuild())) {
        // A built transaction outlived its blockhash before confirm. Nothing was broadcast by the wallet,
        // so a fresh build and new signatures are safe as long as what was signed cannot also execute
        // (the guard counts what still can); bounded so a broken service cannot loop us.
        this.#rebuilds++
        this.#data.earlier = [...this.#data.earlier, ...this.#data.actions!]
        this.#transition('fetchingActions')
        await this.#checkpointOrReport()
        return
      }
      // Confirmed earlier by a call whose answer was lost: carry on from the payment's actual status.
      if (!isPayError(error, 'invalid_state')) throw error
      const status = await this.#call((signal) => this.#getStatus(signal))
      if (status.status === 'requires_action') throw error
      response = status
    }
    this.#status(response)
    if (response.isFinal && isFinalStatus(response.status)) {
      let txId = response.txId
      if (response.status === 'succeeded' && txId === undefined) {
        txId = await this.#getStatus(this.#controller.signal).then(
          (status) => status.txId,
          () => undefined,
        )
      }
      this.#finishWithStatus(response.status, txId)
      return
    }
    this.#transition('polling')
    await this.#checkpointOrReport()
  }

  /**
   * Only signature-only actions that came from a build may be built and signed again, and only while
   * what the signed ones can still move leaves room in the option's amount.
   */
  async #mayRebuild(): Promise<boolean> {
    const { option, actions, earlier } = this.#data
    if (
      this.#rebuilds >= maxRebuilds ||
      !option!.actions.some((a) => a.type === 'build') ||
      actions!.some((a) => broadcastingMethods.includes(a.walletRpc.method))
    ) {
      return false
    }
    if (this.#config.guard === 'off') return true
    const live = await this.#stillAuthorized([...earlier, ...actions!])
    return live < BigInt(option!.amount.value)
  }

  /** What the signed `actions` of earlier rounds can still move, in the selected option's asset. */
  async #stillAuthorized(actions: readonly WalletRpcAction[]): Promise<bigint> {
    if (actions.length === 0) return 0n
    const context = { accounts: this.#data.accounts, amount: this.#data.option!.amount }
    return stillAuthorized(routeActions(this.#registry, actions), context, Math.floor(Date.now() / 1000))
  }

  async #poll(): Promise<void> {
    const final = await pollUntilFinal({
      getStatus: (signal) => this.#getStatus(signal),
      firstDelayMs: this.#data.pollInMs,
      signal: this.#controller.signal,
      onStatus: (status) => this.#status(status),
      ...(this.#config.poll && { options: this.#config.poll }),
    })
    this.#finishWithStatus(final.status, final.txId)
  }

  /** A gateway call that stops with the flow, even when the transport ignores the signal. */
  #call<T>(request: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const signal = this.#controller.signal
    return abortable(request(signal), signal)
  }

  #getStatus(signal: AbortSignal) {
    return this.#gateway.getStatus(this.paymentId, { signal })
  }

  #status(status: StatusEvent): void {
    this.#data.pollInMs = status.pollInMs
    this.emit('status', { status: status.status, isFinal: status.isFinal, pollInMs: status.pollInMs })
  }

  #finishWithStatus(status: PaymentStatus, txId: string | undefined): void {
    const option = this.#data.option
    if (status === 'succeeded') {
      this.#finish('succeeded', {
        ...(txId !== undefined && { txId }),
        ...(option && { optionAmount: option.amount }),
      })
    } else {
      this.#finish(status as TerminalState)
    }
  }

  /**
   * Ends the flow after an error. It resolves only when the service holds a final status: a user
   * rejection the service accepted as a cancel, or an expired payment. Anything else ends the flow
   * locally (`cancelled` when aborted or when the cancel was refused, `failed` otherwise) and rejects.
   */
  async #settle(error: unknown): Promise<PaymentResult> {
    if (this.#cancelling) return this.#cancelling
    const signal = this.#controller.signal
    const failure = signal.aborted
      ? abortError(signal)
      : wrap(error, 'internal_error', 'The payment flow failed.')
    const { state } = this.#data
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
    const ended = this.#finish(status)
    await this.#checkpointOrReport()
    return ended
  }

  /**
   * An end the service does not (yet) share: no result and no `final`, just the state and the errors
   * (`failure`, then what else went wrong on the way out); rejects with `failure`.
   */
  async #endLocally(state: 'cancelled' | 'failed', failure: PayError, ...also: PayError[]): Promise<never> {
    this.#transition(state)
    for (const error of [failure, ...also]) this.emit('error', error)
    await this.#checkpointOrReport()
    throw failure
  }

  #onExternalAbort(external: AbortSignal): void {
    this.#controller.abort(abortError(external))
    // Work in progress settles itself; an idle flow ends here so listeners still see it stop.
    if (this.#busy === 0 && !this.#cancelling && !isTerminalState(this.#data.state)) {
      this.#settle(external.reason).catch(() => undefined)
    }
  }

  async #cancelAtGateway(): Promise<PayError | undefined> {
    try {
      await this.#gateway.cancel(this.paymentId, { idempotencyKey: `caipay-${this.flowId}-cancel` })
      return undefined
    } catch (error) {
      return wrap(error, 'internal_error', 'The payment could not be cancelled at the service.')
    }
  }

  #formOf(option: PaymentOption): CollectData | undefined {
    const form = option.collectData ?? this.#data.collectData ?? undefined
    return form?.url ? form : undefined
  }

  #finish(
    status: TerminalState,
    extra: { txId?: string; optionAmount?: PaymentResult['optionAmount'] } = {},
  ) {
    this.#transition(status)
    const result: PaymentResult = { paymentId: this.paymentId, status, ...extra }
    this.#data.result = result
    this.emit('final', result)
    return result
  }

  async #enter(state: FlowState): Promise<void> {
    this.#transition(state)
    await this.#checkpoint()
  }

  #transition(to: FlowState): void {
    const from = this.#data.state
    assertTransition(from, to)
    this.#data.state = to
    this.emit('state', { from, to })
  }

  #emitSnapshot(): FlowSnapshot {
    const snapshot = this.snapshot()
    this.emit('snapshot', snapshot)
    return snapshot
  }

  /**
   * Emits `snapshot` and awaits `persist`. Fatal up to the signer call: when the in-flight index cannot
   * be stored, nothing is signed.
   */
  async #checkpoint(): Promise<void> {
    // Copying the whole state is most of a payment's CPU time: skip it when nobody would see the copy.
    const persist = this.#config.persist
    if (!persist && this.listenerCount('snapshot') === 0) return
    const snapshot = this.#emitSnapshot()
    // Not abortable: a result must reach storage even while the flow is being stopped.
    if (persist) await persist(snapshot)
  }

  /**
   * Once something is signed (or the flow has ended), a storage failure must not stop the confirm that
   * completes the payment: it is reported instead.
   */
  async #checkpointOrReport(): Promise<void> {
    try {
      await this.#checkpoint()
    } catch (error) {
      this.emit('error', wrap(error, 'internal_error', 'The snapshot could not be persisted.'))
    }
  }
}

export type { PaymentFlow }

/** A user rejection anywhere in the cause chain becomes `user_rejected`; other foreign errors get `code`. */
function wrap(
  error: unknown,
  code: PayErrorCode,
  message: string,
  context?: Record<string, unknown>,
): PayError {
  if (isPayError(error)) return error
  if (isUserRejection(error)) {
    return new PayError({
      code: 'user_rejected',
      message: 'The user rejected the request.',
      context,
      cause: error,
    })
  }
  return new PayError({
    code,
    message,
    context,
    cause: error,
    ...(error instanceof Error && { details: error.message }),
  })
}

/** Times a flow builds and signs again after `quote_expired` before giving up. */
const maxRebuilds = 2

/** FNV-1a of the results: the same results confirm under the same idempotency key, new ones under a new one. */
function fingerprint(results: readonly string[]): string {
  let hash = 0x811c9dc5
  for (const char of results.join('\n')) {
    hash ^= char.charCodeAt(0)
    hash = Math.imul(hash, 0x01000193) >>> 0
  }
  return hash.toString(36)
}

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
    earlier: [],
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
  return new PaymentFlow(options, paymentId, { ...data, earlier: data.earlier ?? [] } as FlowData)
}
