import { randomBytes } from 'node:crypto'
import {
  createApproveInstruction,
  createAssociatedTokenAccountInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
  TOKEN_2022_PROGRAM_ID,
} from '@solana/spl-token'
import {
  AddressLookupTableAccount,
  ComputeBudgetProgram,
  Keypair,
  type TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import { describe, expect, it } from 'vitest'
import { isPayError } from '../../src/errors/PayError.js'
import * as api from './index.js'
import {
  checkSolanaTransaction,
  decodeBase64,
  decodeSolanaTransaction,
  encodeBase64,
  inspectSolanaTransaction,
} from './index.js'

const chainId = 'solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp'
const feePayer = Keypair.generate()
const buyer = Keypair.generate()
const merchant = Keypair.generate()
const mint = Keypair.generate().publicKey

function compile(
  instructions: TransactionInstruction[],
  version: 'legacy' | 0 = 'legacy',
): VersionedTransaction {
  const message = new TransactionMessage({
    payerKey: feePayer.publicKey,
    recentBlockhash: Keypair.generate().publicKey.toBase58(),
    instructions,
  })
  return new VersionedTransaction(
    version === 0 ? message.compileToV0Message() : message.compileToLegacyMessage(),
  )
}

describe('base64', () => {
  it('matches Buffer for every length and rejects junk', () => {
    for (let length = 0; length < 40; length++) {
      const bytes = new Uint8Array(randomBytes(length))
      const text = encodeBase64(bytes)
      expect(text).toBe(Buffer.from(bytes).toString('base64'))
      expect(decodeBase64(text)).toEqual(bytes)
    }
    expect(decodeBase64('ab$d')).toBeUndefined()
    expect(decodeBase64('a')).toBeUndefined()
  })
})

describe('decodeSolanaTransaction', () => {
  it('classifies the payment instructions of a Token-2022 v0 transaction', () => {
    const source = getAssociatedTokenAddressSync(mint, buyer.publicKey, false, TOKEN_2022_PROGRAM_ID)
    const destination = getAssociatedTokenAddressSync(mint, merchant.publicKey, false, TOKEN_2022_PROGRAM_ID)
    const tx = compile(
      [
        ComputeBudgetProgram.setComputeUnitPrice({ microLamports: 1 }),
        createAssociatedTokenAccountInstruction(
          feePayer.publicKey,
          destination,
          merchant.publicKey,
          mint,
          TOKEN_2022_PROGRAM_ID,
        ),
        createTransferCheckedInstruction(
          source,
          mint,
          destination,
          buyer.publicKey,
          42n,
          6,
          [],
          TOKEN_2022_PROGRAM_ID,
        ),
      ],
      0,
    )
    const decoded = decodeSolanaTransaction(Buffer.from(tx.serialize()).toString('base64'))
    expect(decoded.version).toBe(0)
    expect(decoded.feePayer).toBe(feePayer.publicKey.toBase58())
    expect(decoded.signers).toEqual([feePayer.publicKey.toBase58(), buyer.publicKey.toBase58()])
    expect(decoded.signatures).toEqual([null, null])
    expect(decoded.instructions.map((ix) => ix.kind)).toEqual([
      'computeBudget',
      'createAssociatedTokenAccount',
      'transferChecked',
    ])
    expect(decoded.instructions[1]).toMatchObject({ idempotent: false, owner: merchant.publicKey.toBase58() })
    expect(decoded.instructions[2]).toMatchObject({ amount: 42n, decimals: 6, mint: mint.toBase58() })

    expect(inspectSolanaTransaction({ decoded, signer: buyer.publicKey.toBase58(), chainId })).toEqual({
      account: `${chainId}:${buyer.publicKey.toBase58()}`,
      transfers: [
        {
          asset: `${chainId}/token:${mint.toBase58()}`,
          amount: 42n,
          decimals: 6,
          to: `${chainId}:${merchant.publicKey.toBase58()}`,
        },
      ],
    })
  })

  it('reports the token account as recipient when its owner is not derivable, and skips other senders', () => {
    const otherOwner = Keypair.generate()
    const destination = Keypair.generate().publicKey
    const tx = compile([
      createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(mint, buyer.publicKey),
        mint,
        destination,
        buyer.publicKey,
        5n,
        6,
      ),
      createTransferCheckedInstruction(
        getAssociatedTokenAddressSync(mint, otherOwner.publicKey),
        mint,
        destination,
        otherOwner.publicKey,
        7n,
        6,
      ),
    ])
    const decoded = decodeSolanaTransaction(tx.serialize())
    const { transfers } = inspectSolanaTransaction({ decoded, signer: buyer.publicKey.toBase58(), chainId })
    expect(transfers).toEqual([
      {
        asset: `${chainId}/token:${mint.toBase58()}`,
        amount: 5n,
        decimals: 6,
        to: `${chainId}:${destination.toBase58()}`,
      },
    ])
  })

  it('treats other token instructions that involve the signer as foreign', () => {
    const tx = compile([
      createApproveInstruction(
        getAssociatedTokenAddressSync(mint, buyer.publicKey),
        feePayer.publicKey,
        buyer.publicKey,
        1_000_000n,
      ),
    ])
    const decoded = decodeSolanaTransaction(tx.serialize())
    expect(decoded.instructions[0]?.kind).toBe('other')
    let error: unknown
    try {
      checkSolanaTransaction({ decoded, signer: buyer.publicKey.toBase58(), chainId })
    } catch (e) {
      error = e
    }
    expect(isPayError(error, 'action_rejected')).toBe(true)
  })

  it('rejects input that is not a canonical transaction', () => {
    const tx = compile([ComputeBudgetProgram.setComputeUnitLimit({ units: 1 })])
    const bytes = tx.serialize()
    for (const input of ['', '!!!', encodeBase64(bytes.subarray(0, 40))]) {
      let error: unknown
      try {
        decodeSolanaTransaction(input)
      } catch (e) {
        error = e
      }
      expect(isPayError(error, 'invalid_action')).toBe(true)
    }
  })
})

