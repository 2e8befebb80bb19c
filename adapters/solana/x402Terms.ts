// The x402 terms the Solana signer holds a transaction to, apart from the builder (x402.ts): the signer
// needs them without web3.js (caipay/adapters/solana-kit).
import {
  associatedTokenAddress,
  type DecodedSolanaTransaction,
  maxFeeLamports,
  token2022ProgramId,
  tokenProgramId,
} from '../../protocol/solana/index.js'
import { PayError } from '../../src/errors/PayError.js'
import type { X402SolanaTransfer } from '../../src/x402/index.js'

/**
 * The most an x402 payment may cost its fee payer, lamports. The payer pays no fee, but a facilitator
 * refuses a costlier transaction (caipay's at this bound), so it is not worth a signature.
 */
const maxFeeLamportsPaid = 100_000n

/**
 * Why `decoded` is not exactly the x402 payment of `terms` by `signer`, or undefined: the fee payer is
 * the terms' (never the signer), no lookup tables or durable nonce, the signers are just those two, and
 * the instructions are compute-unit limit and price, memos naming no account, and one `transferChecked`
 * of `terms.amount` of `terms.mint` by the signer from its associated token account to `payTo`'s, with
 * a fee of at most 100,000 lamports.
 */
export function x402TransferProblem(
  decoded: DecodedSolanaTransaction,
  signer: string,
  terms: X402SolanaTerms,
): string | undefined {
  if (decoded.feePayer === signer) return 'signer_pays_fee'
  if (decoded.feePayer !== terms.feePayer) return 'fee_payer_mismatch'
  if (decoded.usesLookupTables || decoded.usesDurableNonce) return 'lookup_table_or_durable_nonce'
  if (decoded.signers.some((key) => key !== signer && key !== terms.feePayer)) return 'unexpected_signer'
  let transfers = 0
  for (const ix of decoded.instructions) {
    if (ix.kind === 'computeBudget' && (ix.setting === 'unitLimit' || ix.setting === 'unitPrice')) continue
    if (ix.kind === 'memo' && ix.accounts.length === 0) continue
    if (ix.kind !== 'transferChecked') return 'unexpected_instruction'
    transfers++
    if (ix.programId !== tokenProgramId && ix.programId !== token2022ProgramId)
      return 'unexpected_instruction'
    if (ix.authority !== signer || ix.extraAccounts.length > 0) return 'unexpected_transfer_authority'
    if (ix.mint !== terms.mint) return 'mint_mismatch'
    if (ix.amount !== BigInt(terms.amount)) return 'amount_mismatch'
    if (ix.source !== associatedTokenAddress(signer, ix.mint, ix.programId)) return 'source_mismatch'
    if (ix.destination !== associatedTokenAddress(terms.payTo, ix.mint, ix.programId))
      return 'recipient_mismatch'
  }
  if (transfers !== 1) return 'transfer_count'
  if (maxFeeLamports(decoded) > maxFeeLamportsPaid) return 'fee_too_high'
  return undefined
}

/** The part of an x402 transfer the signer checks the bytes against (the `x402` field of its request). */
export type X402SolanaTerms = Pick<X402SolanaTransfer, 'mint' | 'payTo' | 'amount' | 'feePayer'>

/** The request's x402 terms, or undefined when it carries none; a malformed one is refused. */
export function readX402Terms(param: { x402?: unknown }): X402SolanaTerms | undefined {
  const terms = param.x402
  if (terms === undefined) return undefined
  const fields = ['mint', 'payTo', 'amount', 'feePayer'] as const
  if (
    typeof terms !== 'object' ||
    terms === null ||
    fields.some((field) => typeof (terms as Record<string, unknown>)[field] !== 'string') ||
    !/^[1-9][0-9]{0,19}$/.test((terms as X402SolanaTerms).amount) ||
    BigInt((terms as X402SolanaTerms).amount) >= 2n ** 64n
  ) {
    throw new PayError({
      code: 'invalid_action',
      message: 'The x402 terms of the Solana action are malformed.',
    })
  }
  const { mint, payTo, amount, feePayer } = terms as X402SolanaTerms
  return { mint, payTo, amount, feePayer }
}
