import type { ApprovedOption } from '../actions/guard.js'
import type { KnownAsset, Signer } from '../actions/types.js'
import { canonicalCaip, sameCaip } from '../caip/caip.js'
import { broadcastingMethods } from '../contract/walletMethods.js'
import type { PaymentReview, ReviewContext, ReviewedAction, ReviewedAsset, Reviewer } from './types.js'

export interface ReviewerOptions {
  /** Assets the wallet vouches for (CAIP-19 id, symbol, decimals), named before any signer's node is asked. */
  assets?: readonly KnownAsset[]
}

/**
 * The flow's `review` option: describes an option from what `guardActions` approved, the one decoding
 * for what is checked and what is shown. Assets are named from `assets`, then the signer's node
 * (`describeAsset`), then decimals the signed bytes state; never from the gateway.
 */
export function createReviewer({ assets = [] }: ReviewerOptions = {}): Reviewer {
  return (approved, context) => describeApproved(approved, context, assets)
}

async function describeApproved(
  { actions, total }: ApprovedOption,
  { optionId, merchant }: ReviewContext,
  assets: readonly KnownAsset[],
): Promise<PaymentReview> {
  const named = new Map<string, Promise<ReviewedAsset>>()
  // Keyed by canonical identity (EVM hex in any case is one asset); shown as the decoder spelled it.
  const asset = (id: string, signer: Signer, decimals?: number) => {
    const key = canonicalCaip(id)
    let info = named.get(key)
    if (!info) {
      const listed = assets.find((entry) => sameCaip(entry.asset, id))
      info = listed
        ? Promise.resolve({ id, symbol: listed.symbol, decimals: listed.decimals, source: 'wallet' })
        : Promise.resolve(signer.describeAsset?.(id))
            .catch(() => undefined)
            .then((read): ReviewedAsset => {
              if (read?.symbol !== undefined || read?.decimals !== undefined)
                return { id, symbol: read.symbol, decimals: read.decimals, source: 'node' }
              return decimals === undefined ? { id } : { id, decimals, source: 'action' }
            })
      named.set(key, info)
    }
    return info
  }
  const reviewed = await Promise.all(
    actions.map(
      async ({ index, signer, request: { chainId, method }, inspection }): Promise<ReviewedAction> => {
        const { transfers, maxFee, mandate } = inspection
        const first = transfers[0]
        const typed = method.startsWith('eth_signTypedData')
        return {
          index,
          chainId,
          method,
          intent: mandate
            ? 'mandate'
            : !first
              ? 'sign'
              : first.through
                ? 'permit2'
                : first.approval
                  ? typed
                    ? 'permit'
                    : 'approve'
                  : typed
                    ? 'authorize'
                    : 'transfer',
          from: inspection.account,
          moves: await Promise.all(
            transfers.map(async ({ asset: id, amount, decimals, to, approval, through }) => ({
              asset: await asset(id, signer, decimals),
              amount,
              ...(approval ? { spender: to } : { to, spender: through }),
            })),
          ),
          ...(mandate && {
            mandate: {
              asset: await asset(mandate.asset, signer, mandate.decimals),
              amount: mandate.amount,
              spender: mandate.spender,
              expiration: mandate.expiration,
            },
          }),
          validFrom: inspection.validFrom,
          validUntil: inspection.validUntil,
          fee: maxFee?.amount
            ? { asset: await asset(maxFee.asset, signer), max: maxFee.amount }
            : broadcastingMethods.includes(method)
              ? 'wallet'
              : 'none',
        }
      },
    ),
  )
  const maxFees: PaymentReview['maxFees'] = []
  for (const { fee } of reviewed) {
    if (typeof fee === 'string') continue
    const sum = maxFees.find((entry) => entry.asset === fee.asset)
    if (sum) sum.max += fee.max
    else maxFees.push({ ...fee })
  }
  const moved = reviewed.find((action) => action.moves.length > 0)?.moves[0]
  const until = reviewed.flatMap((action) => action.validUntil ?? [])
  return {
    optionId,
    actions: reviewed,
    total: moved && { asset: moved.asset, amount: total },
    maxFees,
    walletSetsFees: reviewed.some((action) => action.fee === 'wallet'),
    validUntil: until.length > 0 ? Math.min(...until) : undefined,
    claimedByService: { merchant },
  }
}