describe('public API of caipay/adapters/solana', () => {
  it('exports exactly these values', () => {
    expect(Object.keys(api).sort()).toEqual([
      'associatedTokenAddress',
      'associatedTokenProgramId',
      'checkSolanaTransaction',
      'computeBudgetProgramId',
      'decodeBase64',
      'decodeSolanaTransaction',
      'defaultMaxFeeLamports',
      'encodeBase64',
      'inspectSolanaTransaction',
      'isUserRejection',
      'memoProgramIds',
      'revokeSplMandate',
      'solanaInspector',
      'solanaMandateStatus',
      'solanaSignTransactionMethod',
      'solanaSignatureStatus',
      'solanaSigner',
      'solanaX402Builder',
      'token2022ProgramId',
      'tokenProgramId',
      'walletStandardChains',
    ])
  })
})

describe('decodeSolanaTransaction and the runtime’s sanitizer', () => {
  it('refuses a v0 instruction whose program id would load from a lookup table', () => {
    const table = new AddressLookupTableAccount({
      key: Keypair.generate().publicKey,
      state: {
        deactivationSlot: 2n ** 64n - 1n,
        lastExtendedSlot: 0,
        lastExtendedSlotStartIndex: 0,
        addresses: [merchant.publicKey],
      },
    })
    const ix = createTransferCheckedInstruction(
      getAssociatedTokenAddressSync(mint, buyer.publicKey),
      mint,
      merchant.publicKey,
      buyer.publicKey,
      1n,
      6,
    )
    const message = new TransactionMessage({
      payerKey: feePayer.publicKey,
      recentBlockhash: Keypair.generate().publicKey.toBase58(),
      instructions: [ix],
    }).compileToV0Message([table])
    expect(() => decodeSolanaTransaction(new VersionedTransaction(message).serialize())).not.toThrow()
    message.compiledInstructions[0]!.programIdIndex = message.staticAccountKeys.length
    const bytes = new VersionedTransaction(message).serialize()
    expect(() => decodeSolanaTransaction(bytes)).toThrowError(
      expect.objectContaining({ code: 'invalid_action' }),
    )
  })
})
