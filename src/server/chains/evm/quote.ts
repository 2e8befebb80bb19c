import { randomBytes } from 'node:crypto'
import { type Address, bytesToBigInt, encodeFunctionData, getAddress, type Hex, isAddress, toHex } from 'viem'
import { permit2Address, permit2TypedData } from '../../../../protocol/evm/index.js'
import { parseAccountId, sameCaip } from '../../../caip/caip.js'
import type { Action } from '../../../contract/gateway.js'
import type { JobLogger } from '../../jobs/runner.js'
import { settlementFor } from '../../payments/settlements.js'
import type { Db } from '../../store/db.js'
import type { OptionDraft, QuoteContext } from '../types.js'
import { eip3009Abi } from './abi.js'
import { type Authorization, authorizationKind, authorizationTypedData } from './authorization.js'
import type { EvmAsset, EvmChain } from './chain.js'

export interface QuoteSettings {
  db: Db
  log: JobLogger
  /** Seconds shown to the buyer as the expected time to a final status. */
  etaS: number
  /** Seconds an authorization stays valid after its quote expires: time for the relay job to land it. */
  relayWindowS: number
  /** Seconds before the quote a direct transfer may have been mined (clock skew between node and service). */
  clockSkewS: number
}

/**
 * Options for one buyer account and asset: none unless the buyer's token balance covers the amount.
 * `eip3009` (gasless): the buyer signs an authorization to the collection address, the service pays gas.
 * `transfer` (direct): the buyer sends an ERC-20 transfer straight to the merchant's settlement
 * destination, so it is offered only when the merchant has one for this asset, and never for a
 * manual-capture payment (money at the merchant's destination cannot be held: docs/capture.md).
 */
export async function quoteEvm(
  chain: EvmChain,
  settings: QuoteSettings,
  ctx: QuoteContext,
): Promise<OptionDraft[]> {
  const asset = chain.asset(ctx.asset.id)
  if (!asset || !isAddress(ctx.account.address, { strict: false })) return []
  const buyer = getAddress(ctx.account.address)
  const balance = await balanceOf(chain, settings.log, asset, buyer)
  if (balance === undefined || balance < ctx.tokenAmount) return []
  const methods = asset.methods ?? ['eip3009', 'transfer']
  const drafts: OptionDraft[] = []
  if (methods.includes('eip3009')) {
    const gasless =
      asset.transferMethod === 'permit2'
        ? await permit2Draft(chain, settings, ctx, asset, buyer)
        : await gaslessDraft(chain, settings, ctx, asset, buyer)
    if (gasless) drafts.push(gasless)
  }
  if (methods.includes('transfer') && ctx.payment.captureMethod !== 'manual') {
    const direct = await directDraft(chain, settings, ctx, asset, buyer)
    if (direct) drafts.push(direct)
  }
  return drafts
}

async function balanceOf(
  chain: EvmChain,
  log: JobLogger,
  asset: EvmAsset,
  owner: Address,
): Promise<bigint | undefined> {
  try {
    return await chain.publicClient.readContract({
      address: asset.token,
      abi: eip3009Abi,
      functionName: 'balanceOf',
      args: [owner],
    })
  } catch (error) {
    // An unreachable node must not break the options of other chains: this account just cannot pay now.
    log.warn({ chain: chain.caip2, asset: asset.id, error: String(error) }, 'Cannot read the buyer balance')
    return undefined
  }
}

async function gaslessDraft(
  chain: EvmChain,
  settings: QuoteSettings,
  ctx: QuoteContext,
  asset: EvmAsset,
  buyer: Address,
): Promise<OptionDraft | undefined> {
  const domain = await chain.domain(asset)
  if (!domain) return undefined
  const collection = chain.executor.address
  const authorization: Authorization = {
    kind: authorizationKind(chain.executor.address, collection),
    chainId: chain.chainId,
    token: asset.token,
    domain,
    from: buyer,
    to: collection,
    value: ctx.tokenAmount,
    validAfter: 0n,
    validBefore: BigInt(ctx.expiresAt + settings.relayWindowS),
    nonce: toHex(randomBytes(32)),
  }
  return {
    kind: 'eip3009',
    etaS: settings.etaS,
    state: { nonce: authorization.nonce, validBefore: authorization.validBefore.toString() },
    actions: [
      {
        type: 'walletRpc',
        walletRpc: {
          chainId: chain.caip2,
          method: 'eth_signTypedData_v4',
          params: JSON.stringify([buyer, JSON.stringify(authorizationTypedData(authorization))]),
        },
      },
    ],
  }
}

