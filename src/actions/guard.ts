import { canonicalCaip, sameCaip } from '../caip/caip.js'
import type { Amount } from '../contract/common.js'
import type { SubscriptionTerms } from '../contract/gateway.js'
import { isPayError, PayError } from '../errors/PayError.js'
import type { RoutedAction } from './route.js'
import type { ActionInspection, MandatePolicy, Signer, SignerRequest } from './types.js'

/** One action the guard let through, with what its signer decoded: what the review shows (review.ts). */
export interface ApprovedAction {
  index: number
  signer: Signer
  request: SignerRequest
  inspection: ActionInspection
}

/** What the guard approved: every action of the option and what they move together, in the option's asset. */
export interface ApprovedOption {
  actions: ApprovedAction[]
  /** The sum of the decoded transfers, an approval and a pull through it counted once (`countedTwice`). */
  total: bigint
}

export interface GuardContext {
  /** The CAIP-10 accounts this wallet advertised for the payment. */
  accounts: readonly string[]
  /** The selected option's CAIP-10 `account`: the one account that signs every action of the option. */
  account: string
  /** The selected option's amount: the most the option may move, in its asset. */
  amount: Amount
  /**
   * What earlier rounds of this payment signed that may still execute or already did (rebuilds after
   * `quote_expired`, read from the flow's exposure ledger), in the option's minor units. It counts
   * against the same amount.
   */
  stillAuthorized?: bigint
  /** The option's subscription terms, on a subscription's option only: a mandate is signed only under them. */
  subscription?: SubscriptionTerms
  /** The option's `expiresAt` (unix seconds): a mandate's grant may not stay submittable much past it. */
  expiresAt?: number
  /**
   * What mandates earlier rounds of this payment signed still allow (the exposure ledger), minor units:
   * they count with the new mandate against the terms' bound.
   */
  stillMandated?: bigint
  /** Unix seconds now; default the wallet's clock. */
  now?: number
  /** Bounds mandates by the option's terms (caipay/subscriptions' `createMandates`); without it none is signed. */
  mandates?: MandatePolicy
}

/**
 * The signing guard. Checks every action of an option before the first one is signed, so a bad
 * action late in the list still means nothing is signed:
 * - the option's account is advertised, and every action on its chain is signed by exactly that
 *   account (accounts compared by their canonical identity, `canonicalCaip`); an action on another
 *   chain (a mixed-chain option's attestation) moves nothing and is signed by the wallet's only
 *   advertised account on that chain;
 * - the signer decodes the action (`inspect`); an action it cannot decode is not signed;
 * - every decoded transfer is in the option's asset (canonical identity), states the option's
 *   decimals when it states any, and together with what earlier rounds left valid they do not exceed the option's amount;
 * - a mandate (a standing allowance: Permit2 `PermitSingle`, SPL `ApproveChecked`) only inside an option
 *   with subscription terms, and bounded by them (`checkMandate`): with what the option moves once and
 *   what earlier mandates still allow, at most the price times the periods.
 * Resolves with what it approved: the one decoding the review is built from (review.ts), so what the
 * wallet shows is what was checked.
 */
export async function guardActions(
  actions: readonly RoutedAction[],
  context: GuardContext,
): Promise<ApprovedOption> {
  const limit = BigInt(context.amount.value)
  let total = 0n
  const approved: ApprovedAction[] = []
  for (const action of actions) {
    const checked = await checkAction(action, context)
    total += checked.total
    approved.push({ ...action, inspection: checked.inspection })
  }
  total -= countedTwice(approved.map((action) => action.inspection))
  if (approved.some((action) => action.inspection.mandate)) {
    if (!context.mandates) throw rejected('Mandates are off.', { rule: 'mandates_off' })
    context.mandates.check(approved, { ...context, oneTime: total })
  }
  const earlier = context.stillAuthorized ?? 0n
  if (total + earlier > limit) {
    throw rejected(
      'The actions, with earlier signatures that may still execute, move more than the option amount.',
      {
        total: total.toString(),
        ...(earlier > 0n && { stillAuthorized: earlier.toString() }),
        limit: limit.toString(),
        unit: context.amount.unit,
      },
    )
  }
  return { actions: approved, total }
}

