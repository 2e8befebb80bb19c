import { authorizationFields, eip712DomainFields } from '../actions/eip712Structs.js'
import { checkAction } from '../actions/guard.js'
import type { Signer, SignerRequest } from '../actions/types.js'
import { canonicalCaip, isValidAddress, sameCaip } from '../caip/caip.js'
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
  /**
   * The most all requests to one origin may pay together (over the life of this fetch), per asset. A
   * payment counts for the origin that asked for it (where redirects ended) and for the origin that was
   * requested, so a redirect chain never lets one origin collect more than this.
   */
  perOrigin?: Readonly<Record<string, string | bigint>>
}

export interface X402FetchOptions {
  /** caipay signers (`caipay/adapters/evm`'s `evmSigner`, `caipay/adapters/solana`'s `solanaSigner`); an account of theirs pays. */
  signers: readonly Signer[]
  budget: X402Budget
  /**
   * Builds the transactions of Solana requirements (`caipay/adapters/solana`'s `solanaX402Builder`).
   * Without it Solana requirements are refused (`no_solana_builder`).
   */
  solana?: X402SolanaBuilder
  /** Unix seconds now (default the system clock): the authorization's validity starts here. */
  now?: () => number
}

/** An x402 `exact` payment on Solana, as x402Fetch asks its builder for it (addresses base58). */
export interface X402SolanaTransfer {
  /** CAIP-2. */
  chainId: string
  /** The paying account: the transfer's authority, from its associated token account. */
  payer: string
  mint: string
  /** The owner whose associated token account receives the transfer. */
  payTo: string
  /** Minor units, decimal. */
  amount: string
  /** The facilitator's account that pays the fee (`extra.feePayer`); never the payer. */
  feePayer: string
  /** The resource's memo (`extra.memo`), when it asks for one. */
  memo?: string
}

/** Builds, unsigned, the transaction that makes an x402 Solana payment; the signer checks it before signing. */
export interface X402SolanaBuilder {
  /** The transaction, base64, and the mint's decimals (which it states). */
  build(transfer: X402SolanaTransfer): Promise<{ transaction: string; decimals: number }>
}

export type X402FetchFn = (
  input: string | URL | Request,
  init?: RequestInit,
) => Promise<Response & { payment?: SettleResponse }>

/** The longest an authorization may stay valid, whatever a resource asks (its `maxTimeoutSeconds`). */
const maxValiditySeconds = 3600

/**
 * A fetch that pays x402 resources. On a 402 it reads `PAYMENT-REQUIRED`, takes the first accepted
 * requirement its signers can pay within the budget (x402 `exact`: an EIP-3009 authorization on an EVM
 * chain, or on Solana a transfer transaction from `options.solana` with the resource's fee payer), runs
 * caipay's signing guard on what it is about to sign (chain, account, asset, amount, exactly one
 * transfer to `payTo`), signs, and repeats the request once with `PAYMENT-SIGNATURE`. The response carries the decoded
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
    // The origin that asked to be paid is where redirects ended; the requested one is charged as well, so
    // neither a redirect to a fresh origin nor one from a spent origin multiplies anyone's budget.
    const origins = [...new Set([new URL(first.url || request.url).origin, new URL(request.url).origin])]
    const refusals: Record<string, unknown>[] = []
    let chosen: Payable | undefined
    for (const requirement of required.accepts) {
      const verdict = payable(requirement, options, spent, origins)
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
    const { requirement, signer, account, spentKeys, amount } = chosen
    const address = account.slice(account.lastIndexOf(':') + 1)
    // Counted from now, before the transaction is built, so that requests in flight together cannot
    // each fit the per-origin budget alone; handed back if nothing gets signed.
    for (const key of spentKeys) spent.set(key, (spent.get(key) ?? 0n) + amount)
    let signing: Signing
    try {
      signing =
        signer.namespace === 'solana'
          ? await solanaSigning(requirement, address, options.solana!)
          : evmSigning(requirement, address, now())
      await guardPayment(chosen, signing)
    } catch (error) {
      for (const key of spentKeys) spent.set(key, spent.get(key)! - amount)
      throw error
    }
    const signed = await signer.request(signing.request)
    const payload = {
      x402Version: 2,
      ...(required.resource !== undefined ? { resource: required.resource } : {}),
      ...(required.extensions !== undefined ? { extensions: required.extensions } : {}),
      accepted: requirement,
      payload: signing.payload(signed),
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
  /** The budget counters this payment is counted in: one per origin it is charged to. */
  spentKeys: string[]
}

