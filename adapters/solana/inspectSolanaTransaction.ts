import {
  associatedTokenAddress,
  type DecodedSolanaTransaction,
  type SolanaInstruction,
} from '../../protocol/solana/index.js'
import type { ActionInspection, InspectedTransfer } from '../../src/actions/types.js'
import { PayError } from '../../src/errors/PayError.js'

export interface SolanaPolicyOptions {
  /**
   * Let the signer pay the transaction fee or fund a new token account's rent. Off by default:
   * in the payment flow the service is the fee payer.
   */
  allowFeePayer?: boolean
}

export interface CheckSolanaTransactionParameters extends SolanaPolicyOptions {
  decoded: DecodedSolanaTransaction
  /** Base58 address of the key about to sign. */
  signer: string
  /** CAIP-2 chain id, for error context. */
  chainId: string
}

/**
 * Throws a PayError `action_rejected` unless the transaction is one the signer may sign: the
 * signer is a required signer, not the fee payer (unless allowed), and every instruction that
 * involves the signer is a compute-budget, associated-token-account create, SPL `transferChecked`
 * or memo instruction. Foreign instructions that do not name the signer cannot use its
 * signature, so they are left to the fee payer.
 */
export function checkSolanaTransaction(parameters: CheckSolanaTransactionParameters): void {
  const { decoded, signer, chainId } = parameters
  const account = `${chainId}:${signer}`
  if (!decoded.signers.includes(signer)) {
    throw rejected('The Solana transaction does not need this account’s signature.', { chainId, account })
  }
  if (decoded.feePayer === signer && !parameters.allowFeePayer) {
    throw rejected('The Solana transaction makes the signer pay its fees.', { chainId, account })
  }
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
    case 'transferChecked':
      return undefined
    case 'createAssociatedTokenAccount':
      return instruction.payer === signer && !allowFeePayer ? 'signer funds a token account' : undefined
    case 'other':
      return instruction.programId === signer || instruction.accounts.includes(signer)
        ? 'unrecognised instruction involves the signer'
        : undefined
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
  for (const ix of decoded.instructions) {
    if (ix.kind !== 'transferChecked') continue
    const fromSigner =
      ix.authority === signer || ix.source === associatedTokenAddress(signer, ix.mint, ix.programId)
    if (!fromSigner) continue
    transfers.push({
      asset: `${chainId}/token:${ix.mint}`,
      amount: ix.amount,
      to: `${chainId}:${owners.get(ix.destination) ?? ix.destination}`,
    })
  }
  return { account: `${chainId}:${signer}`, transfers }
}

function rejected(message: string, context: Record<string, unknown>): PayError<'action_rejected'> {
  return new PayError({ code: 'action_rejected', message, context })
}
