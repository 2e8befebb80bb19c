/**
 * x402 `exact` on Solana, the payer's side: the transaction x402's own client builds (compute-unit limit
 * and price, one SPL `transferChecked` from the payer's associated token account to `payTo`'s, a memo,
 * the resource's facilitator as fee payer), and the terms the Solana signer holds it to before signing.
 */
import {
  ComputeBudgetProgram,
  type Connection,
  PublicKey,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import {
  associatedTokenAddress,
  type DecodedSolanaTransaction,
  encodeBase64,
  maxFeeLamports,
  memoProgramIds,
  token2022ProgramId,
  tokenProgramId,
  transferCheckedTag,
} from '../../protocol/solana/index.js'
import { PayError } from '../../src/errors/PayError.js'
import type { X402SolanaBuilder, X402SolanaTransfer } from '../../src/x402/index.js'

/** The reads the builder needs from a Solana node: a web3.js Connection has them. */
export type X402SolanaNode = Pick<Connection, 'getAccountInfo' | 'getLatestBlockhash'>

// What x402's own client asks: 20,000 compute units at 1 micro-lamport each, so the fee payer's cost is
// its signatures' base fee and one lamport.
const computeUnitLimit = 20_000
const computeUnitPriceMicroLamports = 1
/**
 * The most an x402 payment may cost its fee payer, lamports. The payer pays no fee, but a facilitator
 * refuses a costlier transaction (caipay's at this bound), so it is not worth a signature.
 */
const maxFeeLamportsPaid = 100_000n
/** SPL mint layout: the decimals byte follows the optional authority (36 bytes) and the supply (8). */
const mintDecimalsOffset = 44
const mintSize = 82

/**
 * Builds the unsigned x402 payment transaction for `x402Fetch`'s `solana` option, reading the mint
 * (its token program and decimals) and a recent blockhash from `connection`, the payer's own node.
 * It signs nothing: x402Fetch hands what it builds to the Solana signer, under the signing guard.
 */
export function solanaX402Builder(options: { connection: X402SolanaNode }): X402SolanaBuilder {
  const { connection } = options
  return {
    async build(transfer) {
      const mint = new PublicKey(transfer.mint)
      const [info, { blockhash }] = await unreachable(transfer.chainId, () =>
        Promise.all([
          connection.getAccountInfo(mint, 'confirmed'),
          connection.getLatestBlockhash('confirmed'),
        ]),
      )
      const program = info?.owner.toBase58()
      if (
        !info ||
        (program !== tokenProgramId && program !== token2022ProgramId) ||
        info.data.length < mintSize
      ) {
        throw new PayError({
          code: 'action_rejected',
          message: 'The x402 asset is not a token mint on this chain.',
          context: { chainId: transfer.chainId, asset: transfer.mint },
        })
      }
      const decimals = info.data[mintDecimalsOffset]!
      const programId = new PublicKey(program)
      const payer = new PublicKey(transfer.payer)
      const data = new Uint8Array(10)
      const view = new DataView(data.buffer)
      data[0] = transferCheckedTag
      view.setBigUint64(1, BigInt(transfer.amount), true)
      data[9] = decimals
      const transferChecked = new TransactionInstruction({
        programId,
        keys: [
          {
            pubkey: new PublicKey(associatedTokenAddress(transfer.payer, transfer.mint, program)),
            isSigner: false,
            isWritable: true,
          },
          { pubkey: mint, isSigner: false, isWritable: false },
          {
            pubkey: new PublicKey(associatedTokenAddress(transfer.payTo, transfer.mint, program)),
            isSigner: false,
            isWritable: true,
          },
          { pubkey: payer, isSigner: true, isWritable: false },
        ],
        data: Buffer.from(data),
      })
      // A fresh memo makes every payment's message unique, so two equal payments in one blockhash's
      // lifetime are two payments, not one settled twice.
      const memo = new TransactionInstruction({
        programId: new PublicKey(memoProgramIds[0]),
        keys: [],
        data: Buffer.from(new TextEncoder().encode(transfer.memo ?? randomHex(16))),
      })
      const message = new TransactionMessage({
        payerKey: new PublicKey(transfer.feePayer),
        recentBlockhash: blockhash,
        instructions: [
          ComputeBudgetProgram.setComputeUnitLimit({ units: computeUnitLimit }),
          ComputeBudgetProgram.setComputeUnitPrice({ microLamports: computeUnitPriceMicroLamports }),
          transferChecked,
          memo,
        ],
      }).compileToV0Message()
      return { transaction: encodeBase64(new VersionedTransaction(message).serialize()), decimals }
    },
  }
}

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

/** A node that cannot be read is a network error, not a refusal. */
async function unreachable<T>(chainId: string, read: () => Promise<T>): Promise<T> {
  try {
    return await read()
  } catch (cause) {
    throw new PayError({
      code: 'network_error',
      message: 'The Solana node could not be read to build the x402 payment.',
      context: { chainId },
      cause,
    })
  }
}

function randomHex(bytes: number): string {
  const random = globalThis.crypto.getRandomValues(new Uint8Array(bytes))
  return Array.from(random, (b) => b.toString(16).padStart(2, '0')).join('')
}