/**
 * Gasless through Permit2 (tokens without EIP-3009): the buyer signs a `PermitWitnessTransferFrom` whose
 * spender and witnessed payee are both the executor (the collection address), so only the executor can
 * submit it and only to itself. A buyer whose allowance to Permit2 is short first approves Permit2 for
 * exactly the amount, in the same option; a non-zero allowance is reset to zero before (USDT reverts a
 * change from one non-zero allowance to another).
 */
async function permit2Draft(
  chain: EvmChain,
  settings: QuoteSettings,
  ctx: QuoteContext,
  asset: EvmAsset,
  buyer: Address,
): Promise<OptionDraft | undefined> {
  let allowance: bigint
  try {
    allowance = await chain.publicClient.readContract({
      address: asset.token,
      abi: eip3009Abi,
      functionName: 'allowance',
      args: [buyer, permit2Address],
    })
  } catch (error) {
    settings.log.warn(
      { chain: chain.caip2, asset: asset.id, error: String(error) },
      'Cannot read the Permit2 allowance',
    )
    return undefined
  }
  const approvals = permit2Approvals(chain, asset, buyer, allowance, ctx.tokenAmount)
  const collection = chain.executor.address
  const permit = {
    chainId: chain.chainId,
    token: asset.token,
    amount: ctx.tokenAmount,
    spender: collection,
    nonce: bytesToBigInt(randomBytes(32)),
    deadline: BigInt(ctx.expiresAt + settings.relayWindowS),
    to: collection,
    validAfter: 0n,
  }
  return {
    kind: 'permit2',
    etaS: settings.etaS,
    state: { nonce: permit.nonce.toString(), deadline: permit.deadline.toString() },
    actions: [
      ...approvals,
      {
        type: 'walletRpc',
        walletRpc: {
          chainId: chain.caip2,
          method: 'eth_signTypedData_v4',
          params: JSON.stringify([buyer, JSON.stringify(permit2TypedData(permit))]),
        },
      },
    ],
  }
}

/**
 * The buyer's ERC-20 approvals of Permit2 an option needs before a Permit2 signature can pay `needed`:
 * none when `allowance` covers it, else `approve(Permit2, needed)`, after `approve(Permit2, 0)` when the
 * allowance is non-zero (USDT reverts a change from one non-zero allowance to another).
 */
export function permit2Approvals(
  chain: EvmChain,
  asset: EvmAsset,
  buyer: Address,
  allowance: bigint,
  needed: bigint,
): Action[] {
  const approve = (amount: bigint): Action => ({
    type: 'walletRpc',
    walletRpc: {
      chainId: chain.caip2,
      method: 'eth_sendTransaction',
      params: JSON.stringify([
        {
          from: buyer,
          to: asset.token,
          data: encodeFunctionData({
            abi: eip3009Abi,
            functionName: 'approve',
            args: [permit2Address, amount],
          }),
          value: '0x0',
          chainId: toHex(chain.chainId),
        },
      ]),
    },
  })
  if (allowance >= needed) return []
  return allowance > 0n ? [approve(0n), approve(needed)] : [approve(needed)]
}

async function directDraft(
  chain: EvmChain,
  settings: QuoteSettings,
  ctx: QuoteContext,
  asset: EvmAsset,
  buyer: Address,
): Promise<OptionDraft | undefined> {
  const destination = await merchantDestination(settings.db, chain, ctx.payment.merchantId, asset)
  if (!destination) return undefined
  const data: Hex = encodeFunctionData({
    abi: eip3009Abi,
    functionName: 'transfer',
    args: [destination, ctx.tokenAmount],
  })
  return {
    kind: 'transfer',
    etaS: settings.etaS,
    state: { destination, notBefore: ctx.now - settings.clockSkewS },
    actions: [
      {
        type: 'walletRpc',
        walletRpc: {
          chainId: chain.caip2,
          method: 'eth_sendTransaction',
          params: JSON.stringify([
            { from: buyer, to: asset.token, data, value: '0x0', chainId: toHex(chain.chainId) },
          ]),
        },
      },
    ],
  }
}

/** The merchant's crypto settlement address for this asset on this chain, if it registered one. */
export async function merchantDestination(
  db: Db,
  chain: EvmChain,
  merchantId: string,
  asset: EvmAsset,
): Promise<Address | undefined> {
  return settlementAddress(chain, (await settlementFor(db, merchantId, asset.id))?.destination)
}

/** A merchant's settlement destination (a CAIP-10 account) as an address on `chain`, if it is one. */
export function settlementAddress(chain: EvmChain, destination: string | undefined): Address | undefined {
  if (!destination) return undefined
  const account = parseAccountId(destination)
  if (!sameCaip(account.chainId, chain.caip2) || !isAddress(account.address, { strict: false }))
    return undefined
  return getAddress(account.address)
}
