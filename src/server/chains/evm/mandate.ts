import { type Address, getAddress, type Hex, isAddress } from 'viem'
import { permit2Address } from '../../../../protocol/evm/index.js'
import {
  decodePermit2Allowance,
  type Permit2Allowance,
  permit2AllowanceAbi,
  permit2AllowanceHash,
  permit2AllowanceTypedData,
} from '../../../../protocol/evm/permit2.js'
import { formatAccountId, sameCaip } from '../../../caip/caip.js'
import { paramsError } from '../../errors.js'
import { enqueueJob } from '../../jobs/queue.js'
import type { LiveMandateState, MandateChargePayload } from '../../subscriptions/liveCharges.js'
import { optionTerms } from '../../subscriptions/mandates.js'
import type { ConfirmContext, ConfirmOutcome, MandateDraft, MandateQuoteContext } from '../types.js'
import { eip3009Abi } from './abi.js'
import type { EvmAsset, EvmChain } from './chain.js'
import { classifyPayerSignature, verifyPayerSignature } from './payerSignature.js'
import { permit2Approvals, type QuoteSettings } from './quote.js'

/**
 * Live EVM subscriptions (docs/subscriptions.md): the mandate is Permit2's allowance transfer. The buyer
 * signs one `PermitSingle` granting the executor (the collection address) at most the price x periods of
 * the token until the subscription's end (after the one-time ERC-20 approve of Permit2 where the buyer's
 * allowance is short, as one-time Permit2 payments do); the service submits it once (`permit`) and pulls
 * one period's price per period (`transferFrom`), each a recorded transaction of the charge job
 * (mandateCharge.ts).
 */

export const mandateKind = 'permit2Mandate'

/** The job kind that charges a live EVM subscription's periods. */
export const mandateChargeKind = 'evm.mandate_charge'

/** The mandate as stored (subscriptions.mandate, the first charge job's payload): JSON. */
export interface EvmMandateState extends LiveMandateState {
  kind: typeof mandateKind
  chain: string
  owner: Address
  token: Address
  /** uint160, decimal. */
  amount: string
  /** Unix seconds. */
  expiration: string
  nonce: string
  sigDeadline: string
  spender: Address
  signature: Hex
}

export function permitOf(state: EvmMandateState): Permit2Allowance & { owner: Address } {
  return {
    chainId: Number(state.chain.split(':')[1]),
    owner: state.owner,
    token: state.token,
    amount: BigInt(state.amount),
    expiration: BigInt(state.expiration),
    nonce: BigInt(state.nonce),
    spender: state.spender,
    sigDeadline: BigInt(state.sigDeadline),
  }
}

/**
 * The mandate option of a subscription's first period, only when the buyer's balance covers that period:
 * the Permit2 approvals the buyer still needs, then the `PermitSingle` of price x periods to the executor,
 * expiring at the subscription's end, with Permit2's next nonce for (buyer, token, executor).
 */
export async function quoteEvmMandate(
  chain: EvmChain,
  settings: QuoteSettings,
  ctx: MandateQuoteContext,
): Promise<MandateDraft[]> {
  const asset = chain.asset(ctx.asset.id)
  if (!asset || !isAddress(ctx.account.address, { strict: false })) return []
  const buyer = getAddress(ctx.account.address)
  if (await holdsLiveMandate(settings, chain, ctx.account.id, asset.id)) return []
  const total = ctx.tokenAmount * BigInt(ctx.mandate.totalPeriods)
  let reads: [bigint, bigint, readonly [bigint, number, number]]
  try {
    reads = await Promise.all([
      tokenRead(chain, asset, 'balanceOf', [buyer]),
      tokenRead(chain, asset, 'allowance', [buyer, permit2Address]),
      chain.publicClient.readContract({
        address: permit2Address,
        abi: permit2AllowanceAbi,
        functionName: 'allowance',
        args: [buyer, asset.token, chain.executor.address],
      }),
    ])
  } catch (error) {
    settings.log.warn({ chain: chain.caip2, asset: asset.id, error: String(error) }, 'Cannot quote a mandate')
    return []
  }
  const [balance, erc20Allowance, [, , nonce]] = reads
  if (balance < ctx.tokenAmount) return []
  const typedData = permit2AllowanceTypedData({
    chainId: chain.chainId,
    token: asset.token,
    amount: total,
    expiration: BigInt(ctx.mandate.endAt),
    nonce: BigInt(nonce),
    spender: chain.executor.address,
    sigDeadline: BigInt(ctx.expiresAt + settings.relayWindowS),
  })
  return [
    {
      kind: mandateKind,
      etaS: settings.etaS,
      actions: [
        ...permit2Approvals(chain, asset, buyer, erc20Allowance, total),
        {
          type: 'walletRpc',
          walletRpc: {
            chainId: chain.caip2,
            method: 'eth_signTypedData_v4',
            params: JSON.stringify([buyer, JSON.stringify(typedData)]),
          },
        },
      ],
      spender: formatAccountId(chain.caip2, chain.executor.address),
    },
  ]
}

