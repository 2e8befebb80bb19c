import type { Amount, PaymentStatus } from '../contract/common.js'
import type { GatewayPayment, PaymentOption } from '../contract/gateway.js'
import type { PayError } from '../errors/PayError.js'
import type { PaymentReview } from '../review/types.js'
import type { FlowSnapshot } from './snapshot.js'
import type { FlowState, TerminalState } from './states.js'

/** How a payment ended, as the service reports it. */
export interface PaymentResult {
  paymentId: string
  status: TerminalState
  /** Present when the payment succeeded and the service reported it. */
  txId?: string
  /** The amount paid (the selected option's amount) when the payment succeeded. */
  optionAmount?: Amount
}

export interface StateEvent {
  from: FlowState
  to: FlowState
}

export interface OptionsEvent {
  options: readonly PaymentOption[]
  info?: GatewayPayment
}

export interface CollectDataEvent {
  url: string
  schema?: string
}

export interface ActionEvent {
  index: number
  count: number
  chainId: string
  method: string
  /** `start` fires before the signer is called, `signed` once its result is recorded in the snapshot. */
  phase: 'start' | 'signed'
  /** The recorded result (phase `signed`). */
  result?: string
}

export interface StatusEvent {
  status: PaymentStatus
  isFinal: boolean
  pollInMs: number | null
}

/** The flow's events (emitter.ts): every payload is one plain object. */
export type FlowEvents = {
  state: (event: StateEvent) => void
  options: (event: OptionsEvent) => void
  collectData: (event: CollectDataEvent) => void
  action: (event: ActionEvent) => void
  /** What the option's actions do, decoded and approved by the guard, before the first is signed. */
  review: (review: PaymentReview) => void
  status: (event: StatusEvent) => void
  /** The service has a final status for the payment. */
  final: (result: PaymentResult) => void
  error: (error: PayError) => void
  /** The durable state changed; persist it to survive a crash. */
  snapshot: (snapshot: FlowSnapshot) => void
}
