import type { Action, WalletRpcAction } from '../../contract/gateway.js'
import type { DriverRegistry } from '../gateway/drivers.js'
import { fetchActions } from '../gateway/fetch.js'
import type { GatewayPaymentRow } from '../gateway/payment.js'
import { findOption } from '../gateway/store.js'
import type { Db } from '../store/db.js'
import { wcpWalletRpc } from './translate.js'
import type { WcpFetchResponse } from './wire.js'

/**
 * The SDK's `/fetch`: called once per build action with that action's data, and it puts the answer in
 * place of that one action; with `data: ""` when it holds no actions of the option, and then it takes
 * the answer as the option's whole list. The collected data may still be on its way (it comes with
 * the confirm), so the hosted form need not be done yet.
 */
export async function wcpFetch(input: {
  db: Db
  registry: DriverRegistry
  payment: GatewayPaymentRow
  body: { optionId: string; data: string }
  now: Date
}): Promise<WcpFetchResponse> {
  const { db, payment, body } = input
  const offered = (await findOption(db, payment.id, body.optionId))?.actions ?? []
  const builds = offered.filter((a) => a.type === 'build')
  const data = body.data === '' && builds.length === 1 ? builds[0]!.build.data : body.data
  const { actions } = await fetchActions({
    ...input,
    body: { optionId: body.optionId, data },
    dataAtConfirm: true,
  })
  return { actions: expansion(offered, actions, body.data).map(wcpWalletRpc) }
}

/** What the build action carrying `data` resolved to; every other offered action resolves to itself. */
function expansion(offered: readonly Action[], resolved: WalletRpcAction[], data: string): WalletRpcAction[] {
  const at = data === '' ? -1 : offered.findIndex((a) => a.type === 'build' && a.build.data === data)
  if (at === -1) return resolved
  return resolved.slice(at, resolved.length - (offered.length - at - 1))
}
