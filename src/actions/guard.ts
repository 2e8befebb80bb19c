import { sameCaip } from '../caip/caip.js'
import type { Amount } from '../contract/common.js'
import { isPayError, PayError } from '../errors/PayError.js'
import type { RoutedAction } from './route.js'
import type { ActionInspection, Signer, SignerRequest } from './types.js'

export interface GuardContext {
  /** The CAIP-10 accounts this wallet advertised for the payment. */
  accounts: readonly string[]
  /** The selected option's amount: the most the option may move, in its asset. */
  amount: Amount
}

/**
 * The signing guard. Checks every action of an option before the first one is signed, so a bad
 * action late in the list still means nothing is signed:
 * - the action's chain is the chain of an advertised account, and (when the signer can inspect it)
 *   the signing account is itself advertised;
 * - every inspected transfer is in the option's asset, and together they do not exceed its amount.
 * Without `inspect` only the chain can be checked: the adapter is the one that can decode calldata.
 */
export async function guardActions(actions: readonly RoutedAction[], context: GuardContext): Promise<void> {
  const asset = context.amount.unit.startsWith('caip19/') ? context.amount.unit.slice(7) : undefined
  const limit = BigInt(context.amount.value)
  let total = 0n

  for (const { index, signer, request } of actions) {
    const facts = { index, chainId: request.chainId, method: request.method }
    if (!context.accounts.some((account) => chainOf(account) === request.chainId)) {
      throw rejected('The action targets a chain the wallet did not advertise.', facts)
    }
    if (!signer.inspect) continue

    const inspection = await inspect(signer, request, facts)
    const advertised = context.accounts.some((account) => sameCaip(account, inspection.account))
    if (!advertised || chainOf(inspection.account) !== request.chainId) {
      throw rejected('The action would be signed by an account the wallet did not advertise.', {
        ...facts,
        account: inspection.account,
      })
    }
    for (const transfer of inspection.transfers) {
      if (asset === undefined || !sameCaip(transfer.asset, asset)) {
        throw rejected('The action moves an asset other than the option asset.', {
          ...facts,
          asset: transfer.asset,
          expected: asset ?? context.amount.unit,
        })
      }
      if (transfer.amount < 0n) throw rejected('The action carries a negative transfer.', facts)
      total += transfer.amount
    }
  }
  if (total > limit) {
    throw rejected('The actions move more than the option amount.', {
      total: total.toString(),
      limit: limit.toString(),
      unit: context.amount.unit,
    })
  }
}

/** An action the adapter cannot decode cannot be checked, so it is not signed. */
async function inspect(
  signer: Signer,
  request: SignerRequest,
  facts: Record<string, unknown>,
): Promise<ActionInspection> {
  try {
    return await signer.inspect!(request)
  } catch (cause) {
    if (isPayError(cause)) throw cause
    throw new PayError({
      code: 'action_rejected',
      message: 'The signer could not decode the action.',
      context: facts,
      cause,
    })
  }
}

/** `eip155:1:0xabc` -> `eip155:1`. */
function chainOf(account: string): string {
  return account.slice(0, account.lastIndexOf(':'))
}

function rejected(message: string, context: Record<string, unknown>): PayError {
  return new PayError({ code: 'action_rejected', message, context })
}
