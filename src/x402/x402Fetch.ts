import { authorizationFields, eip712DomainFields } from '../actions/eip712Structs.js'
import { guardActions } from '../actions/guard.js'
import type { Signer, SignerRequest } from '../actions/types.js'
import { sameCaip } from '../caip/caip.js'
import { PayError } from '../errors/PayError.js'
import {
  type AcceptedRequirement,
  decodeHeader,
  encodeHeader,
  parsePaymentRequired,
  type SettleResponse,
} from './wire.js'

/**
 * What the host lets x402 resources take. An asset absent from `perRequest` is never paid: the budget is
 * an allow-list, keyed by CAIP-19 asset id (`eip155:8453/erc20:0x8335...`), amounts in minor units.
 */
export interface X402Budget {
  /** The most one request may pay, per asset. */
  perRequest: Readonly<Record<string, string | bigint>>
  /** The most all requests to one origin may pay together (over the life of this fetch), per asset. */
  perOrigin?: Readonly<Record<string, string | bigint>>
}

export interface X402FetchOptions {
  /** caipay signers (`caipay/adapters/evm`'s `evmSigner`, ...); an account of theirs pays. */
  signers: readonly Signer[]
  budget: X402Budget
  /** Unix seconds now (default the system clock): the authorization's validity starts here. */
  now?: () => number
}

export type X402FetchFn = (
  input: string | URL | Request,
  init?: RequestInit,
) => Promise<Response & { payment?: SettleResponse }>

/** The longest an authorization may stay valid, whatever a resource asks (its `maxTimeoutSeconds`). */
const maxValiditySeconds = 3600

/**
 * A fetch that pays x402 resources. On a 402 it reads `PAYMENT-REQUIRED`, takes the first accepted
 * requirement its signers can pay within the budget (x402 `exact` with an EIP-3009 authorization on an
 * EVM chain), runs caipay's signing guard on what it is about to sign (chain, account, asset, amount),
 * signs, and repeats the request once with `PAYMENT-SIGNATURE`. The response carries the decoded
 * `PAYMENT-RESPONSE` as `payment`. When no requirement can be paid it throws a PayError
 * `action_rejected` naming why each was refused, and nothing is signed.
 */
export function x402Fetch(fetch: typeof globalThis.fetch, options: X402FetchOptions): X402FetchFn {
  const spent = new Map<string, bigint>()
  const now = options.now ?? (() => Math.floor(Date.now() / 1000))

  return async (input, init) => {
    const request = new Request(input, init)
    const retry = request.clone()
    const first = await fetch(request)
    if (first.status !== 402) return first
    const required = parsePaymentRequired(decodeHeader(first.headers.get('PAYMENT-REQUIRED')))
    if (!required) {
      throw new PayError({
        code: 'invalid_response',
        message: 'The 402 response has no readable PAYMENT-REQUIRED header.',
        context: { url: request.url },
      })
    }
    const origin = new URL(request.url).origin
    const refusals: Record<string, unknown>[] = []
    let chosen: Payable | undefined
    for (const requirement of required.accepts) {
      const verdict = payable(requirement, options, spent, origin)
      if ('reason' in verdict)
        refusals.push({
          network: requirement.network,
          asset: requirement.asset,
          amount: requirement.amount,
          reason: verdict.reason,
        })
      else {
        chosen = verdict
        break
      }
    }
    if (!chosen) {
      throw new PayError({
        code: 'action_rejected',
        message: 'No requirement of this x402 resource can be paid within the budget; nothing was signed.',
        context: { url: request.url, refusals },
      })
    }
    const { requirement, signer, account, asset, amount, spentKey } = chosen
    const address = account.slice(account.lastIndexOf(':') + 1)
    const issuedAt = now()
    const authorization = {
      from: address,
      to: requirement.payTo,
      value: requirement.amount,
      validAfter: '0',
      validBefore: String(issuedAt + Math.min(requirement.maxTimeoutSeconds, maxValiditySeconds)),
      nonce: randomNonce(),
    }
    const signing: SignerRequest = {
      chainId: requirement.network,
      method: 'eth_signTypedData_v4',
      params: [address, JSON.stringify(transferTypedData(requirement, authorization))],
    }
    // The same guard as a payment option's: the bytes about to be signed, decoded, move at most this
    // amount of this asset, from this account, on this chain.
    await guardActions([{ index: 0, signer, request: signing }], {
      accounts: [account],
      account,
      amount: {
        unit: `caip19/${asset}`,
        value: requirement.amount,
        display: { assetName: '', assetSymbol: '', decimals: 0 },
      },
    })
    spent.set(spentKey, (spent.get(spentKey) ?? 0n) + amount)
    const signature = await signer.request(signing)
    const payload = {
      x402Version: 2,
      ...(required.resource !== undefined ? { resource: required.resource } : {}),
      ...(required.extensions !== undefined ? { extensions: required.extensions } : {}),
      accepted: requirement,
      payload: { authorization, signature },
    }
    retry.headers.set('PAYMENT-SIGNATURE', encodeHeader(payload))
    const paid = await fetch(retry)
    const settlement = decodeHeader(paid.headers.get('PAYMENT-RESPONSE')) as SettleResponse | undefined
    return settlement ? Object.assign(paid, { payment: settlement }) : paid
  }
}

