/**
 * caipay as an x402 facilitator: `verify`, `settle` and `supported` over the configured chains. Every
 * settled payload is a payment of the merchant whose crypto settlement destination is the requirement's
 * `payTo` (see boundMerchant), recorded before anything is sent and landed by the chain's own job, so it
 * has the payment's lifecycle, events and webhooks, and is settled once however often it is sent.
 */

import { createHash } from 'node:crypto'
import { sql } from 'kysely'
import { canonicalCaip } from '../../caip/caip.js'
import type { ServerConfig } from '../config.js'
import type { AuthContext } from '../context.js'
import { toAmount } from '../payments/assets.js'
import { createPayment } from '../payments/create.js'
import { loadPayment, transitionPayment } from '../payments/lifecycle.js'
import {
  GasBudgetExhausted,
  guardRefusal,
  PayerCoolingDown,
  relayGuardSettings,
  reserveExecutorFee,
  SendReverted,
} from '../payments/relayGuards.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import type { ValidPayment, X402Scheme } from './scheme.js'
import {
  type FacilitatorRequest,
  paymentIdentifier,
  invalidReasons as reasons,
  type SettleResponse,
  type SupportedResponse,
  type VerifyResponse,
} from './wire.js'
import './schema.js'

export interface X402FacilitatorOptions {
  db: Db
  config: ServerConfig
  schemes: readonly X402Scheme[]
  /**
   * The longest a settle waits for its transaction to land before answering `settlement_pending`
   * (default 30 s, under the 90 s an `HTTPFacilitatorClient` waits by default). A requirement's shorter
   * `maxTimeoutSeconds` shortens it.
   */
  settleWaitMs?: number
  /** How often a waiting settle reads its payment, ms (default 50). */
  pollMs?: number
}

export interface X402Facilitator {
  supported(): SupportedResponse
  verify(auth: AuthContext, request: FacilitatorRequest, context: CallContext): Promise<VerifyResponse>
  settle(auth: AuthContext, request: FacilitatorRequest, context: CallContext): Promise<SettleResponse>
}

export interface CallContext {
  now: Date
  /** `Merchant-Id` sent by the resource server: picks the merchant when several share a destination. */
  merchantId: string | undefined
  signal?: AbortSignal
}

type Refusal = { reason: string; message?: string; payer?: string }