/**
 * An approval of a contract (Permit2) and a transfer that contract pulls out of it, in the same option,
 * are one movement: the part of them both sums count, at most the smaller of the two. A mandate through
 * that contract is such a pull too (the approval is its rail). Only an approval (never a transfer to that
 * contract) is netted, so a transfer sent there still counts in full.
 */
function countedTwice(inspections: readonly ActionInspection[]): bigint {
  const approved = new Map<string, bigint>()
  const pulled = new Map<string, bigint>()
  const add = (map: Map<string, bigint>, key: string, amount: bigint) =>
    map.set(key, (map.get(key) ?? 0n) + amount)
  for (const { transfers, mandate } of inspections) {
    if (mandate?.through) add(pulled, canonicalCaip(mandate.through), mandate.amount)
    for (const transfer of transfers) {
      if (transfer.through) add(pulled, canonicalCaip(transfer.through), transfer.amount)
      else if (transfer.approval && transfer.to) add(approved, canonicalCaip(transfer.to), transfer.amount)
    }
  }
  let twice = 0n
  for (const [spender, amount] of pulled) {
    const allowance = approved.get(spender) ?? 0n
    twice += amount < allowance ? amount : allowance
  }
  return twice
}

/**
 * What one action moves in the option's asset, after checking its chain, account, asset and
 * decimals; also used to re-read what an earlier round signed.
 */
export async function checkAction(
  { index, signer, request }: RoutedAction,
  context: Pick<GuardContext, 'accounts' | 'account' | 'amount'>,
): Promise<{ total: bigint; inspection: ActionInspection }> {
  const asset = context.amount.unit.startsWith('caip19/') ? context.amount.unit.slice(7) : undefined
  const facts = { index, chainId: request.chainId, method: request.method }
  const inspection = await inspect(signer, request, facts)
  // On the option account's chain that account signs; on another chain (a mixed-chain option's
  // attestation) the wallet's one account there signs, moving nothing: the gateway picks no key.
  const home = chainOf(context.account) === request.chainId
  const onChain = context.accounts.filter((account) => chainOf(account) === request.chainId)
  const expected = home ? context.account : onChain.length === 1 ? onChain[0]! : ''
  if (
    !context.accounts.some((account) => sameCaip(account, context.account)) ||
    !sameCaip(inspection.account, expected) ||
    (!home && inspection.transfers.length > 0)
  ) {
    throw rejected('The option’s account does not sign this action.', {
      ...facts,
      account: inspection.account,
      optionAccount: context.account,
    })
  }
  let total = 0n
  for (const transfer of inspection.transfers) {
    if (asset === undefined || !sameCaip(transfer.asset, asset)) {
      throw rejected('The action moves another asset than the option’s.', {
        ...facts,
        asset: transfer.asset,
        expected: asset ?? context.amount.unit,
      })
    }
    if (transfer.decimals !== undefined && transfer.decimals !== context.amount.display.decimals) {
      throw rejected('The action states other decimals than the option shows.', {
        ...facts,
        decimals: transfer.decimals,
        shown: context.amount.display.decimals,
      })
    }
    if (transfer.amount < 0n) throw rejected('The action carries a negative transfer.', facts)
    total += transfer.amount
  }
  return { total, inspection }
}

/** An action the adapter cannot decode cannot be checked, so it is not signed. */
export async function inspect(
  signer: Signer,
  request: SignerRequest,
  facts: Record<string, unknown>,
): Promise<ActionInspection> {
  try {
    // A signer without `inspect` throws here too: nothing decodes the action, so it is not signed.
    return await signer.inspect!(request)
  } catch (cause) {
    if (isPayError(cause)) throw cause
    throw new PayError({
      code: 'action_rejected',
      message: 'The signer cannot decode this action, so it is not signed.',
      context: { ...facts, namespace: signer.namespace },
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