/** What the key is asked to sign, the decimals its transfer states, and the x402 payload the result makes. */
interface Signing {
  request: SignerRequest
  decimals: number
  payload(signed: string): Record<string, unknown>
}

function evmSigning(requirement: AcceptedRequirement, address: string, issuedAt: number): Signing {
  const authorization = {
    from: address,
    to: requirement.payTo,
    value: requirement.amount,
    validAfter: '0',
    validBefore: String(issuedAt + Math.min(requirement.maxTimeoutSeconds, maxValiditySeconds)),
    nonce: randomNonce(),
  }
  return {
    request: {
      chainId: requirement.network,
      method: 'eth_signTypedData_v4',
      params: [address, JSON.stringify(transferTypedData(requirement, authorization))],
    },
    // EIP-3009 typed data states no decimals.
    decimals: 0,
    payload: (signature) => ({ authorization, signature }),
  }
}

async function solanaSigning(
  requirement: AcceptedRequirement,
  address: string,
  builder: X402SolanaBuilder,
): Promise<Signing> {
  const extra = requirement.extra ?? {}
  const terms = {
    mint: requirement.asset,
    payTo: requirement.payTo,
    amount: requirement.amount,
    feePayer: extra.feePayer as string,
  }
  const { transaction, decimals } = await builder.build({
    chainId: requirement.network,
    payer: address,
    ...terms,
    ...(typeof extra.memo === 'string' ? { memo: extra.memo } : {}),
  })
  return {
    // The terms go with the bytes: the Solana signer refuses a transaction that is not exactly them.
    request: {
      chainId: requirement.network,
      method: 'solana_signTransaction',
      params: [{ transaction, x402: terms }],
    },
    decimals,
    payload: (signed) => ({ transaction: signed }),
  }
}

/**
 * The payment flow's signing guard on the bytes about to be signed (chain, account, asset, decimals),
 * then x402's stricter rule: what they move, decoded by the signer, is exactly one transfer of the
 * required amount to `payTo`.
 */
async function guardPayment({ requirement, signer, account, asset, amount }: Payable, signing: Signing) {
  const { inspection } = await checkAction(
    { index: 0, signer, request: signing.request },
    {
      accounts: [account],
      account,
      amount: {
        unit: `caip19/${asset}`,
        value: requirement.amount,
        display: { assetName: '', assetSymbol: '', decimals: signing.decimals },
      },
    },
  )
  const [transfer, ...more] = inspection.transfers
  const payTo = `${requirement.network}:${requirement.payTo}`
  if (
    !transfer ||
    more.length > 0 ||
    transfer.amount !== amount ||
    transfer.approval ||
    transfer.through !== undefined ||
    transfer.to === undefined ||
    !sameCaip(transfer.to, payTo)
  ) {
    throw new PayError({
      code: 'action_rejected',
      message: 'What would be signed is not exactly one transfer of the required amount to payTo.',
      context: {
        chainId: requirement.network,
        transfers: inspection.transfers.map((t) => ({ amount: t.amount.toString(), to: t.to })),
        required: { amount: requirement.amount, payTo },
      },
    })
  }
}

