import * as z from 'zod/mini'
import { Amount } from '../contract/common.js'
import { CollectData, PaymentOption, WalletRpcAction } from '../contract/gateway.js'
import { PayError } from '../errors/PayError.js'
import { flowStates, terminalStates } from './states.js'

export const snapshotVersion = 1

/**
 * Everything a wallet must persist to resume a payment after a crash: plain JSON. `results[i]` is the
 * recorded result of `actions[i]`; `inFlight` is the index of an action handed to its signer whose result
 * was not recorded yet (it may or may not have been sent).
 */
export const FlowSnapshot = z.object({
  version: z.literal(snapshotVersion),
  flowId: z.string().check(z.regex(/^[A-Za-z0-9_-]{8,64}$/)),
  paymentId: z.string().check(z.minLength(1)),
  state: z.enum(flowStates),
  accounts: z.array(z.string()),
  options: z.array(PaymentOption),
  /** The options response's payment-wide form, applied to options without their own. */
  collectData: z.nullable(CollectData),
  option: z.nullable(PaymentOption),
  /** URL of the form that reported `IC_COMPLETE`. */
  collectDataCompleted: z.nullable(z.string()),
  /** The selected option's actions after `build` resolution: exactly what gets signed. */
  actions: z.nullable(z.array(WalletRpcAction)),
  results: z.array(z.string()),
  inFlight: z.nullable(z.int().check(z.minimum(0))),
  pollInMs: z.nullable(z.int().check(z.minimum(0))),
  result: z.nullable(
    z.object({
      paymentId: z.string(),
      status: z.enum(terminalStates),
      txId: z.optional(z.string()),
      optionAmount: z.optional(Amount),
    }),
  ),
})
export type FlowSnapshot = z.infer<typeof FlowSnapshot>

const needsActions = ['signing', 'confirming', 'polling'] as const

/** Validates a stored snapshot, including that its parts agree with its state. */
export function parseFlowSnapshot(value: unknown): FlowSnapshot {
  const parsed = z.safeParse(FlowSnapshot, value)
  if (!parsed.success) throw invalid('The snapshot does not match the snapshot format.', parsed.error)
  const snapshot = parsed.data
  const { state, option, actions, results } = snapshot
  const actionCount = actions?.length ?? 0
  if (
    (needsActions.includes(state as (typeof needsActions)[number]) && (!option || !actions)) ||
    results.length > actionCount ||
    ((state === 'confirming' || state === 'polling') && results.length !== actionCount) ||
    ((state === 'fetchingActions' || state === 'collectingData') && !option)
  ) {
    throw invalid(`The snapshot's parts do not fit its state (${state}).`, undefined)
  }
  return snapshot
}

function invalid(message: string, cause: unknown): PayError {
  return new PayError({ code: 'invalid_snapshot', message, cause })
}