export function createX402Facilitator(options: X402FacilitatorOptions): X402Facilitator {
  const { db, config } = options
  const schemes = new Map(options.schemes.map((s) => [s.network, s]))
  const settleWaitMs = options.settleWaitMs ?? 30_000
  const pollMs = options.pollMs ?? 50
  const guards = relayGuardSettings(config)

  /** The scheme for the request, or why there is none. */
  function schemeFor(request: FacilitatorRequest): X402Scheme | Refusal {
    const { paymentPayload: payload, paymentRequirements: requirements } = request
    if (requirements.scheme !== 'exact' || payload.accepted.scheme !== 'exact')
      return { reason: reasons.scheme }
    if (payload.accepted.network !== requirements.network) return { reason: reasons.networkMismatch }
    return schemes.get(requirements.network) ?? { reason: reasons.network }
  }

  /** A scheme's verdict plus the merchant the payment belongs to. */
  async function check(
    auth: AuthContext,
    request: FacilitatorRequest,
    context: CallContext,
  ): Promise<{ scheme: X402Scheme; payment: ValidPayment; merchantId: string } | Refusal> {
    const scheme = schemeFor(request)
    if (!('verify' in scheme)) return scheme
    const verdict = await scheme.verify(request.paymentPayload, request.paymentRequirements, context.now)
    if (!verdict.valid) return verdict
    // What the executor would pay for: refused before anything is recorded or sent.
    const refused = await guardRefusal(db, guards, {
      chainId: scheme.network,
      subjects: verdict.cooldownSubjects,
      credentialId: auth.credentialId,
      needed: verdict.worstCaseFee,
      now: context.now,
    })
    if (refused) return { reason: guardReason(refused), payer: verdict.payer, message: refused.message }
    const merchants = await boundMerchants(db, auth, scheme.network, verdict, context.merchantId)
    if (merchants.length !== 1) {
      return {
        reason: reasons.payToUnknown,
        payer: verdict.payer,
        message:
          merchants.length === 0
            ? `${verdict.payTo} is not a crypto settlement destination of ${verdict.asset.id} of any merchant of this key${context.merchantId ? ` (Merchant-Id ${context.merchantId})` : ''}.`
            : `${verdict.payTo} is the destination of several merchants of this key: send Merchant-Id.`,
      }
    }
    return { scheme, payment: verdict, merchantId: merchants[0]! }
  }

  /** Waits for the payment to be final, up to `waitMs`; then answers what it is. */
  async function outcome(
    scheme: X402Scheme,
    paymentId: string,
    payer: string,
    waitMs: number,
    signal: AbortSignal | undefined,
  ): Promise<SettleResponse> {
    const deadline = Date.now() + waitMs
    let payment: PaymentRow = await loadPayment(db, paymentId)
    while (payment.status === 'processing' && Date.now() < deadline && !signal?.aborted) {
      await new Promise((resolve) =>
        setTimeout(resolve, Math.min(pollMs, Math.max(0, deadline - Date.now()))),
      )
      payment = await loadPayment(db, paymentId)
    }
    const base = { network: scheme.network, payer, extra: { paymentId } }
    if (payment.status === 'succeeded') return { success: true, transaction: payment.tx_id ?? '', ...base }
    const transaction = (await scheme.transaction(db, paymentId)) ?? ''
    if (payment.status === 'processing') {
      // Still able to land: never reported failed. x402 resource servers settle once more on this answer.
      return {
        success: false,
        errorReason: reasons.pending,
        errorMessage: 'The transaction is not confirmed yet; settle the same payload again to follow it.',
        transaction,
        ...base,
      }
    }
    // Refused by a budget or a cool-down: before anything was signed (reached while queued), or at a fee
    // bump of the relay, which was then replaced by a cancellation (it never lands).
    const refusedBeforeSending =
      payment.failure_code === 'gas_budget_exhausted'
        ? reasons.gasBudgetExhausted
        : payment.failure_code === 'payer_gas_budget_exhausted'
          ? reasons.payerGasBudgetExhausted
          : payment.failure_code === 'payer_cooling_down'
            ? reasons.payerCoolingDown
            : undefined
    return {
      success: false,
      errorReason:
        refusedBeforeSending ?? (scheme.family === 'eip155:*' ? reasons.evmFailed : reasons.svmFailed),
      errorMessage: `The payment ${payment.status}${payment.failure_code ? ` (${payment.failure_code})` : ''}.`,
      transaction,
      ...base,
    }
  }

  /** A payment-identifier already used for another payload: refused before the payload is looked at. */
  async function identifierCheck(auth: AuthContext, request: FacilitatorRequest) {
    const identifier = paymentIdentifier(request.paymentPayload)
    const scheme = schemeFor(request)
    if (identifier === undefined || !('verify' in scheme)) return undefined
    const prior = await findSettled(db, auth, undefined, identifier)
    if (!prior) return undefined
    const { paymentPayload: payload, paymentRequirements: requirements } = request
    return replayConflict(
      prior,
      auth,
      scheme.key(payload, requirements),
      termsOf(requirements.network, requirements),
    )
  }

  return {
    supported() {
      const signers: Record<string, string[]> = {}
      for (const s of schemes.values())
        signers[s.family] = [...new Set([...(signers[s.family] ?? []), ...s.signers])]
      return {
        kinds: [...schemes.values()].map((s) => ({
          x402Version: 2 as const,
          scheme: 'exact' as const,
          network: s.network,
          ...(s.extra ? { extra: s.extra } : {}),
        })),
        extensions: ['payment-identifier'],
        signers,
      }
    },

    async verify(auth, request, context) {
      const checked = await identifierCheck(auth, request).then(
        (conflict) => conflict ?? check(auth, request, context),
      )
      if ('reason' in checked) {
        return {
          isValid: false,
          invalidReason: checked.reason,
          ...(checked.message ? { invalidMessage: checked.message } : {}),
          ...(checked.payer ? { payer: checked.payer } : {}),
        }
      }
      return { isValid: true, payer: checked.payment.payer }
    },

    async settle(auth, request, context) {
      const { paymentPayload: payload, paymentRequirements: requirements } = request
      const network = requirements.network
      const refused = (r: Refusal): SettleResponse => ({
        success: false,
        errorReason: r.reason,
        ...(r.message ? { errorMessage: r.message } : {}),
        transaction: '',
        network,
        payer: r.payer ?? '',
      })
      const waitMs = Math.min(settleWaitMs, requirements.maxTimeoutSeconds * 1000)
      const scheme = schemeFor(request)
      if (!('verify' in scheme)) return refused(scheme)
      const identifier = paymentIdentifier(payload)
      const key = scheme.key(payload, requirements)

      const terms = termsOf(network, requirements)

      // Settled before (a retry, a resource server polling a pending answer): that payment's answer.
      const prior = await findSettled(db, auth, key, identifier)
      if (prior) {
        const conflict = replayConflict(prior, auth, key, terms)
        if (conflict) return refused(conflict)
        return outcome(scheme, prior.payment_id, prior.payer, waitMs, context.signal)
      }

      const checked = await check(auth, request, context)
      if ('reason' in checked) return refused(checked)
      const { payment } = checked
      const committed: (() => void)[] = []
      const recorded = await inTransaction(db, async (trx) => {
        // One settle per key and per identifier at a time, whichever instance takes it.
        for (const lock of [payment.key, identifier && `${auth.partnerId}/${identifier}`]
          .filter(Boolean)
          .sort())
          await sql`SELECT pg_advisory_xact_lock(hashtextextended(${`caipay.x402:${lock}`}, 0))`.execute(trx)
        const again = await findSettled(trx, auth, payment.key, identifier)
        if (again) return replayConflict(again, auth, payment.key, terms) ?? again
        const paymentId = await recordPayment(trx, {
          auth,
          config,
          merchantId: checked.merchantId,
          network,
          payment,
          now: context.now,
          afterCommit: (fn) => committed.push(fn),
        })
        const row = {
          key: payment.key,
          payment_id: paymentId,
          partner_id: auth.partnerId,
          payment_identifier: identifier ?? null,
          terms,
          network,
          payer: payment.payer,
          payload: JSON.stringify(payload),
          created_at: context.now,
        }
        await trx.insertInto('x402_payments').values(row).execute()
        if (payment.signsAtSettle) {
          try {
            await reserveExecutorFee(trx, guards, {
              chainId: network,
              paymentId,
              credentialId: auth.credentialId,
              subjects: payment.cooldownSubjects,
              amount: payment.worstCaseFee,
              now: context.now,
            })
          } catch (error) {
            if (!isGuardRefusal(error)) throw error
            // Nothing recorded, nothing signed: the whole settle rolls back.
            throw new RefusedInTransaction({
              reason: guardReason(error),
              payer: payment.payer,
              message: error.message,
            })
          }
        }
        await payment.enqueue(trx, paymentId, context.now, auth.credentialId)
        return row
      }).catch((error) => {
        if (error instanceof RefusedInTransaction) return error.refusal
        throw error
      })
      for (const fn of committed) fn()
      if ('reason' in recorded) return refused(recorded)
      return outcome(scheme, recorded.payment_id, recorded.payer, waitMs, context.signal)
    },
  }
}

