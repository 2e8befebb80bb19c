import type { Address, Hex } from 'viem'
import type { ActionInspection } from '../../src/actions/types.js'
import type { SubscriptionTerms } from '../../src/contract/gateway.js'
import { eip155Account, eip155ChainId, erc20Asset } from './caip.js'
import { decodeTransaction } from './decodeTransaction.js'
import { decodeTypedData } from './decodeTypedData.js'
import { rejected } from './errors.js'
import { assertEvmMethod } from './methods.js'
import {
  parsePersonalSignParams,
  parseTransactionParams,
  parseTypedDataParams,
  type RpcTransaction,
  type TypedDataPayload,
  toBigInt,
} from './params.js'
import {
  decodePermit2Allowance,
  decodePermit2TypedData,
  isPermit2TypedData,
  permit2Address,
} from './permit2.js'
import type { EvmDecodePolicy } from './policy.js'

export interface EvmActionRequest {
  /** CAIP-2 chain id of the action, `eip155:<id>`. */
  chainId: string
  method: string
  /** The action's params, parsed from their JSON string. */
  params: readonly unknown[]
  /**
   * The option's subscription terms: with them a Permit2 `PermitSingle` is decoded as a mandate (the
   * guard bounds it by the terms); without them it is refused, as every standing allowance is.
   */
  subscription?: SubscriptionTerms
}

/**
 * What a signer may forward for an action: built from the decoded fields only, so nothing the
 * guard did not read reaches a key.
 */
export type EvmSignable =
  | { kind: 'typedData'; address: Address; typedData: TypedDataPayload }
  | { kind: 'message'; address: Address; message: Hex; text: string }
  | { kind: 'transaction'; tx: RpcTransaction }

export interface DecodedEvmAction {
  chainId: number
  inspection: ActionInspection
  signable: EvmSignable
}

/**
 * Decodes an EVM wallet action into the account that signs, the token movements it authorises and
 * the exact payload a signer may forward, without signing or touching the network. Refuses
 * (PayError) what it cannot bound: unknown typed data or calldata, typed data or transactions for
 * another chain, an authorization whose payer is not the signing address, fields the wallet does
 * not sign, and `personal_sign` of anything but readable text.
 */
export function decodeEvmRequest(request: EvmActionRequest, policy: EvmDecodePolicy = {}): DecodedEvmAction {
  const chainId = eip155ChainId(request.chainId)
  const { method, params } = request
  assertEvmMethod(method)
  if (method === 'personal_sign') {
    const { address, message, text } = parsePersonalSignParams(params)
    if (text === undefined) {
      throw rejected('personal_sign of anything but readable text is not signed (it may be a hash).', {
        method,
        bytes: (message.length - 2) / 2,
      })
    }
    return {
      chainId,
      inspection: { account: eip155Account(chainId, address), transfers: [] },
      signable: { kind: 'message', address, message, text },
    }
  }
  if (method === 'eth_sendTransaction') {
    const tx = parseTransactionParams(params)
    assertTransactionChain(chainId, tx.chainId)
    return {
      chainId,
      inspection: {
        account: eip155Account(chainId, tx.from),
        transfers: decodeTransaction(chainId, tx, policy),
      },
      signable: { kind: 'transaction', tx },
    }
  }
  const { address, typedData } = parseTypedDataParams(method, params)
  if (isPermit2TypedData(typedData) && typedData.primaryType === 'PermitSingle' && request.subscription) {
    // Permit2 names no owner: whoever signs grants the allowance, and the guard binds the signer.
    const { allowance, typedData: rebuilt } = decodePermit2Allowance(chainId, typedData, policy)
    const account = eip155Account(chainId, address)
    return {
      chainId,
      inspection: {
        account,
        transfers: [],
        ...(allowance.sigDeadline <= BigInt(Number.MAX_SAFE_INTEGER) && {
          validUntil: Number(allowance.sigDeadline),
        }),
        mandate: {
          kind: 'permit2',
          asset: erc20Asset(chainId, allowance.token),
          amount: allowance.amount,
          spender: eip155Account(chainId, allowance.spender),
          owner: account,
          // uint48: always a safe integer.
          expiration: Number(allowance.expiration),
          deadline: Number(
            allowance.sigDeadline < BigInt(Number.MAX_SAFE_INTEGER)
              ? allowance.sigDeadline
              : Number.MAX_SAFE_INTEGER,
          ),
          through: eip155Account(chainId, permit2Address),
        },
      },
      signable: { kind: 'typedData', address, typedData: rebuilt },
    }
  }
  if (isPermit2TypedData(typedData)) {
    // Permit2 signatures name no owner: whoever signs is the payer, and the guard binds the signer.
    const { transfer, typedData: rebuilt } = decodePermit2TypedData(chainId, typedData)
    return {
      chainId,
      inspection: {
        account: eip155Account(chainId, address),
        transfers: [
          {
            asset: erc20Asset(chainId, transfer.token),
            amount: transfer.amount,
            to: eip155Account(chainId, transfer.to),
            through: eip155Account(chainId, permit2Address),
          },
        ],
        ...(transfer.deadline <= BigInt(Number.MAX_SAFE_INTEGER) && {
          validUntil: Number(transfer.deadline),
        }),
        ...(transfer.validAfter > 0n && {
          validFrom: Number(
            transfer.validAfter < BigInt(Number.MAX_SAFE_INTEGER)
              ? transfer.validAfter
              : Number.MAX_SAFE_INTEGER,
          ),
        }),
      },
      signable: { kind: 'typedData', address, typedData: rebuilt },
    }
  }
  const decoded = decodeTypedData(chainId, typedData, policy)
  if (decoded.owner !== address) {
    throw rejected('The typed data moves funds of another address than the one signing it.', {
      signer: address,
      owner: decoded.owner,
    })
  }
  return {
    chainId,
    inspection: {
      account: eip155Account(chainId, address),
      transfers: decoded.transfers,
      ...(decoded.validUntil !== undefined && { validUntil: decoded.validUntil }),
      ...(decoded.validFrom !== undefined && { validFrom: decoded.validFrom }),
    },
    signable: { kind: 'typedData', address, typedData: decoded.typedData },
  }
}

/** The inspection alone: what the wallet's signing guard and the server's verifier share. */
export function decodeEvmAction(request: EvmActionRequest, policy: EvmDecodePolicy = {}): ActionInspection {
  return decodeEvmRequest(request, policy).inspection
}

/** A transaction that names its chain must name the action's. */
export function assertTransactionChain(chainId: number, txChainId: string | undefined): void {
  if (txChainId !== undefined && toBigInt(txChainId) !== BigInt(chainId)) {
    throw rejected('The transaction is for another chain than the action.', { chainId, txChainId })
  }
}

/**
 * The params to hand a remote wallet (WalletConnect) for an action, rebuilt from the decoded fields:
 * typed data from its struct, a transaction without the gateway's gas, fees, nonce or extra keys.
 */
export function evmForwardParams(request: EvmActionRequest, policy: EvmDecodePolicy = {}): unknown[] {
  const { signable } = decodeEvmRequest(request, policy)
  switch (signable.kind) {
    case 'typedData':
      return [
        signable.address,
        request.method === 'eth_signTypedData_v4' ? JSON.stringify(signable.typedData) : signable.typedData,
      ]
    case 'message':
      return [signable.message, signable.address]
    case 'transaction': {
      const { from, to, data, value } = signable.tx
      return [{ from, ...(to && { to }), ...(data && { data }), ...(value && { value }) }]
    }
  }
}
