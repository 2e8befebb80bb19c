import { PayError } from '../errors/PayError.js'

export const flowStates = [
  'idle',
  'loadingOptions',
  'selecting',
  'collectingData',
  'fetchingActions',
  'signing',
  'confirming',
  'polling',
  'succeeded',
  'failed',
  'expired',
  'cancelled',
] as const
export type FlowState = (typeof flowStates)[number]

export const terminalStates = ['succeeded', 'failed', 'expired', 'cancelled'] as const
export type TerminalState = (typeof terminalStates)[number]

/**
 * Every legal move of the wallet flow. Any state that is not final may end `cancelled` (user, abort or
 * `cancel()`) and, once work has started, `failed`. Only states that talk to the service can learn that
 * the payment `expired` or already ended. `collectingData` goes back to `selecting` when the user picks
 * another option.
 */
export const flowTransitions: Readonly<Record<FlowState, readonly FlowState[]>> = {
  idle: ['loadingOptions', 'cancelled'],
  // An options response can already carry the outcome of a payment paid or closed elsewhere.
  loadingOptions: ['selecting', 'succeeded', 'failed', 'expired', 'cancelled'],
  selecting: ['collectingData', 'fetchingActions', 'failed', 'cancelled'],
  collectingData: ['selecting', 'fetchingActions', 'failed', 'cancelled'],
  fetchingActions: ['signing', 'failed', 'expired', 'cancelled'],
  signing: ['confirming', 'failed', 'cancelled'],
  // A confirm response may already be final; a quote that expired before confirm is built and signed again.
  confirming: ['fetchingActions', 'polling', 'succeeded', 'failed', 'expired', 'cancelled'],
  polling: ['succeeded', 'failed', 'expired', 'cancelled'],
  succeeded: [],
  failed: [],
  expired: [],
  cancelled: [],
}

export function isTerminalState(state: FlowState): state is TerminalState {
  return flowTransitions[state].length === 0
}

export function canTransition(from: FlowState, to: FlowState): boolean {
  return flowTransitions[from].includes(to)
}

export function assertTransition(from: FlowState, to: FlowState, reason?: string): void {
  if (!canTransition(from, to)) throw invalidTransition(from, to, reason)
}

export function invalidTransition(from: FlowState, to: FlowState, reason?: string): PayError {
  return new PayError({
    code: 'invalid_transition',
    message: reason ?? `The flow cannot move from ${from} to ${to}.`,
    context: { from, to },
  })
}
