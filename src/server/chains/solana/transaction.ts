import { createPublicKey, type KeyObject, verify } from 'node:crypto'
import {
  createAssociatedTokenAccountIdempotentInstruction,
  createTransferCheckedInstruction,
  getAssociatedTokenAddressSync,
} from '@solana/spl-token'
import { type Keypair, PublicKey, Transaction, TransactionInstruction } from '@solana/web3.js'
import type { MintInfo, SolanaChain } from './chain.js'
import { encodeBase58 } from './keys.js'

export interface BuiltTransfer {
  transaction: Transaction
  /** The exact message bytes every signature covers. */
  message: Uint8Array
  /** Base58 fee-payer signature: the transaction id. */
  signature: string
  blockhash: string
  lastValidBlockHeight: number
}

const memoProgramId = new PublicKey('MemoSq4gqABAXKb96qnH8TysNcWxMyWCqXgDLGmfcHr')

/**
 * An SPL `transferChecked` of `amount` from `owner`'s associated token account to `recipient`'s,
 * creating the recipient's account first (idempotently) when it does not exist yet, plus a memo. The
 * service pays the fee and signs. The blockhash is the chain's shared one (`latestBlockhash`), returned
 * so the caller knows until when the transaction can land.
 *
 * The memo must be unique per transaction the service means to land: two transfers of the same amount
 * between the same accounts under one blockhash would otherwise be the same bytes, the same signature,
 * and the second would be taken for the first ("already processed") while moving nothing.
 */
export async function buildTransfer(input: {
  chain: SolanaChain
  mint: MintInfo
  owner: PublicKey
  recipient: PublicKey
  amount: bigint
  memo: string
  signers?: readonly Keypair[]
  /**
   * Who moves `owner`'s tokens: `owner` itself (default), or the delegate the owner approved (a
   * subscription's charge: the service, which signs anyway as the fee payer).
   */
  authority?: PublicKey
  /**
   * Solana Pay reference keys (docs/push-payments.md): read-only, non-signer keys of the transfer
   * instruction, as @solana/pay's createTransfer adds them, so the transaction is found by each.
   */
  references?: readonly PublicKey[]
}): Promise<BuiltTransfer> {
  const { chain, mint, owner, recipient, amount } = input
  const { connection, service } = chain
  const source = getAssociatedTokenAddressSync(mint.mint, owner, true, mint.programId)
  const destination = getAssociatedTokenAddressSync(mint.mint, recipient, true, mint.programId)
  const [latest, destinationAccount] = await Promise.all([
    chain.latestBlockhash(),
    connection.getAccountInfo(destination),
  ])
  const transaction = new Transaction({
    feePayer: service.publicKey,
    blockhash: latest.blockhash,
    lastValidBlockHeight: latest.lastValidBlockHeight,
  })
  if (!destinationAccount) {
    transaction.add(
      createAssociatedTokenAccountIdempotentInstruction(
        service.publicKey,
        destination,
        recipient,
        mint.mint,
        mint.programId,
      ),
    )
  }
  const transfer = createTransferCheckedInstruction(
    source,
    mint.mint,
    destination,
    input.authority ?? owner,
    amount,
    mint.decimals,
    [],
    mint.programId,
  )
  for (const reference of input.references ?? [])
    transfer.keys.push({ pubkey: reference, isSigner: false, isWritable: false })
  transaction.add(transfer)
  transaction.add(
    new TransactionInstruction({ programId: memoProgramId, keys: [], data: Buffer.from(input.memo) }),
  )
  transaction.partialSign(service, ...(input.signers ?? []))
  const signature = transaction.signatures[0]?.signature
  if (!signature) throw new Error('The service did not sign its own transaction.')
  return {
    transaction,
    message: transaction.serializeMessage(),
    signature: encodeBase58(signature),
    blockhash: latest.blockhash,
    lastValidBlockHeight: latest.lastValidBlockHeight,
  }
}

/** Ed25519 check of one Solana signature over the message bytes, by `signer` (base58) or its key. */
export function validSignature(
  signer: string | KeyObject,
  message: Uint8Array,
  signature: Uint8Array | null,
): boolean {
  if (signature?.length !== 64) return false
  return verify(null, message, typeof signer === 'string' ? ed25519Key(signer) : signer, signature)
}

/** The Ed25519 public key object of a Solana address (base58) or its 32 bytes. */
export function ed25519Key(address: string | Uint8Array): KeyObject {
  const bytes = typeof address === 'string' ? new PublicKey(address).toBytes() : address
  return createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: Buffer.from(bytes).toString('base64url') },
    format: 'jwk',
  })
}

export function serializeSigned(transaction: Transaction): Buffer {
  return transaction.serialize({ requireAllSignatures: true, verifySignatures: true })
}