/**
 * Whether the buyer already has a live subscription charged in this asset: Permit2 keeps one allowance
 * per (owner, token, spender), so a second grant would replace the first one's remaining allowance and
 * the two would draw on one bound. Such a buyer is offered no second mandate in that asset.
 */
async function holdsLiveMandate(
  settings: QuoteSettings,
  chain: EvmChain,
  account: string,
  asset: string,
): Promise<boolean> {
  const rows = await settings.db
    .selectFrom('subscriptions')
    .select(['buyer', 'asset'])
    .where('mode', '=', 'live')
    .where('status', 'in', ['active', 'past_due'])
    .where('asset', 'ilike', `${chain.caip2}/%`)
    .execute()
  return rows.some((row) => row.buyer !== null && sameCaip(row.buyer, account) && sameCaip(row.asset!, asset))
}

function tokenRead(
  chain: EvmChain,
  asset: EvmAsset,
  functionName: 'balanceOf' | 'allowance',
  args: readonly Address[],
): Promise<bigint> {
  return chain.publicClient.readContract({
    address: asset.token,
    abi: eip3009Abi,
    functionName,
    args,
  } as Parameters<typeof chain.publicClient.readContract>[0]) as Promise<bigint>
}

/** The grant as offered (the option's typed-data action, the service's own data) and its action's index. */
function offeredGrant(chain: EvmChain, ctx: ConfirmContext) {
  const index = ctx.option.actions.findIndex(
    (a) => a.type === 'walletRpc' && a.walletRpc.method === 'eth_signTypedData_v4',
  )
  const action = ctx.option.actions[index]
  if (action?.type !== 'walletRpc') throw new Error(`Option ${ctx.option.id} has no Permit2 grant.`)
  const [owner, json] = JSON.parse(action.walletRpc.params) as [Address, string]
  // The service's own data, decoded as wallets do: only a grant to the executor passes.
  const { allowance } = decodePermit2Allowance(chain.chainId, JSON.parse(json), {
    spenders: [formatAccountId(chain.caip2, chain.executor.address)],
  })
  return { index, owner: getAddress(owner), allowance }
}

/** The buyer's signature of exactly the grant offered (ECDSA, or ERC-1271 for an account with code). */
export async function verifyMandate(chain: EvmChain, ctx: ConfirmContext): Promise<void> {
  const { index, owner, allowance } = offeredGrant(chain, ctx)
  const signed = await classifyPayerSignature(chain, owner, ctx.results[index] as Hex)
  const verdict =
    signed.kind === 'undeployed'
      ? { valid: false as const, reason: 'Permit2 cannot deploy an ERC-6492 account; deploy it first' }
      : await verifyPayerSignature(chain, owner, permit2AllowanceHash(allowance), signed)
  if (!verdict.valid) {
    throw paramsError(
      `results.${index}`,
      `results[${index}] is not ${owner}'s signature of the Permit2 mandate this option offered: ${verdict.reason}`,
    )
  }
}

/**
 * Stores the mandate with the first period's charge job, in the transaction that moved the payment to
 * `processing`: the job submits the grant, charges the first period and activates the subscription.
 */
export async function confirmMandate(chain: EvmChain, ctx: ConfirmContext): Promise<ConfirmOutcome> {
  const terms = optionTerms(ctx.option.state)
  if (!terms) throw new Error(`Option ${ctx.option.id} is a mandate without subscription terms.`)
  const { index, owner, allowance } = offeredGrant(chain, ctx)
  const state: EvmMandateState = {
    kind: mandateKind,
    chain: chain.caip2,
    owner,
    token: allowance.token,
    amount: allowance.amount.toString(),
    expiration: allowance.expiration.toString(),
    nonce: allowance.nonce.toString(),
    sigDeadline: allowance.sigDeadline.toString(),
    spender: allowance.spender,
    signature: ctx.results[index] as Hex,
  }
  const payload: MandateChargePayload = {
    subscriptionId: terms.subscriptionId,
    period: 0,
    mandate: {
      buyer: ctx.option.account,
      asset: ctx.option.asset,
      amountPerPeriod: ctx.option.tokenAmount.toString(),
      spender: terms.spender,
      state,
    },
  }
  await enqueueJob(ctx.db, { kind: mandateChargeKind, paymentId: ctx.payment.id, payload })
  return { status: 'processing' }
}
