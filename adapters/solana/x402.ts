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
  encodeBase64,
  memoProgramIds,
  token2022ProgramId,
  tokenProgramId,
  transferCheckedTag,
} from '../../protocol/solana/index.js'
import { PayError } from '../../src/errors/PayError.js'
import type { X402SolanaBuilder } from '../../src/x402/index.js'

/** The reads the builder needs from a Solana node: a web3.js Connection has them. */
export type X402SolanaNode = Pick<Connection, 'getAccountInfo' | 'getLatestBlockhash'>

// What x402's own client asks: 20,000 compute units at 1 micro-lamport each, so the fee payer's cost is
// its signatures' base fee and one lamport.
const computeUnitLimit = 20_000
const computeUnitPriceMicroLamports = 1
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
