import type { EventEmitter } from 'eventemitter3'
import { createSignerRegistry, type SignerRegistry } from '../actions/registry.js'
import { isUserRejection } from '../actions/rejection.js'
import type { GatewayApi } from '../client/gatewayApi.js'
import type { PaymentStatus } from '../contract/common.js'
import type { CollectData, PaymentOption, WalletRpcAction } from '../contract/gateway.js'
import { abortable } from '../errors/abort.js'
import { isPayError, PayError, type PayErrorCode } from '../errors/PayError.js'
import type { ResumeFlowOptions } from './config.js'
import { type FlowSnapshot, snapshotVersion } from './snapshot.js'
import { assertTransition, type FlowState, type TerminalState } from './states.js'
import type { FlowEvents, PaymentResult, StatusEvent } from './types.js'

/** The flow's durable state: exactly what a snapshot holds, minus its version and payment id. */
export interface FlowData {
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
 * What every job of the flow (options, collect data, fetch and sign, confirm and poll, rebuild)
 * shares: the durable state, the dependencies, the abort signal, and the moves that emit events and
 * take snapshots. Internal: `PaymentFlow` is the public face.
 */
export class FlowRun {
  readonly controller = new AbortController()
  readonly registry: SignerRegistry
  /** Rounds built and signed again after `quote_expired` in this process. */
  rebuilds = 0

  constructor(
    readonly paymentId: string,
    readonly config: ResumeFlowOptions,
    readonly data: FlowData,
    readonly events: EventEmitter<FlowEvents>,
  ) {
    this.registry = createSignerRegistry(config.signers)
  }

  get gateway(): GatewayApi {
    return this.config.gateway
  }

  get signal(): AbortSignal {
    return this.controller.signal
  }

  /** A gateway call that stops with the flow, even when the transport ignores the signal. */
  call<T>(request: (signal: AbortSignal) => Promise<T>): Promise<T> {
    const signal = this.controller.signal
    return abortable(request(signal), signal)
  }

  getStatus(signal: AbortSignal) {
    return this.gateway.getStatus(this.paymentId, { signal })
  }

  status(status: StatusEvent): void {
    this.data.pollInMs = status.pollInMs
    this.events.emit('status', { status: status.status, isFinal: status.isFinal, pollInMs: status.pollInMs })
  }

  finishWithStatus(status: PaymentStatus, txId: string | undefined): void {
    const option = this.data.option
    if (status === 'succeeded') {
      this.finish('succeeded', {
        ...(txId !== undefined && { txId }),
        ...(option && { optionAmount: option.amount }),
      })
    } else {
      this.finish(status as TerminalState)
    }
  }

  finish(status: TerminalState, extra: { txId?: string; optionAmount?: PaymentResult['optionAmount'] } = {}) {
    this.transition(status)
    const result: PaymentResult = { paymentId: this.paymentId, status, ...extra }
    this.data.result = result
    this.events.emit('final', result)
    return result
  }

  async enter(state: FlowState): Promise<void> {
    this.transition(state)
    await this.checkpoint()
  }

  transition(to: FlowState): void {
    const from = this.data.state
    assertTransition(from, to)
    this.data.state = to
    this.events.emit('state', { from, to })
  }

  snapshot(): FlowSnapshot {
    const { flowId, ...rest } = this.data
    return JSON.parse(
      JSON.stringify({ version: snapshotVersion, flowId, paymentId: this.paymentId, ...rest }),
    ) as FlowSnapshot
  }

  /** Emits `snapshot` only when someone listens: copying the whole state is most of a payment's CPU. */
  snapshotChanged(): void {
    if (this.events.listenerCount('snapshot') > 0) this.emitSnapshot()
  }

  emitSnapshot(): FlowSnapshot {
    const snapshot = this.snapshot()
    this.events.emit('snapshot', snapshot)
    return snapshot
  }

  /**
   * Emits `snapshot` and awaits `persist`. Fatal up to the signer call: when the in-flight index cannot
   * be stored, nothing is signed.
   */
  async checkpoint(): Promise<void> {
    const persist = this.config.persist
    if (!persist && this.events.listenerCount('snapshot') === 0) return
    const snapshot = this.emitSnapshot()
    // Not abortable: a result must reach storage even while the flow is being stopped.
    if (persist) await persist(snapshot)
  }

  /**
   * Once something is signed (or the flow has ended), a storage failure must not stop the confirm that
   * completes the payment: it is reported instead.
   */
  async checkpointOrReport(): Promise<void> {
    try {
      await this.checkpoint()
    } catch (error) {
      this.events.emit('error', wrap(error, 'internal_error', 'The snapshot could not be persisted.'))
    }
  }
}

/** A user rejection anywhere in the cause chain becomes `user_rejected`; other foreign errors get `code`. */
export function wrap(
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
