import {
  associatedTokenAddress,
  type DecodedSolanaTransaction,
  decodeSolanaTransaction,
  revokeTag,
  token2022ProgramId,
  tokenProgramId,
} from '../../protocol/solana/index.js'
import type { InspectedMandate, MandateStatus, SignerRequest } from '../../src/actions/types.js'
import { decodeBase58, encodeBase58 } from '../../src/caip/base58.js'
import { parseAccountId, parseAssetId } from '../../src/caip/caip.js'
import { PayError } from '../../src/errors/PayError.js'
import { readsFromConnection, type SolanaNode, type SolanaReads, type SolanaSendingNode } from './node.js'
import { signatureStatusFrom } from './signatureStatus.js'

// The mandates a Solana key granted, read and revoked through the wallet's own node with no Solana SDK:
// caipay/adapters/solana-kit has them (a kit `Rpc`), caipay/adapters/solana too (a web3.js Connection).

/** The reads and the send a mandate needs from the wallet's own node: a web3.js Connection has them. */
export type SolanaMandateNode = SolanaNode & Required<Pick<SolanaNode, 'getAccountInfo'>> & SolanaSendingNode

/** What a node offers mandates: the signer's reads with account data, a blockhash and a send. */
export type MandateReads = SolanaReads &
  Required<Pick<SolanaReads, 'accountInfo' | 'latestBlockhash' | 'send'>>

export const canRevoke = (reads: SolanaReads): reads is MandateReads =>
  !!(reads.accountInfo && reads.latestBlockhash && reads.send)

/** A token account's delegate and delegated amount (SPL layout; Token-2022 shares the first 165 bytes). */
function delegationOf(data: Uint8Array): { delegate: string | undefined; delegatedAmount: bigint } {
  const view = new DataView(data.buffer, data.byteOffset, data.byteLength)
  const hasDelegate = view.getUint32(72, true) === 1
  return {
    delegate: hasDelegate ? encodeBase58(data.subarray(76, 108)) : undefined,
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
  return mandateStatusFrom(readsFromConnection(node) as MandateReads, address, inspect)
}

export function mandateStatusFrom(
  node: Pick<SolanaReads, 'blockhashIsValid' | 'signatureStatus'> & Pick<MandateReads, 'accountInfo'>,
  address: string,
  inspect: (request: SignerRequest) => { mandate?: InspectedMandate },
): (request: SignerRequest, result: string) => Promise<MandateStatus> {
  const signatureStatus = signatureStatusFrom(node, address)
  return async (request, result) => {
    const { mandate } = inspect(request)
    if (!mandate) return 'live'
    const grant = grantOf(decodeSolanaTransaction(result), address)
    const info = grant ? await node.accountInfo(grant.source) : null
    if (info) {
      const { delegate, delegatedAmount } = delegationOf(info.data)
      if (delegate === parseAccountId(mandate.spender).address && delegatedAmount > 0n) return 'live'
    }
    const status = await signatureStatus(request, result)
    return status === 'spent' ? 'ended' : status === 'dead' ? 'expired' : 'live'
  }
}

function grantOf(decoded: DecodedSolanaTransaction, owner: string) {
  return decoded.instructions.find((ix) => ix.kind === 'approveChecked' && ix.owner === owner) as
    | { source: string }
    | undefined
}

/**
 * Sends an SPL `Revoke` of the owner's token account for the mandate's mint, signed by the wallet's own
 * key and paid by it, and waits until its node confirms it. The account is the owner's associated token
 * account under whichever token program holds it.
 */
export function revokeSplMandate(
  node: SolanaMandateNode,
  mandate: InspectedMandate,
  sign: (decoded: DecodedSolanaTransaction) => Promise<Uint8Array>,
  options: { signal?: AbortSignal; timeoutMs?: number } = {},
): Promise<string> {
  return revokeFrom(readsFromConnection(node) as MandateReads, mandate, sign, options)
}

export async function revokeFrom(
  node: MandateReads,
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
    if ((await node.accountInfo(candidate))?.owner === program) {
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
  const bytes = revokeTransaction(owner, source, programId, await node.latestBlockhash())
  const decoded = decodeSolanaTransaction(bytes)
  const signed = bytes.slice()
  signed.set(await sign(decoded), decoded.signatureOffset(0))
  const signature = await node.send(signed)
  const deadline = Date.now() + (options.timeoutMs ?? 60_000)
  while (Date.now() < deadline) {
    if (options.signal?.aborted) break
    const status = await node.signatureStatus(signature)
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

/**
 * The unsigned v0 transaction of one SPL `Revoke` (`source`'s delegation, the owner signing and paying):
 * its one signature slot zero, its accounts in the runtime's order (the signer, the writable account,
 * the program).
 */
function revokeTransaction(owner: string, source: string, programId: string, blockhash: string): Uint8Array {
  const key = (address: string) => [...decodeBase58(address)!]
  // biome-ignore format: the message laid out byte by byte
  const message = [
    0x80, 1, 0, 1, // v0; one signer (writable), no read-only signer, one read-only account
    3, ...key(owner), ...key(source), ...key(programId),
    ...key(blockhash),
    1, 2, 2, 1, 0, 1, revokeTag, // one instruction: program #2, accounts [source, owner], data [Revoke]
    0, // no address lookup table
  ]
  return new Uint8Array([1, ...new Uint8Array(64), ...message])
}
