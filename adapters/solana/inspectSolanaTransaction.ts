import {
  associatedTokenAddress,
  computeBudgetProblem,
  type DecodedSolanaTransaction,
  maxFeeLamports,
  type SolanaInstruction,
} from '../../protocol/solana/index.js'
import type { ActionInspection, InspectedMandate, InspectedTransfer } from '../../src/actions/types.js'
import { sameCaip } from '../../src/caip/caip.js'
import type { SubscriptionTerms } from '../../src/contract/gateway.js'
import { PayError } from '../../src/errors/PayError.js'

export interface SolanaPolicyOptions {
  /**
   * Let the signer pay the transaction fee or fund a new token account's rent. Off by default:
   * in the payment flow the service is the fee payer.
   */
  allowFeePayer?: boolean
  /**
   * With `allowFeePayer`, the most the signer may pay in fees for one transaction, lamports: the base
   * fee of every signature (the transaction's and those its precompile instructions declare) plus
   * compute-unit limit x price, charged whether the transaction succeeds or fails. Default 1 000 000
   * (0.001 SOL).
   */
  maxFeeLamports?: bigint
  /**
   * CAIP-10 accounts an SPL delegation (`ApproveChecked`, a subscription's mandate) may name as its
   * delegate, e.g. a service's charging key. Default none: no delegation is signed. The guard still
   * bounds the delegated amount by the subscription's terms.
   */
  delegates?: readonly string[]
}

/** Default `maxFeeLamports`: far above an honest payment's fee, far below what a hostile one could set. */
export const defaultMaxFeeLamports = 1_000_000n

export interface CheckSolanaTransactionParameters extends SolanaPolicyOptions {
  decoded: DecodedSolanaTransaction
  /** Base58 address of the key about to sign. */
  signer: string
  /** CAIP-2 chain id, for error context. */
  chainId: string
  /**
   * The option's subscription terms: only with them may the transaction delegate the signer's tokens
   * (one `ApproveChecked`, nothing else but compute-budget instructions).
   */
  subscription?: SubscriptionTerms
}

/**
 * Throws a PayError `action_rejected` unless the transaction is one the signer may sign: the
 * signer is a required signer, not the fee payer (unless allowed, and then within
 * `maxFeeLamports` and funding at most one token account), the blockhash is not a durable nonce
 * (such a transaction never expires), and every instruction that involves the signer is a
 * compute-budget, associated-token-account create, SPL `transferChecked` (with the signer as the
 * authority, from its own associated token account, never as an extra account) or memo instruction.
 * Foreign instructions that do not name the signer cannot use its signature, so they are left to the
 * fee payer.
 */
export function checkSolanaTransaction(parameters: CheckSolanaTransactionParameters): void {
  const { decoded, signer, chainId } = parameters
  const account = `${chainId}:${signer}`
  if (!decoded.signers.includes(signer)) {
    throw rejected('The Solana transaction does not need this account’s signature.', { chainId, account })
  }
  const budget = computeBudgetProblem(decoded)
  if (budget) {
    throw rejected(
      'The Solana transaction has compute-budget instructions the wallet cannot read as the runtime does.',
      {
        chainId,
        account,
        reason: budget,
      },
    )
  }
  if (decoded.feePayer === signer) {
    if (!parameters.allowFeePayer) {
      throw rejected('The Solana transaction makes the signer pay its fees.', { chainId, account })
    }
    const fee = maxFeeLamports(decoded)
    const limit = parameters.maxFeeLamports ?? defaultMaxFeeLamports
    if (fee > limit) {
      throw rejected('The Solana transaction could charge the signer more fees than allowed.', {
        chainId,
        account,
        maxFeeLamports: fee.toString(),
        limit: limit.toString(),
      })
    }
  }
  if (decoded.usesDurableNonce) {
    throw rejected('The Solana transaction uses a durable nonce, so it would never expire.', {
      chainId,
      account,
      field: 'recentBlockhash',
    })
  }
  const funded = decoded.instructions.filter(
    (ix) => ix.kind === 'createAssociatedTokenAccount' && ix.payer === signer,
  )
  if (funded.length > 1) {
    throw rejected('The Solana transaction makes the signer fund more than one token account.', {
      chainId,
      account,
      count: funded.length,
    })
  }
  checkDelegation(parameters)
  for (const instruction of decoded.instructions) {
    const reason = disallowedReason(instruction, signer, parameters.allowFeePayer === true)
    if (reason) {
      throw rejected('The Solana transaction contains an instruction the signer does not allow.', {
        chainId,
        account,
        instructionIndex: instruction.index,
        programId: instruction.programId,
        reason,
      })
    }
  }
}

