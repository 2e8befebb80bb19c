import {
  Keypair,
  PublicKey,
  SystemProgram,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import { describe, expect, it } from 'vitest'
import { type Random, seededRandom } from '../../test/differential/random.js'
import { decodeSolanaTransaction, messageSigners, splitSolanaTransaction } from './decodeSolanaTransaction.js'

/** A signed transaction of 1-3 signers and a few instructions, legacy or v0, as web3.js writes it. */
function generated(random: Random): Uint8Array {
  const signers = Array.from({ length: 1 + random.int(3) }, () => Keypair.generate())
  // Transfers from some signers, then a memo every signer signs (so each is a required signer).
  const instructions = [
    ...Array.from({ length: random.int(3) }, (_, i) =>
      SystemProgram.transfer({
        fromPubkey: signers[i % signers.length]!.publicKey,
        toPubkey: Keypair.generate().publicKey,
        lamports: 1 + random.int(1e6),
      }),
    ),
    new TransactionInstruction({
      programId: new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr'),
      keys: signers.map((s) => ({ pubkey: s.publicKey, isSigner: true, isWritable: false })),
      data: Buffer.from(`memo ${random.int(1e9)}`),
    }),
  ]
  const message = new TransactionMessage({
    payerKey: signers[0]!.publicKey,
    recentBlockhash: Keypair.generate().publicKey.toBase58(),
    instructions,
  })
  const tx = new VersionedTransaction(
    random.int(2) === 0 ? message.compileToLegacyMessage() : message.compileToV0Message(),
  )
  tx.sign(signers)
  return tx.serialize()
}

/**
 * What the runtime reads (web3.js's decoder, held to canonical bytes as a validator's is, and as
 * decodeSolanaTransaction holds it: web3.js reads a message cut short as if it ended in zeros):
 * signatures, message bytes, required signers.
 */
function asRuntimeReads(bytes: Uint8Array) {
  try {
    const tx = VersionedTransaction.deserialize(bytes)
    const required = tx.message.header.numRequiredSignatures
    if (tx.signatures.length !== required) return undefined
    const wireMessage = bytes.subarray(bytes.length - tx.message.serialize().length)
    if (Buffer.compare(Buffer.from(tx.message.serialize()), Buffer.from(wireMessage)) !== 0) return undefined
    if (bytes.length !== 1 + required * 64 + wireMessage.length) return undefined
    return {
      signatures: tx.signatures.map((s) => Buffer.from(s).toString('hex')),
      message: Buffer.from(tx.message.serialize()).toString('hex'),
      signers: tx.message.staticAccountKeys.slice(0, required).map((k) => k.toBase58()),
    }
  } catch {
    return undefined
  }
}

function asSplitReads(bytes: Uint8Array) {
  const split = splitSolanaTransaction(bytes)
  if (!split) return undefined
  return {
    signatures: split.signatures.map((s) => Buffer.from(s).toString('hex')),
    message: Buffer.from(split.message).toString('hex'),
    signers: messageSigners(split.message).map((k) => new PublicKey(k).toBase58()),
  }
}

describe('splitSolanaTransaction and messageSigners, against web3.js', () => {
  it('read what the runtime reads from every transaction it writes, as bytes and as base64', () => {
    const random = seededRandom(1729)
    for (let i = 0; i < 60; i++) {
      const bytes = generated(random)
      expect(asSplitReads(bytes)).toEqual(asRuntimeReads(bytes))
      expect(splitSolanaTransaction(Buffer.from(bytes).toString('base64'))?.message).toEqual(
        splitSolanaTransaction(bytes)?.message,
      )
    }
  })

  it('never read other signatures or another message than the runtime from mutated bytes', () => {
    const random = seededRandom(4242)
    let judged = 0
    for (let i = 0; i < 400; i++) {
      const bytes = Uint8Array.from(generated(random))
      const mutant =
        random.int(2) === 0
          ? bytes.subarray(0, random.int(bytes.length))
          : bytes.map((b, j) => (j === random.int(bytes.length) ? (b + 1 + random.int(255)) % 256 : b))
      const runtime = asRuntimeReads(mutant)
      if (!runtime) continue
      judged += 1
      // Where the runtime reads a transaction, the split reads the same one (the message is then compared
      // byte for byte with the service's own, so a layout the runtime refuses cannot pass either).
      expect(asSplitReads(mutant)).toEqual(runtime)
    }
    expect(judged).toBeGreaterThan(100)
  })
})

/** What web3.js reads from a transaction (held to canonical bytes), as decodeSolanaTransaction reports it. */
function asWeb3Decodes(bytes: Uint8Array) {
  const reads = asRuntimeReads(bytes)
  if (!reads) return undefined
  const { message } = VersionedTransaction.deserialize(bytes)
  const keys = message.staticAccountKeys.map((k) => k.toBase58())
  if (message.compiledInstructions.some((ix) => ix.programIdIndex >= keys.length)) return undefined
  return {
    version: message.version,
    signers: reads.signers,
    recentBlockhash: message.recentBlockhash,
    instructions: message.compiledInstructions.map((ix) => ({
      programId: keys[ix.programIdIndex],
      accounts: ix.accountKeyIndexes.map((i) => keys[i]),
      data: Buffer.from(ix.data).toString('hex'),
    })),
    usesLookupTables: message.version === 0 && message.addressTableLookups.length > 0,
  }
}

function asDecoded(bytes: Uint8Array) {
  try {
    const decoded = decodeSolanaTransaction(bytes)
    return {
      version: decoded.version,
      signers: decoded.signers,
      recentBlockhash: decoded.recentBlockhash,
      instructions: decoded.instructions.map((ix) => ({
        programId: ix.programId,
        accounts: ix.accounts,
        data: Buffer.from(ix.data).toString('hex'),
      })),
      usesLookupTables: decoded.usesLookupTables,
    }
  } catch {
    return undefined
  }
}

describe('decodeSolanaTransaction (byte-level, no web3.js), against web3.js', () => {
  it('reads every transaction web3.js writes, and every mutant, as web3.js does; refuses what it cannot read canonically', () => {
    const random = seededRandom(7730)
    let read = 0
    for (let i = 0; i < 400; i++) {
      const bytes = Uint8Array.from(generated(random))
      const mutant =
        i % 4 === 0
          ? bytes
          : random.int(2) === 0
            ? bytes.subarray(0, random.int(bytes.length))
            : bytes.map((b, j) => (j === random.int(bytes.length) ? (b + 1 + random.int(255)) % 256 : b))
      const expected = asWeb3Decodes(mutant)
      expect(asDecoded(mutant)).toEqual(expected)
      if (expected) read++
    }
    expect(read).toBeGreaterThan(100)
  })
})
