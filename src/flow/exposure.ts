import { stillAuthorized as stillAuthorizedBy } from '../actions/guard.js'
import { routeActions } from '../actions/route.js'
import type { WalletRpcAction } from '../contract/gateway.js'
import { broadcastingMethods } from '../contract/walletMethods.js'
import type { FlowRun } from './run.js'

/** Times a flow builds and signs again after `quote_expired` before giving up. */
const maxRebuilds = 2

/**
 * After `quote_expired`: when a rebuild is allowed, keeps the round's actions as earlier exposure and
 * goes back to `fetchingActions`; false leaves the error to the caller. A built transaction outlived
 * its blockhash before confirm. Nothing was broadcast by the wallet, so a fresh build and new
 * signatures are safe as long as what was signed cannot also execute (the guard counts what still
 * can); bounded so a broken service cannot loop us.
 */
export async function rebuildAfterExpiredQuote(run: FlowRun): Promise<boolean> {
  if (!(await mayRebuild(run))) return false
  run.rebuilds++
  run.data.earlier = [...run.data.earlier, ...run.data.actions!]
  run.transition('fetchingActions')
  await run.checkpointOrReport()
  return true
}

/**
 * Only signature-only actions that came from a build may be built and signed again, and only while
 * what the signed ones can still move leaves room in the option's amount.
 */
async function mayRebuild(run: FlowRun): Promise<boolean> {
  const { option, actions, earlier } = run.data
  if (
    run.rebuilds >= maxRebuilds ||
    !option!.actions.some((a) => a.type === 'build') ||
    actions!.some((a) => broadcastingMethods.includes(a.walletRpc.method))
  ) {
    return false
  }
  if (run.config.guard === 'off') return true
  const live = await stillAuthorized(run, [...earlier, ...actions!])
  return live < BigInt(option!.amount.value)
}

/** What the signed `actions` of earlier rounds can still move, in the selected option's asset. */
export async function stillAuthorized(run: FlowRun, actions: readonly WalletRpcAction[]): Promise<bigint> {
  if (actions.length === 0) return 0n
  const { account, amount } = run.data.option!
  const context = { accounts: run.data.accounts, account, amount }
  return stillAuthorizedBy(routeActions(run.registry, actions), context, Math.floor(Date.now() / 1000))
}