/** A refusal found inside the settle's database transaction: thrown to roll it back, then answered. */
class RefusedInTransaction extends Error {
  constructor(readonly refusal: Refusal) {
    super(refusal.message ?? refusal.reason)
  }
}

type GuardRefusal = PayerCoolingDown | GasBudgetExhausted | SendReverted

function isGuardRefusal(error: unknown): error is GuardRefusal {
  return (
    error instanceof PayerCoolingDown || error instanceof GasBudgetExhausted || error instanceof SendReverted
  )
}

/** The x402 reason for a relay guard's refusal. */
function guardReason(refusal: GuardRefusal): string {
  if (refusal instanceof GasBudgetExhausted)
    return refusal.scope === 'payer' ? reasons.payerGasBudgetExhausted : reasons.gasBudgetExhausted
  return refusal instanceof PayerCoolingDown ? reasons.payerCoolingDown : reasons.evmFailed
}

/**
 * Why a settled row must not answer this settle: another partner's payment, or a row found by its
 * payment-identifier (or by its key) whose payload or terms are not this one's. Only the identical
 * payload for the identical terms replays; anything else under a used identifier (another payer, amount,
 * nonce, network) would hand one payment's `success: true` to a payer who paid nothing.
 */
function replayConflict(
  prior: { partner_id: string; key: string; terms: string },
  auth: AuthContext,
  key: string | undefined,
  terms: string,
): Refusal | undefined {
  if (prior.partner_id !== auth.partnerId) return { reason: 'duplicate_settlement' }
  if (prior.key === key && prior.terms === terms) return undefined
  return prior.key === key
    ? {
        reason: reasons.identifierConflict,
        message: 'This payload was settled for other terms (network, asset, payTo or amount).',
      }
    : {
        reason: reasons.identifierConflict,
        message:
          'This payment-identifier was used with another payload; only the identical payload replays its answer.',
      }
}

