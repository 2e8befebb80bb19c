import type { Address, Hex } from 'viem'
import {
  type Permit2Transfer,
  permit2Address,
  permit2WitnessHash,
  permit2WitnessTypeString,
} from '../../../../protocol/evm/index.js'
import { eip3009Abi, permit2Abi } from './abi.js'
import { type Authorization, authorizationFromJson } from './authorization.js'
import type { EvmChain } from './chain.js'
import type { EvmFailureCode, RelayPayload } from './outcome.js'

/** What the executor sends to collect a payment: the call and its contract. */
export interface CollectionCall {
  to: Address
  abi: readonly unknown[]
  functionName: string
  args: readonly unknown[]
}

/** Why a collection cannot be sent yet (`final: false`: wait and look again) or at all. */
export type NotReady =
  | { final: false; reason: string }
  | { final: true; code: EvmFailureCode; reason: string }

/**
 * How a gasless payment is collected from its payer: the ERC-20 movement it must produce and the call that
 * produces it, given the payer's signature (as the token or Permit2 will check it).
 */
export interface Collection {
  method: 'eip3009' | 'permit2'
  token: Address
  from: Address
  to: Address
  value: bigint
  call(signature: Hex): CollectionCall
  /** Before the call is simulated: whatever the payer must have done on the chain first. */
  ready?(): Promise<NotReady | undefined>
}

export function collectionOf(chain: EvmChain, payload: RelayPayload): Collection {
  if (payload.permit2) return permit2Collection(chain, permit2FromJson(payload.permit2))
  if (!payload.authorization) throw new Error('Relay payload carries neither an authorization nor a permit.')
  const authorization = authorizationFromJson(payload.authorization)
  return {
    method: 'eip3009',
    token: authorization.token,
    from: authorization.from,
    to: authorization.to,
    value: authorization.value,
    call: (signature) => ({ to: authorization.token, ...relayCall(authorization, signature) }),
  }
}

/** The token's `bytes signature` overload: ECDSA for a key, ERC-1271 for an account (USDC v2.2). */
export function relayCall(authorization: Authorization, signature: Hex) {
  const functionName =
    authorization.kind === 'ReceiveWithAuthorization'
      ? 'receiveWithAuthorization'
      : 'transferWithAuthorization'
  const args = [
    authorization.from,
    authorization.to,
    authorization.value,
    authorization.validAfter,
    authorization.validBefore,
    authorization.nonce,
    signature,
  ] as const
  return { abi: eip3009Abi, functionName, args } as const
}

/** A Permit2 transfer and the payer it was offered to (Permit2 signatures name no owner). */
export type Permit2Collection = Permit2Transfer & { owner: Address }

export type Permit2Json = Record<keyof Permit2Collection, string | number>

export function permit2ToJson(p: Permit2Collection): Permit2Json {
  return {
    ...p,
    amount: p.amount.toString(),
    nonce: p.nonce.toString(),
    deadline: p.deadline.toString(),
    validAfter: p.validAfter.toString(),
  }
}

export function permit2FromJson(p: Permit2Json): Permit2Collection {
  return {
    chainId: Number(p.chainId),
    owner: p.owner as Address,
    token: p.token as Address,
    amount: BigInt(p.amount),
    spender: p.spender as Address,
    nonce: BigInt(p.nonce),
    deadline: BigInt(p.deadline),
    to: p.to as Address,
    validAfter: BigInt(p.validAfter),
  }
}

/**
 * Permit2's `permitWitnessTransferFrom`, sent by the executor (the spender and the payee): Permit2 checks
 * the payer's signature (ECDSA, or ERC-1271 for an address with code) over the permit and the witness,
 * and pulls the tokens through the payer's allowance to Permit2. Before that allowance is there (the
 * payer's own approve transaction, sent with the option, may still be pending) it waits, until the
 * permit's deadline.
 */
function permit2Collection(chain: EvmChain, p: Permit2Collection): Collection {
  return {
    method: 'permit2',
    token: p.token,
    from: p.owner,
    to: p.to,
    value: p.amount,
    call: (signature) => ({
      to: permit2Address,
      abi: permit2Abi,
      functionName: 'permitWitnessTransferFrom',
      args: [
        { permitted: { token: p.token, amount: p.amount }, nonce: p.nonce, deadline: p.deadline },
        { to: p.to, requestedAmount: p.amount },
        p.owner,
        permit2WitnessHash(p.to, p.validAfter),
        permit2WitnessTypeString,
        signature,
      ],
    }),
    async ready() {
      const allowance = await chain.publicClient.readContract({
        address: p.token,
        abi: eip3009Abi,
        functionName: 'allowance',
        args: [p.owner, permit2Address],
      })
      if (allowance >= p.amount) return undefined
      const block = await chain.publicClient.getBlock({ blockTag: 'latest' })
      const reason = `The payer's allowance to Permit2 is ${allowance}, short of ${p.amount}`
      if (block.timestamp > p.deadline)
        return { final: true, code: 'allowance_missing', reason: `${reason}, past the permit's deadline.` }
      return { final: false, reason: `${reason}: waiting for the payer's approve transaction.` }
    },
  }
}