/** Whether one requirement can be paid: an allow-list of what this payer signs, then the budget. */
function payable(
  requirement: AcceptedRequirement,
  options: X402FetchOptions,
  spent: ReadonlyMap<string, bigint>,
  origins: readonly string[],
): Payable | { reason: string } {
  if (requirement.scheme !== 'exact') return { reason: 'unsupported_scheme' }
  const family = /^eip155:[0-9]{1,32}$/.test(requirement.network)
    ? evmFamily
    : /^solana:[1-9A-HJ-NP-Za-km-z]{1,32}$/.test(requirement.network)
      ? solanaFamily
      : undefined
  if (!family) return { reason: 'unsupported_network' }
  const refused = family.refusal(requirement, options)
  if (refused) return { reason: refused }
  if (!/^[1-9][0-9]{0,77}$/.test(requirement.amount)) return { reason: 'invalid_amount' }
  const asset = `${requirement.network}/${family.assetNamespace}:${requirement.asset}`
  const amount = BigInt(requirement.amount)
  const perRequest = limitFor(options.budget.perRequest, asset)
  if (perRequest === undefined) return { reason: 'asset_not_in_budget' }
  if (amount > perRequest) return { reason: 'over_budget_per_request' }
  const spentKeys = origins.map((origin) => `${origin} ${canonicalCaip(asset)}`)
  const perOrigin = options.budget.perOrigin && limitFor(options.budget.perOrigin, asset)
  if (perOrigin !== undefined && spentKeys.some((key) => (spent.get(key) ?? 0n) + amount > perOrigin))
    return { reason: 'over_budget_per_origin' }
  for (const signer of options.signers) {
    if (signer.namespace !== family.namespace || !signer.methods.includes(family.method)) continue
    const account = signer.accounts().find((a) => a.startsWith(`${requirement.network}:`))
    if (!account) continue
    const refusedPayer = family.payerRefusal?.(requirement, account)
    return refusedPayer
      ? { reason: refusedPayer }
      : { requirement, signer, account, asset, amount, spentKeys }
  }
  return { reason: 'no_signer_for_network' }
}

/** How one chain family's `exact` requirements are read and paid. */
interface Family {
  namespace: string
  method: string
  /** CAIP-19 asset namespace. */
  assetNamespace: string
  /** Why this payer does not pay the requirement, read from its fields alone. */
  refusal(requirement: AcceptedRequirement, options: X402FetchOptions): string | undefined
  /** Why `account` may not pay it. */
  payerRefusal?(requirement: AcceptedRequirement, account: string): string | undefined
}

const evmFamily: Family = {
  namespace: 'eip155',
  method: 'eth_signTypedData_v4',
  assetNamespace: 'erc20',
  refusal(requirement) {
    const extra = requirement.extra ?? {}
    const method = extra.assetTransferMethod
    if (method !== undefined && method !== 'eip3009') return 'unsupported_transfer_method'
    if (typeof extra.name !== 'string' || typeof extra.version !== 'string') return 'missing_eip712_domain'
    if (!isValidAddress('eip155', requirement.asset) || !isValidAddress('eip155', requirement.payTo))
      return 'invalid_address'
    return undefined
  },
}

/** x402's bound on a resource's memo, UTF-8 bytes. */
const maxMemoBytes = 256

const solanaFamily: Family = {
  namespace: 'solana',
  method: 'solana_signTransaction',
  assetNamespace: 'token',
  refusal(requirement, options) {
    const { feePayer, memo } = requirement.extra ?? {}
    const addresses = [requirement.asset, requirement.payTo, feePayer]
    if (!addresses.every((a) => typeof a === 'string' && isValidAddress('solana', a)))
      return 'invalid_address'
    if (
      memo !== undefined &&
      (typeof memo !== 'string' || new TextEncoder().encode(memo).length > maxMemoBytes)
    )
      return 'invalid_memo'
    // A transfer's amount is a u64.
    if (/^[0-9]{1,78}$/.test(requirement.amount) && BigInt(requirement.amount) >= 2n ** 64n)
      return 'invalid_amount'
    if (!options.solana) return 'no_solana_builder'
    return undefined
  },
  payerRefusal(requirement, account) {
    // The fee payer's signature pays the fee; the payer's key must never be it.
    return requirement.extra?.feePayer === account.slice(account.lastIndexOf(':') + 1)
      ? 'fee_payer_is_payer'
      : undefined
  },
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
