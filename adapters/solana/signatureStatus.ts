import { decodeSolanaTransaction } from '../../protocol/solana/index.js'
import type { SignatureStatus, SignerRequest } from '../../src/actions/types.js'
import { encodeBase58 } from '../../src/caip/base58.js'
import { readsFromConnection, type SolanaNode, type SolanaReads } from './node.js'

export type { SolanaNode } from './node.js'

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
  return signatureStatusFrom(readsFromConnection(node), address)
}

export function signatureStatusFrom(
  node: SolanaReads,
  address: string,
): (request: SignerRequest, result: string) => Promise<SignatureStatus> {
  return async (_request, result) => {
    const signed = decodeSolanaTransaction(result)
    const id = signed.signatures[0]
    if (!id) return 'live'
    // The blockhash first: once it is invalid, a status read after it is final.
    const expired = !(await node.blockhashIsValid(signed.recentBlockhash))
    const status = await node.signatureStatus(encodeBase58(id))
    if (status) return status.err === null ? 'spent' : 'dead'
    return expired && signed.signers[0] === address ? 'dead' : 'live'
  }
}
