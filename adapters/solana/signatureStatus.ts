import type { Connection } from '@solana/web3.js'
import { decodeSolanaTransaction } from '../../protocol/solana/index.js'
import type { SignatureStatus, SignerRequest } from '../../src/actions/types.js'

/** The reads the Solana signer needs from the wallet's own node: a web3.js Connection has them. */
export type SolanaNode = Pick<Connection, 'isBlockhashValid' | 'getSignatureStatus'>

// `confirmed` on both sides: a blockhash the confirmed bank knew at signing and no longer accepts has
// aged out, so every block that could still hold the transaction is already confirmed (and searched).
const commitment = 'confirmed'

/** Whether the wallet's node accepts `blockhash` now (at `confirmed`). */
export async function blockhashIsValid(node: SolanaNode, blockhash: string): Promise<boolean> {
  return (await node.isBlockhashValid(blockhash, { commitment })).value
}

/**
 * Reads from the wallet's own node what became of a signed transaction (`result`, base64; its first
 * signature is its id), docs/exposure.md: landed without error is `spent`; landed with an error is
 * `dead` (its signature is used up, it moved nothing); not found is `dead` only when the blockhash,
 * read first, is no longer valid and the id is the wallet's own signature (`address` pays the fee).
 * Another fee payer can sign the same message again under a new id, so not finding its id proves
 * nothing: `live`.
 */
export function solanaSignatureStatus(
  node: SolanaNode,
  address: string,
): (request: SignerRequest, result: string) => Promise<SignatureStatus> {
  return async (_request, result) => {
    const signed = decodeSolanaTransaction(result)
    const id = signed.signatures[0]
    if (!id) return 'live'
    // The blockhash first: once it is invalid, a status read after it is final.
    const expired = !(await blockhashIsValid(node, signed.recentBlockhash))
    const status = (await node.getSignatureStatus(base58(id), { searchTransactionHistory: true })).value
    if (status) return status.err === null ? 'spent' : 'dead'
    return expired && signed.signers[0] === address ? 'dead' : 'live'
  }
}

const alphabet = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz'

function base58(bytes: Uint8Array): string {
  let value = 0n
  for (const byte of bytes) value = value * 256n + BigInt(byte)
  let text = ''
  while (value > 0n) {
    text = alphabet[Number(value % 58n)] + text
    value /= 58n
  }
  for (const byte of bytes) {
    if (byte !== 0) break
    text = `1${text}`
  }
  return text
}
