import * as z from 'zod/mini'
import { Amount } from '../contract/common.js'
import { CollectData, PaymentOption, WalletRpcAction } from '../contract/gateway.js'
import { flowStates, terminalStates } from './states.js'

// The source of truth of the snapshot format. The wallet core never imports this module at runtime: it
// validates with the JSON Schema generated from it (src/contract/generate.ts), so zod stays out of the bundle.

/**
 * Everything a wallet must persist to resume a payment after a crash: plain JSON. `results[i]` is the
 * recorded result of `actions[i]`; `inFlight` is the index of an action handed to its signer whose result
 * was not recorded yet (it may or may not have been sent).
 */
export const FlowSnapshot = z.object({
  /** Bump on any incompatible change: an old wallet must refuse a snapshot it cannot read. */
  version: z.literal(1),
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
  /**
   * The exposure ledger: every action signed in a round that was built again after `quote_expired`,
   * with its result. Each counts against the option until the wallet's node proves it dead.
   */
  exposure: z.optional(z.array(z.object({ action: WalletRpcAction, result: z.string() }))),
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
