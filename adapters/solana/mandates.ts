import {
  type Connection,
  PublicKey,
  TransactionInstruction,
  TransactionMessage,
  VersionedTransaction,
} from '@solana/web3.js'
import {
  associatedTokenAddress,
  type DecodedSolanaTransaction,
  decodeSolanaTransaction,
  revokeTag,
  token2022ProgramId,
  tokenProgramId,
} from '../../protocol/solana/index.js'
import type { InspectedMandate, MandateStatus, SignerRequest } from '../../src/actions/types.js'
import { parseAccountId, parseAssetId } from '../../src/caip/caip.js'
import { PayError } from '../../src/errors/PayError.js'
import { type SolanaNode, solanaSignatureStatus } from './signatureStatus.js'

/** The reads and the send a mandate needs from the wallet's own node: a web3.js Connection has them. */
export type SolanaMandateNode = SolanaNode &
  Pick<Connection, 'getAccountInfo' | 'getLatestBlockhash' | 'sendRawTransaction' | 'getSignatureStatus'>

const commitment = 'confirmed'

/** A token account's delegate and delegated amount (SPL layout; Token-2022 shares the first 165 bytes). */
function delegationOf(data: Uint8Array): { delegate: string | undefined; delegatedAmount: bigint } {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  const hasDelegate = view.getUint32(72, true) === 1
  return {
    delegate: hasDelegate ? new PublicKey(data.subarray(76, 108)).toBase58() : undefined,
    delegatedAmount: view.getBigUint64(121, true),
  }
}

/**
 * Reads from the wallet's own node what became of an SPL delegation the wallet signed (docs/exposure.md):
 * the token account still delegating to the mandate's spender a non-zero amount is `live`; otherwise the
 * signed transaction decides: landed is `ended` (revoked, replaced or drawn in full), proved never to
 * land is `expired` (solanaSignatureStatus's rule), and anything unproved stays `live`.
 */
export function solanaMandateStatus(
  node: SolanaMandateNode,
  address: string,
  inspect: (request: SignerRequest) => { mandate?: InspectedMandate },
): (request: SignerRequest, result: string) => Promise<MandateStatus> {
  const signatureStatus = solanaSignatureStatus(node, address)
  return async (request, result) => {
    const { mandate } = inspect(request)
    if (!mandate) return 'live'
    const grant = grantOf(decodeSolanaTransaction(result), address)
    const info = grant ? await node.getAccountInfo(new PublicKey(grant.source), { commitment }) : null
    const spender = parseAccountId(mandate.spender).address
    if (info) {
      const { delegate, delegatedAmount } = delegationOf(info.data)
      if (delegate === spender && delegatedAmount > 0n) return 'live'
    }
    const status = await signatureStatus(request, result)
    return status === 'spent' ? 'ended' : status === 'dead' ? 'expired' : 'live'
  }
}

function grantOf(decoded: DecodedSolanaTransaction, owner: string) {
  return decoded.instructions.find((ix) => ix.kind === 'approveChecked' && ix.owner === owner) as
    | { source: string; programId: string }
    | undefined
}

/**
 * Sends an SPL `Revoke` of the owner's token account for the mandate's mint, signed by the wallet's own
 * key and paid by it, and waits until its node confirms it. The account is the owner's associated token
 * account under whichever token program holds it.
 */
export async function revokeSplMandate(
  node: SolanaMandateNode,
  mandate: InspectedMandate,
  sign: (decoded: DecodedSolanaTransaction) => Promise<Uint8Array>,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<string> {
  if (mandate.kind !== 'splDelegate') {
    throw new PayError({
      code: 'invalid_action',
      message: 'Only an SPL delegation is revoked on Solana.',
      context: { kind: mandate.kind },
    })
  }
  const owner = parseAccountId(mandate.owner).address
  const mint = parseAssetId(mandate.asset).assetReference
  let source: string | undefined
  let programId: string | undefined
  for (const program of [tokenProgramId, token2022ProgramId]) {
    const candidate = associatedTokenAddress(owner, mint, program)
    const info = await node.getAccountInfo(new PublicKey(candidate), { commitment })
    if (info && info.owner.toBase58() === program) {
      source = candidate
      programId = program
      break
    }
  }
  if (!source || !programId) {
    throw new PayError({
      code: 'action_rejected',
      message: 'The wallet’s node shows no token account of the mandate’s mint to revoke.',
      context: { asset: mandate.asset, owner: mandate.owner },
    })
  }
  const { blockhash } = await node.getLatestBlockhash({ commitment })
  const message = new TransactionMessage({
    payerKey: new PublicKey(owner),
    recentBlockhash: blockhash,
    instructions: [
      new TransactionInstruction({
        programId: new PublicKey(programId),
        keys: [
          { pubkey: new PublicKey(source), isSigner: false, isWritable: true },
          { pubkey: new PublicKey(owner), isSigner: true, isWritable: false },
        ],
        data: Buffer.from([revokeTag]),
      }),
    ],
  }).compileToV0Message()
  const bytes = new VersionedTransaction(message).serialize()
  const decoded = decodeSolanaTransaction(bytes)
  const signed = bytes.slice()
  signed.set(await sign(decoded), decoded.signatureOffset(0))
  const signature = await node.sendRawTransaction(signed, { preflightCommitment: commitment })
  const deadline = Date.now() + (options.timeoutMs ?? 60_000)
  while (Date.now() < deadline) {
    if (options.signal?.aborted) break
    const status = (await (node as Pick<Connection, 'getSignatureStatus'>).getSignatureStatus(signature))
      .value
    if (status?.err) {
      throw new PayError({
        code: 'action_rejected',
        message: 'The revoke transaction failed on chain.',
        context: { signature, err: JSON.stringify(status.err) },
      })
    }
    if (status?.confirmationStatus === 'confirmed' || status?.confirmationStatus === 'finalized')
      return signature
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
  throw new PayError({
    code: 'action_in_doubt',
    message: 'The revoke transaction was sent but not seen confirmed; read the mandate’s status again.',
    context: { signature },
  })
}
