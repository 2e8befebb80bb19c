/**
 * x402 `exact` on EVM chains: an EIP-3009 `TransferWithAuthorization` from the payer straight to `payTo`,
 * relayed by the chain's executor (which pays the gas). Verified with the gateway's own pieces (the
 * token's EIP-712 domain as the chain reports it, the payer's signature, the token's verdict in a
 * simulation) and settled by the gateway's relay job, marked `direct` (no settlement step: the money is
 * already at the merchant's destination).
 */
import { getAddress, type Hex, isAddress, isHex } from 'viem'
import { eip3009Abi } from '../chains/evm/abi.js'
import { type Authorization, authorizationHash, authorizationToJson } from '../chains/evm/authorization.js'
import type { EvmAsset } from '../chains/evm/chain.js'
import { type EvmChain, evmJobKinds, relayRefusal } from '../chains/evm/index.js'
import type { RelayPayload } from '../chains/evm/outcome.js'
import { payerSubjects } from '../chains/evm/payerCooldown.js'
import { classifyPayerSignature, verifyPayerSignature } from '../chains/evm/payerSignature.js'
import { enqueueJob } from '../jobs/queue.js'
import type { Verdict, X402Scheme } from './scheme.js'
import { type PaymentPayload, invalidReasons as reasons } from './wire.js'

/** x402's margin: an authorization this close to its `validBefore` would likely expire on the way. */
const validBeforeMarginS = 6n

export function evmExactScheme(chain: EvmChain): X402Scheme {
  return {
    network: chain.caip2,
    family: 'eip155:*',
    signers: [chain.executor.address],
    extra: undefined,
    key(payload, requirements) {
      const parsed = authorizationPayload(payload)
      const token = requirements.asset
      return parsed && isAddress(token)
        ? authorizationKey(chain, token, parsed.from, parsed.nonce)
        : undefined
    },
    async transaction(db, paymentId) {
      const row = await db
        .selectFrom('evm_transactions')
        .select('hash')
        .where('payment_id', '=', paymentId)
        .where('purpose', '=', 'relay')
        .where('status', 'in', ['sent', 'succeeded'])
        .orderBy('id', 'desc')
        .executeTakeFirst()
      return row?.hash
    },
    async verify(payload, requirements, now): Promise<Verdict> {
      const asset = chain.assets.find((a) => a.token.toLowerCase() === requirements.asset.toLowerCase())
      if (!asset || !isAddress(requirements.asset)) return { valid: false, reason: reasons.asset }
      const parsed = authorizationPayload(payload)
      if (!parsed) return { valid: false, reason: reasons.payload }
      const payer = parsed.from
      const refuse = (reason: string, message?: string): Verdict => ({
        valid: false,
        reason,
        payer,
        ...(message ? { message } : {}),
      })
      if (!isAddress(requirements.payTo)) return refuse(reasons.evmRecipient)
      const domain = await chain.domain(asset)
      if (!domain) return refuse(reasons.asset, `The EIP-712 domain of ${asset.id} is unknown.`)
      const extra = requirements.extra ?? {}
      if (typeof extra.name === 'string' && extra.name !== domain.name) return refuse(reasons.evmTokenName)
      if (typeof extra.version === 'string' && extra.version !== domain.version)
        return refuse(reasons.evmTokenVersion)
      const authorization: Authorization = {
        kind: 'TransferWithAuthorization',
        chainId: chain.chainId,
        token: asset.token,
        domain,
        ...parsed,
      }
      if (authorization.to !== getAddress(requirements.payTo)) return refuse(reasons.evmRecipient)
      if (authorization.value !== BigInt(requirements.amount)) return refuse(reasons.evmValue)
      const nowS = BigInt(Math.floor(now.getTime() / 1000))
      if (authorization.validBefore < nowS + validBeforeMarginS) return refuse(reasons.evmValidBefore)
      if (authorization.validAfter > nowS) return refuse(reasons.evmValidAfter)
      // Who signs for `from` is decided by its code now: its key, or the account (ERC-1271, ERC-6492).
      const signed = await classifyPayerSignature(chain, payer, parsed.signature)
      const verdict = await verifyPayerSignature(chain, payer, authorizationHash(authorization), signed)
      if (!verdict.valid) return refuse(reasons.evmSignature, verdict.reason)
      // An account still to be deployed is simulated with its deployment by the relay job itself.
      let worstCaseFee = 0n
      if (signed.kind !== 'undeployed') {
        const simulated = await relayRefusal(chain, authorization, signed.signature)
        if ('refusal' in simulated)
          return refuse(await diagnose(chain, asset, authorization), simulated.refusal)
        worstCaseFee = simulated.worstCaseFee
      }
      return {
        valid: true,
        payer,
        asset,
        amount: authorization.value,
        payTo: authorization.to,
        key: authorizationKey(chain, asset.token, payer, authorization.nonce),
        cooldownSubjects: await payerSubjects(chain, payer),
        worstCaseFee,
        async enqueue(db, paymentId, at, credentialId) {
          const job: RelayPayload = {
            chain: chain.caip2,
            asset: asset.id,
            authorization: authorizationToJson(authorization),
            signature: parsed.signature,
            direct: true,
            credentialId,
          }
          await enqueueJob(db, { kind: evmJobKinds.relay, paymentId, payload: job, now: at })
        },
      }
    },
  }
}

