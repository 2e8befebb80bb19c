import { bytesEqual, type DecodedSolanaTransaction } from '../../protocol/solana/index.js'
import { PayError } from '../../src/errors/PayError.js'

// @solana/kit's signer interfaces, structurally: a kit signer fits them without caipay importing kit.
// Kit brands its transaction types (message bytes, lifetime), so the parameters are typed `never[]`:
// any kit signer is accepted, and caipay hands it a plain `KitTransaction`.

/** A kit `Transaction`: the message bytes and one signature slot per required signer. */
export interface KitTransaction {
  readonly messageBytes: Uint8Array
  readonly signatures: Readonly<Record<string, Uint8Array | null>>
}

/** A kit `TransactionPartialSigner` (`generateKeyPairSigner()`, `createKeyPairSignerFromBytes()`, ...). */
export interface KitTransactionPartialSigner {
  readonly address: string
  signTransactions(
    transactions: readonly never[],
    config?: { abortSignal?: AbortSignal },
  ): Promise<readonly Readonly<Record<string, Uint8Array>>[]>
}

/** A kit `TransactionModifyingSigner` (a wallet-standard account through kit's wallet bridge, ...). */
export interface KitTransactionModifyingSigner {
  readonly address: string
  modifyAndSignTransactions(
    transactions: readonly never[],
    config?: { abortSignal?: AbortSignal },
  ): Promise<readonly KitTransaction[]>
}

export type KitTransactionSigner = KitTransactionPartialSigner | KitTransactionModifyingSigner

/**
 * The signature a kit signer gives the transaction the guard decoded. A partial signer signs the message
 * bytes as they are; a modifying signer may return another message, which is refused (the service checks
 * the message byte for byte, and the guard read this one).
 */
export async function signWithKit(
  signer: KitTransactionSigner,
  decoded: DecodedSolanaTransaction,
  signal?: AbortSignal,
): Promise<Uint8Array> {
  const transaction: KitTransaction = {
    messageBytes: decoded.messageBytes.slice(),
    signatures: Object.fromEntries(decoded.signers.map((key, i) => [key, decoded.signatures[i] ?? null])),
  }
  const config = signal ? { abortSignal: signal } : {}
  const context = { address: signer.address }
  let signature: Uint8Array | null | undefined
  if ('modifyAndSignTransactions' in signer) {
    const [returned] = await signer.modifyAndSignTransactions([transaction as never], config)
    if (returned && !bytesEqual(returned.messageBytes, decoded.messageBytes)) {
      throw new PayError({
        code: 'action_rejected',
        message: 'The wallet changed the Solana transaction while signing.',
        context,
      })
    }
    signature = returned?.signatures[signer.address]
  } else {
    const [dictionary] = await signer.signTransactions([transaction as never], config)
    signature = dictionary?.[signer.address]
  }
  if (!(signature instanceof Uint8Array) || signature.length !== 64) {
    throw new PayError({
      code: 'invalid_response',
      message: 'The kit signer returned no signature for its address.',
      context,
    })
  }
  return signature
}
