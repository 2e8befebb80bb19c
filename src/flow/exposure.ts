import { checkAction, type GuardContext } from '../actions/guard.js'
import { routeActions } from '../actions/route.js'
import type { WalletRpcAction } from '../contract/gateway.js'
import { broadcastingMethods } from '../contract/walletMethods.js'
import { checkpointOrReport, type FlowRun, transition } from './run.js'

// The rebuild rules, as docs/exposure.md states them: every signature of an earlier round counts
// against the option until the wallet's own node proves it unused and unusable (`dead`); one proved
// used (`spent`) means the option is paid, and nothing more is signed for it.

/** One signed action of a round that was built again: what was signed and what the signer returned. */
export interface ExposureEntry {
  action: WalletRpcAction
  result: string
}

export interface Exposure {
  /** What the entries not proved dead can move (or moved), in the option's minor units. */
  counted: bigint
  /** What the mandates among them that may still be drawn on allow, minor units. */
  mandated: bigint
  /** An entry was proved used: the option is paid. */
  spent: boolean
}

/** Times a flow builds and signs again after `quote_expired` before giving up. */
const maxRebuilds = 2

/** What the signing guard checks the selected option's actions against. */
export function guardContext({ data, config }: FlowRun) {
  const { account, amount, expiresAt, subscription } = data.option!
  return {
    accounts: data.accounts,
    account,
    amount,
    expiresAt,
    subscription,
    mandates: config.mandates,
  } as GuardContext
}

/**
 * Asks each entry's signer what became of its signature; one that cannot tell counts as live. With
 * the guard off nothing is read (nothing counts).
 */
export async function readExposure(run: FlowRun, entries: readonly ExposureEntry[]): Promise<Exposure> {
  const exposure: Exposure = { counted: 0n, mandated: 0n, spent: false }
  if (run.config.guard === 'off') return exposure
  const routed = routeActions(
    run.registry,
    entries.map((entry) => entry.action),
    run.data.option!.subscription,
  )
  for (const [index, action] of routed.entries()) {
    const { total, inspection } = await checkAction(action, guardContext(run))
    const { mandate } = inspection
    // A mandate counts its whole allowance until the wallet's node proves it expired or ended.
    if (mandate) {
      exposure.mandated += await run.config.mandates!.stillAllowed(
        action.signer,
        action.request,
        entries[index]!.result,
        mandate,
      )
      continue
    }
    if (total === 0n) continue
    const status = await action.signer
      .signatureStatus?.(action.request, entries[index]!.result)
      .catch(() => undefined)
    if (status === 'dead') continue
    if (status === 'spent') exposure.spent = true
    exposure.counted += total
  }
  return exposure
}

/**
 * After `quote_expired`, with the round's results recorded: a signature-only round that came from a
 * build joins the ledger. When one of its signatures (or an earlier one) was used, the option is paid:
 * the flow signs nothing more and polls the payment's status. Otherwise it builds and signs again while
 * what may still execute leaves room in the option's amount, a bounded number of times. False leaves
 * the error to the caller.
 */
export async function afterExpiredQuote(run: FlowRun): Promise<boolean> {
  const { option, actions, results } = run.data
  if (
    !option!.actions.some((a) => a.type === 'build') ||
    actions!.some((a) => broadcastingMethods.includes(a.walletRpc.method))
  ) {
    return false
  }
  const ledger = [...run.data.exposure, ...actions!.map((action, i) => ({ action, result: results[i]! }))]
  const { counted, spent } = await readExposure(run, ledger)
  if (!spent && (run.rebuilds >= maxRebuilds || counted >= BigInt(option!.amount.value))) return false
  run.data.exposure = ledger
  if (spent) {
    transition(run, 'polling')
  } else {
    run.rebuilds++
    transition(run, 'fetchingActions')
  }
  await checkpointOrReport(run)
  return true
}