function disallowedReason(
  instruction: SolanaInstruction,
  signer: string,
  allowFeePayer: boolean,
): string | undefined {
  switch (instruction.kind) {
    case 'computeBudget':
    case 'memo':
      return undefined
    case 'transferChecked':
      // The signer's signature serves a transfer only as its authority, from its own associated token
      // account. After the authority it would serve someone else: a multisig's transfer (Token) or a
      // transfer hook's program (Token-2022 passes those accounts on with their signer flag); as the
      // delegate of another account it would move that account's tokens.
      if (instruction.extraAccounts.includes(signer)) return 'signer is an extra account of a transfer'
      if (instruction.authority !== signer) return undefined
      return instruction.source !== associatedTokenAddress(signer, instruction.mint, instruction.programId)
        ? 'signer authorises a transfer from another account'
        : undefined
    case 'advanceNonce':
      return instruction.accounts.includes(signer) ? 'signer advances a nonce account' : undefined
    case 'createAssociatedTokenAccount':
      return instruction.payer === signer && !allowFeePayer ? 'signer funds a token account' : undefined
    case 'approveChecked':
      // Only the mandate `checkDelegation` read: the signer's own account delegated by the signer.
      if (!instruction.accounts.includes(signer)) return undefined
      return instruction.owner === signer &&
        instruction.extraAccounts.length === 0 &&
        instruction.source === associatedTokenAddress(signer, instruction.mint, instruction.programId)
        ? undefined
        : 'signer serves a delegation of another account'
    case 'other':
      return instruction.programId === signer || instruction.accounts.includes(signer)
        ? 'unrecognised instruction involves the signer'
        : undefined
  }
}

/**
 * A delegation of the signer's tokens (SPL `ApproveChecked`, owner the signer) is a subscription's
 * mandate: refused outside a subscription option; inside one, the transaction holds that one
 * instruction and compute-budget instructions only, and its delegate is one `delegates` allow-lists.
 */
function checkDelegation(parameters: CheckSolanaTransactionParameters): void {
  const { decoded, signer, chainId, subscription } = parameters
  const account = `${chainId}:${signer}`
  const grants = decoded.instructions.filter(
    (ix) => ix.kind === 'approveChecked' && ix.accounts.includes(signer),
  )
  if (grants.length === 0) return
  const grant = grants[0]!
  const context = { chainId, account, instructionIndex: grant.index }
  if (!subscription) {
    throw rejected('A delegation (a standing allowance) is signed only inside a subscription option.', {
      ...context,
      rule: 'mandate_outside_subscription',
    })
  }
  const others = decoded.instructions.filter((ix) => ix !== grant && ix.kind !== 'computeBudget')
  if (grants.length > 1 || others.length > 0) {
    throw rejected('A mandate transaction holds its delegation and compute-budget instructions only.', {
      ...context,
      rule: 'mandate_transaction',
      instructions: decoded.instructions.map((ix) => ix.kind),
    })
  }
  if (grant.kind !== 'approveChecked') return
  const delegate = `${chainId}:${grant.delegate}`
  if (!parameters.delegates?.some((allowed) => sameCaip(allowed, delegate))) {
    throw rejected('A delegation to a delegate the wallet did not allow-list is not signed.', {
      ...context,
      rule: 'mandate_delegate_not_allowed',
      spender: delegate,
    })
  }
}

export interface InspectSolanaTransactionParameters {
  decoded: DecodedSolanaTransaction
  signer: string
  chainId: string
}

/**
 * What signing would authorise: every SPL `transferChecked` whose authority is the signer or
 * whose source is the signer's associated token account. `to` is the destination token account's
 * owner when the transaction itself creates that associated account, otherwise the token account.
 */
export function inspectSolanaTransaction(parameters: InspectSolanaTransactionParameters): ActionInspection {
  const { decoded, signer, chainId } = parameters
  const owners = new Map<string, string>()
  for (const ix of decoded.instructions) {
    if (ix.kind !== 'createAssociatedTokenAccount') continue
    // Only trust the owner when the account really is that owner's derived address.
    if (associatedTokenAddress(ix.owner, ix.mint, ix.tokenProgram) === ix.account)
      owners.set(ix.account, ix.owner)
  }
  const transfers: InspectedTransfer[] = []
  let mandate: InspectedMandate | undefined
  for (const ix of decoded.instructions) {
    // A delegation the signer grants (checkSolanaTransaction let it through only under subscription terms).
    if (ix.kind === 'approveChecked' && ix.owner === signer) {
      mandate = {
        kind: 'splDelegate',
        asset: `${chainId}/token:${ix.mint}`,
        amount: ix.amount,
        spender: `${chainId}:${ix.delegate}`,
        owner: `${chainId}:${signer}`,
        decimals: ix.decimals,
      }
    }
    if (ix.kind !== 'transferChecked') continue
    const fromSigner =
      ix.authority === signer || ix.source === associatedTokenAddress(signer, ix.mint, ix.programId)
    if (!fromSigner) continue
    transfers.push({
      asset: `${chainId}/token:${ix.mint}`,
      amount: ix.amount,
      decimals: ix.decimals,
      to: `${chainId}:${owners.get(ix.destination) ?? ix.destination}`,
    })
  }
  // The fee payer is charged whether the transaction succeeds or fails: the most it can be, as the bytes
  // bound it (the guard checked it against `maxFeeLamports`); nothing when another account pays.
  const fee = decoded.feePayer === signer ? maxFeeLamports(decoded) : 0n
  return {
    account: `${chainId}:${signer}`,
    transfers,
    ...(fee > 0n && { maxFee: { asset: `${chainId}/slip44:501`, amount: fee } }),
    ...(mandate && { mandate }),
  }
}

function rejected(message: string, context: Record<string, unknown>): PayError<'action_rejected'> {
  return new PayError({ code: 'action_rejected', message, context })
}