interface Payable {
  requirement: AcceptedRequirement
  signer: Signer
  account: string
  /** CAIP-19. */
  asset: string
  amount: bigint
  spentKey: string
}

/** Whether one requirement can be paid: an allow-list of what this payer signs, then the budget. */
function payable(
  requirement: AcceptedRequirement,
  options: X402FetchOptions,
  spent: ReadonlyMap<string, bigint>,
  origin: string,
): Payable | { reason: string } {
  if (requirement.scheme !== 'exact') return { reason: 'unsupported_scheme' }
  if (!/^eip155:[0-9]{1,32}$/.test(requirement.network)) return { reason: 'unsupported_network' }
  const extra = requirement.extra ?? {}
  const method = extra.assetTransferMethod
  if (method !== undefined && method !== 'eip3009') return { reason: 'unsupported_transfer_method' }
  if (typeof extra.name !== 'string' || typeof extra.version !== 'string')
    return { reason: 'missing_eip712_domain' }
  if (!/^0x[0-9a-fA-F]{40}$/.test(requirement.asset) || !/^0x[0-9a-fA-F]{40}$/.test(requirement.payTo))
    return { reason: 'invalid_address' }
  if (!/^[1-9][0-9]{0,77}$/.test(requirement.amount)) return { reason: 'invalid_amount' }
  const asset = `${requirement.network}/erc20:${requirement.asset}`
  const amount = BigInt(requirement.amount)
  const perRequest = limitFor(options.budget.perRequest, asset)
  if (perRequest === undefined) return { reason: 'asset_not_in_budget' }
  if (amount > perRequest) return { reason: 'over_budget_per_request' }
  const spentKey = `${origin} ${asset.toLowerCase()}`
  const perOrigin = options.budget.perOrigin && limitFor(options.budget.perOrigin, asset)
  if (perOrigin !== undefined && (spent.get(spentKey) ?? 0n) + amount > perOrigin)
    return { reason: 'over_budget_per_origin' }
  for (const signer of options.signers) {
    if (signer.namespace !== 'eip155' || !signer.methods.includes('eth_signTypedData_v4')) continue
    const account = signer.accounts().find((a) => a.startsWith(`${requirement.network}:`))
    if (account) return { requirement, signer, account, asset, amount, spentKey }
  }
  return { reason: 'no_signer_for_network' }
}

function limitFor(limits: Readonly<Record<string, string | bigint>>, asset: string): bigint | undefined {
  const entry = Object.entries(limits).find(([id]) => sameCaip(id, asset))
  if (!entry) return undefined
  const value = entry[1]
  return typeof value === 'bigint' ? value : /^[0-9]{1,78}$/.test(value) ? BigInt(value) : undefined
}

/** EIP-3009 `TransferWithAuthorization` as `eth_signTypedData_v4` takes it (uints as decimal strings). */
function transferTypedData(requirement: AcceptedRequirement, message: Record<string, string>) {
  const extra = requirement.extra as { name: string; version: string }
  return {
    types: {
      EIP712Domain: eip712DomainFields.filter((field) => field.name !== 'salt'),
      TransferWithAuthorization: authorizationFields,
    },
    primaryType: 'TransferWithAuthorization',
    domain: {
      name: extra.name,
      version: extra.version,
      chainId: requirement.network.slice('eip155:'.length),
      verifyingContract: requirement.asset,
    },
    message,
  }
}

/** 32 random bytes as hex: EIP-3009 nonces are random, never sequential. */
function randomNonce(): string {
  const bytes = new Uint8Array(32)
  globalThis.crypto.getRandomValues(bytes)
  return `0x${Array.from(bytes, (b) => b.toString(16).padStart(2, '0')).join('')}`
}
