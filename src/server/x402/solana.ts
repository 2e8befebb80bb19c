/**
 * x402 `exact` on Solana: the payer's partially signed transaction, with the service as fee payer
 * (`extra.feePayer`). Decoded with the protocol's Solana decoder and held to an allow-list, as the wallet
 * side holds what it signs: compute-budget limit and price, exactly one `transferChecked` of the asset
 * from the payer to `payTo`'s associated token account, memos; the fee payer in no instruction at all,
 * so its signature pays the fee and authorizes nothing else. Settled by the gateway's broadcast job,
 * marked `direct` (the transfer pays the merchant's destination itself: no settlement step).
 */
import { createHash } from 'node:crypto'
import { VersionedTransaction } from '@solana/web3.js'
import {
  associatedTokenAddress,
  type DecodedSolanaTransaction,
  decodeSolanaTransaction,
  maxFeeLamports,
  type TransferCheckedInstruction,
} from '../../../protocol/solana/index.js'
import { parseAssetId } from '../../caip/caip.js'
import type { SolanaChain } from '../chains/solana/chain.js'
import { encodeBase58, solanaJobKinds } from '../chains/solana/index.js'
import type { BroadcastPayload } from '../chains/solana/jobs.js'
import { latestTransaction, recordTransaction } from '../chains/solana/store.js'
import { validSignature } from '../chains/solana/transaction.js'
import { enqueueJob } from '../jobs/queue.js'
import type { Verdict, X402Scheme } from './scheme.js'
import { type PaymentPayload, invalidReasons as reasons } from './wire.js'

/** The most the service pays in fees for one settlement, lamports (x402's own client asks ~10,000). */
const maxFeePaidLamports = 100_000n
/** How long a blockhash stays valid, in blocks: the recorded transaction's last chance to land. */
const blockhashLifetimeBlocks = 150

export function solanaExactScheme(chain: SolanaChain): X402Scheme {
  const feePayer = chain.service.publicKey.toBase58()
  return {
    network: chain.caip2,
    family: 'solana:*',
    signers: [feePayer],
    extra: { feePayer },
    key(payload) {
      const decoded = decode(payload)
      return decoded && messageKey(chain, decoded)
    },
    async transaction(db, paymentId) {
      return (await latestTransaction(db, paymentId, 'payment'))?.signature
    },
    async verify(payload, requirements): Promise<Verdict> {
      const asset = chain.assets.find((a) => parseAssetId(a.id).assetReference === requirements.asset)
      if (!asset) return { valid: false, reason: reasons.asset }
      if (requirements.extra?.feePayer !== feePayer) return { valid: false, reason: reasons.svmFeePayer }
      const decoded = decode(payload)
      if (!decoded) return { valid: false, reason: reasons.svmDecode }
      if (decoded.feePayer !== feePayer) return { valid: false, reason: reasons.svmFeePayer }
      if (decoded.usesLookupTables || decoded.usesDurableNonce)
        return { valid: false, reason: reasons.payload }
      const transfers = decoded.instructions.filter((ix) => ix.kind === 'transferChecked')
      const transfer = transfers[0] as TransferCheckedInstruction | undefined
      if (!transfer || transfers.length !== 1) return { valid: false, reason: reasons.svmNoTransfer }
      const payer = transfer.authority
      const refuse = (reason: string, message?: string): Verdict => ({
        valid: false,
        reason,
        payer,
        ...(message ? { message } : {}),
      })
      for (const ix of decoded.instructions) {
        if (ix.accounts.includes(feePayer)) return refuse(reasons.svmFeePayerUsed)
        const allowed =
          ix.kind === 'transferChecked' ||
          ix.kind === 'memo' ||
          (ix.kind === 'computeBudget' && (ix.setting === 'unitLimit' || ix.setting === 'unitPrice'))
        if (!allowed) return refuse(reasons.svmUnknownInstruction)
      }
      if (maxFeeLamports(decoded) > maxFeePaidLamports) return refuse(reasons.svmComputePrice)
      const mint = await chain.mintInfo(asset)
      if (transfer.mint !== mint.mint.toBase58() || transfer.programId !== mint.programId.toBase58())
        return refuse(reasons.svmMint)
      let destination: string
      try {
        destination = associatedTokenAddress(requirements.payTo, transfer.mint, transfer.programId)
      } catch {
        return refuse(reasons.svmRecipient)
      }
      if (transfer.destination !== destination) return refuse(reasons.svmRecipient)
      if (transfer.amount !== BigInt(requirements.amount) || transfer.decimals !== mint.decimals)
        return refuse(reasons.svmAmount)
      const unsigned = decoded.signers.findIndex(
        (signer, i) =>
          signer !== feePayer && !validSignature(signer, decoded.messageBytes, decoded.signatures[i] ?? null),
      )
      if (unsigned !== -1) return refuse(reasons.svmSignature)
      const [simulation, height] = await Promise.all([
        chain.connection.simulateTransaction(VersionedTransaction.deserialize(decoded.bytes), {
          sigVerify: false,
          replaceRecentBlockhash: false,
        }),
        chain.connection.getBlockHeight(),
      ])
      if (simulation.value.err) return refuse(reasons.svmSimulation, JSON.stringify(simulation.value.err))
      return {
        valid: true,
        payer,
        asset,
        amount: transfer.amount,
        payTo: requirements.payTo,
        key: messageKey(chain, decoded),
        cooldownSubjects: [{ subject: payer, kind: 'address' }],
        worstCaseFee: maxFeeLamports(decoded),
        signsAtSettle: true,
        async enqueue(db, paymentId, now, credentialId) {
          // Signed, recorded and committed before the broadcast job ever sends it (exactly once).
          const tx = VersionedTransaction.deserialize(decoded.bytes)
          tx.sign([chain.service])
          const signature = encodeBase58(tx.signatures[0]!)
          await recordTransaction(
            db,
            {
              signature,
              paymentId,
              purpose: 'payment',
              chainId: chain.caip2,
              raw: Buffer.from(tx.serialize()).toString('base64'),
              blockhash: decoded.recentBlockhash,
              // The payer chose the blockhash; it cannot outlive a full lifetime from now.
              lastValidBlockHeight: height + blockhashLifetimeBlocks,
            },
            now,
          )
          const job: BroadcastPayload = {
            signature,
            asset: asset.id,
            amount: transfer.amount.toString(),
            direct: true,
            credentialId,
          }
          await enqueueJob(db, { kind: solanaJobKinds.broadcast, paymentId, payload: job, now })
        },
      }
    },
  }
}

function decode(payload: PaymentPayload): DecodedSolanaTransaction | undefined {
  const transaction = payload.payload.transaction
  if (typeof transaction !== 'string') return undefined
  try {
    return decodeSolanaTransaction(transaction)
  } catch {
    return undefined
  }
}

/** The message is what every signature covers: the same message lands once (one signature, one id). */
function messageKey(chain: SolanaChain, decoded: DecodedSolanaTransaction): string {
  return `${chain.caip2}/${createHash('sha256').update(decoded.messageBytes).digest('base64url')}`
}