/** What a payment-identifier promises to pay: a retry under the same id must pay the same. */
function termsOf(network: string, r: { asset: string; payTo: string; amount: string }): string {
  const terms = `${network}|${r.asset}|${r.payTo}|${r.amount}`
  return network.startsWith('eip155:') ? terms.toLowerCase() : terms
}

async function findSettled(
  db: Db,
  auth: AuthContext,
  key: string | undefined,
  identifier: string | undefined,
) {
  if (key === undefined && identifier === undefined) return undefined
  return db
    .selectFrom('x402_payments')
    .selectAll()
    .where((eb) =>
      eb.or([
        ...(key !== undefined ? [eb('key', '=', key)] : []),
        ...(identifier !== undefined
          ? [eb.and([eb('partner_id', '=', auth.partnerId), eb('payment_identifier', '=', identifier)])]
          : []),
      ]),
    )
    .orderBy('created_at')
    .executeTakeFirst()
}

/**
 * The merchants of the caller whose crypto settlement for the asset is `payTo`: a key settles only into
 * its own merchants' destinations, so it can neither spend the executor's gas paying strangers nor book
 * revenue to a merchant that does not receive it.
 */
async function boundMerchants(
  db: Db,
  auth: AuthContext,
  network: string,
  payment: ValidPayment,
  merchantId: string | undefined,
): Promise<string[]> {
  const destination = `${network}:${payment.payTo}`
  const rows = await db
    .selectFrom('merchants')
    .innerJoin('crypto_settlements', 'crypto_settlements.merchant_id', 'merchants.id')
    .select('merchants.id')
    .where('merchants.partner_id', '=', auth.partnerId)
    .where('merchants.mode', '=', auth.mode)
    .where('merchants.deleted_at', 'is', null)
    .where('crypto_settlements.asset_key', '=', canonicalCaip(payment.asset.id))
    .where(
      network.startsWith('eip155:')
        ? sql<boolean>`lower(crypto_settlements.destination) = ${destination.toLowerCase()}`
        : sql<boolean>`crypto_settlements.destination = ${destination}`,
    )
    .$if(merchantId !== undefined, (q) => q.where('merchants.id', '=', merchantId!))
    .orderBy('merchants.id')
    .execute()
  return [...new Set(rows.map((r) => r.id))]
}

/**
 * The payment in the merchant API: created (`payment.created`) in the asset itself and moved to
 * `processing` with the payer as buyer, in the caller's transaction. Its reference is `x402:` and the
 * start of the payload key's hash, the same for every settle of the payload.
 */
async function recordPayment(
  trx: Db,
  input: {
    auth: AuthContext
    config: ServerConfig
    merchantId: string
    network: string
    payment: ValidPayment
    now: Date
    afterCommit: (fn: () => void) => void
  },
): Promise<string> {
  const { auth, config, payment, now } = input
  const unit = `caip19/${payment.asset.id}` as const
  const value = payment.amount.toString()
  const digest = createHash('sha256').update(payment.key).digest('hex').slice(0, 30)
  const created = await createPayment(trx, {
    auth,
    merchant: { id: input.merchantId },
    body: { referenceId: `x402:${digest}`, amount: { unit, value } },
    config,
    now,
    afterCommit: input.afterCommit,
  })
  await transitionPayment(trx, {
    paymentId: created.paymentId,
    from: 'requires_action',
    to: 'processing',
    set: {
      buyer: `${input.network}:${payment.payer}`,
      option_amount: JSON.stringify(toAmount(unit, value, config)),
    },
    now,
  })
  return created.paymentId
}
