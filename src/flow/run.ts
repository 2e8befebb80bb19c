import type { SignerRegistry } from '../actions/registry.js'
import { isUserRejection } from '../actions/rejection.js'
import type { CollectData, PaymentOption, WalletRpcAction } from '../contract/gateway.js'
import { abortable } from '../errors/abort.js'
import { isPayError, PayError, type PayErrorCode } from '../errors/PayError.js'
import type { ResumeFlowOptions } from './config.js'
import type { Emitter } from './emitter.js'
import type { ExposureEntry } from './exposure.js'
import { type FlowSnapshot, snapshotVersion } from './snapshot.js'
import { assertTransition, type FlowState, type TerminalState } from './states.js'
import type { FlowEvents, PaymentResult } from './types.js'

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
  /** Every signed action of the rounds built again after `quote_expired`, with its result. */
  exposure: ExposureEntry[]
  results: string[]
  inFlight: number | null
  pollInMs: number | null
  result: PaymentResult | null
}

/**
 * What every job of the flow (options, collect data, fetch and sign, confirm and poll, rebuild)
 * shares: the durable state, the dependencies, the abort controller and where events go. Internal:
 * `PaymentFlow` is the public face. The moves below take it as their first argument.
 */
export interface FlowRun {
  readonly paymentId: string
  readonly config: ResumeFlowOptions
  readonly data: FlowData
  readonly events: Emitter<FlowEvents>
  readonly registry: SignerRegistry
  readonly controller: AbortController
  /** Rounds built and signed again after `quote_expired` in this process. */
  rebuilds: number
  /** The actions the last `review` event described: each set is announced once. */
  reviewed?: readonly WalletRpcAction[]
  /** The merchant name the options response gave: the service's claim, shown as such in the review. */
  merchant?: string
}

/** A gateway call that stops with the flow, even when the transport ignores the signal. */
export function call<T>(run: FlowRun, request: (signal: AbortSignal) => Promise<T>): Promise<T> {
  const signal = run.controller.signal
  return abortable(request(signal), signal)
}

export function finish(
  run: FlowRun,
  status: TerminalState,
  extra: { txId?: string; optionAmount?: PaymentResult['optionAmount'] } = {},
): PaymentResult {
  transition(run, status)
  const result: PaymentResult = { paymentId: run.paymentId, status, ...extra }
  run.data.result = result
  run.events.emit('final', result)
  return result
}

export async function enter(run: FlowRun, state: FlowState): Promise<void> {
  transition(run, state)
  await checkpoint(run)
}

export function transition(run: FlowRun, to: FlowState): void {
  const from = run.data.state
  assertTransition(from, to)
  run.data.state = to
  run.events.emit('state', { from, to })
}

export function snapshotOf(run: FlowRun): FlowSnapshot {
  const { flowId, ...rest } = run.data
  return JSON.parse(
    JSON.stringify({ version: snapshotVersion, flowId, paymentId: run.paymentId, ...rest }),
  ) as FlowSnapshot
}

/** Emits `snapshot` only when someone listens: copying the whole state is most of a payment's CPU. */
export function snapshotChanged(run: FlowRun): void {
  if (run.events.listenerCount('snapshot') > 0) emitSnapshot(run)
}

function emitSnapshot(run: FlowRun): FlowSnapshot {
  const snapshot = snapshotOf(run)
  run.events.emit('snapshot', snapshot)
  return snapshot
}

/**
 * Emits `snapshot` and awaits `persist`. Fatal up to the signer call: when the in-flight index cannot
 * be stored, nothing is signed.
 */
export async function checkpoint(run: FlowRun): Promise<void> {
  const persist = run.config.persist
  if (!persist && run.events.listenerCount('snapshot') === 0) return
  const snapshot = emitSnapshot(run)
  // Not abortable: a result must reach storage even while the flow is being stopped.
  if (persist) await persist(snapshot)
}

/**
 * Once something is signed (or the flow has ended), a storage failure must not stop the confirm that
 * completes the payment: it is reported instead.
 */
export async function checkpointOrReport(run: FlowRun): Promise<void> {
  try {
    await checkpoint(run)
  } catch (error) {
    run.events.emit('error', wrap(error, 'internal_error', 'The snapshot could not be persisted.'))
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