/** The token accepts an authorization once: its (token, payer, nonce) is what pays once. */
function authorizationKey(chain: EvmChain, token: string, payer: string, nonce: Hex): string {
  return `${chain.caip2}/${token}/${payer}/${nonce}`.toLowerCase()
}

/** The payload's authorization and signature, or undefined for any other shape (Permit2 among them). */
function authorizationPayload(payload: PaymentPayload):
  | (Pick<Authorization, 'from' | 'to' | 'value' | 'validAfter' | 'validBefore' | 'nonce'> & {
      signature: Hex
    })
  | undefined {
  const { authorization, signature } = payload.payload as { authorization?: unknown; signature?: unknown }
  if (!authorization || typeof authorization !== 'object' || !isHex(signature)) return undefined
  const a = authorization as Record<string, unknown>
  const uint = (v: unknown) => (typeof v === 'string' && /^\d{1,78}$/.test(v) ? BigInt(v) : undefined)
  const [value, validAfter, validBefore] = [uint(a.value), uint(a.validAfter), uint(a.validBefore)]
  if (typeof a.from !== 'string' || !isAddress(a.from) || typeof a.to !== 'string' || !isAddress(a.to))
    return undefined
  if (!isHex(a.nonce) || a.nonce.length !== 66) return undefined
  if (value === undefined || validAfter === undefined || validBefore === undefined) return undefined
  return {
    from: getAddress(a.from),
    to: getAddress(a.to),
    value,
    validAfter,
    validBefore,
    nonce: a.nonce,
    signature,
  }
}

/** Why the token refused: the facts it answers for by name (nonce used, balance short), else the simulation. */
async function diagnose(chain: EvmChain, asset: EvmAsset, authorization: Authorization): Promise<string> {
  const read = <T>(functionName: 'authorizationState' | 'balanceOf', args: readonly unknown[]) =>
    chain.publicClient
      .readContract({ address: asset.token, abi: eip3009Abi, functionName, args } as never)
      .then((r) => r as T)
      .catch(() => undefined)
  const [used, balance] = await Promise.all([
    read<boolean>('authorizationState', [authorization.from, authorization.nonce]),
    read<bigint>('balanceOf', [authorization.from]),
  ])
  if (used === true) return reasons.evmNonceUsed
  if (balance !== undefined && balance < authorization.value) return reasons.evmBalance
  return reasons.evmSimulation
}
