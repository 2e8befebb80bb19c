import { getAccount, getAssociatedTokenAddressSync, TokenAccountNotFoundError } from '@solana/spl-token'
import { Keypair, PublicKey } from '@solana/web3.js'
import {
  bytesEqual,
  decodeSolanaTransaction,
  maxFeeLamports,
  messageSigners,
  splitSolanaTransaction,
} from '../../../../protocol/solana/index.js'
import { fail, paramsError } from '../../errors.js'
import { enqueueJob } from '../../jobs/queue.js'
import { inSpan } from '../../metrics/tracing.js'
import {
  assertRelayable,
  type CooldownSubject,
  GasBudgetExhausted,
  PayerCoolingDown,
  type RelayGuardSettings,
  reservationRaised,
  reserveExecutorFee,
  reserveExecutorFeeOrRaise,
} from '../../payments/relayGuards.js'
import { armChargeJob, type MandateChargePayload } from '../../subscriptions/liveCharges.js'
import { optionTerms } from '../../subscriptions/mandates.js'
import type {
  AssetConfig,
  BuildContext,
  BuildResult,
  ChainDriver,
  ConfirmContext,
  ConfirmOutcome,
  ConfirmPlan,
  JsonValue,
  MandateDraft,
  MandateQuoteContext,
  OptionDraft,
  QuoteContext,
} from '../types.js'
import { type AttestationState, attestation, validAttestation } from './attestation.js'
import { type BuiltMessage, buildAction, resolveBuildActions } from './build.js'
import type { SolanaChain } from './chain.js'
import { solanaJobKinds } from './jobKinds.js'
import type { BroadcastPayload } from './jobs.js'
import { encodeBase58 } from './keys.js'
import { buildApproval, mandateDraft, mandateOptionKind, type SolanaMandateState } from './mandates.js'
import { createPushQuoter, transactionRequestTransaction } from './push.js'
import { type NewSolanaTransaction, recordAlong, recordTransaction } from './store.js'
import { buildTransfer, ed25519Key, validSignature } from './transaction.js'
import type { SolanaWatcher } from './watcher.js'

/** Live builds also keep the blockhash: the transaction lands only until it expires (builtUsable, verify). */
interface BuiltEntry extends BuiltMessage {
  blockhash: string
  lastValidBlockHeight: number
}

/** About four seconds of blocks: the least a transaction must have left to be accepted at confirm. */
const blockhashMarginBlocks = 10

interface SolanaOptionState {
  attestation?: AttestationState
  built?: BuiltEntry[]
  /** A subscription's mandate option: what the buyer's `ApproveChecked` delegates in all (mandates.ts). */
  total?: string
}

export interface SolanaDriverOptions {
  chain: SolanaChain
  /** The chain's watcher, shared with its jobs: confirm sends the recorded transaction through it. */
  watcher?: SolanaWatcher
  /** Seconds shown to the buyer as the expected time to a final status. */
  etaS?: number
  /** RPC trouble while quoting: the account then simply gets no option, but someone should hear of it. */
  onQuoteError?: (error: unknown, context: { account: string; asset: string }) => void
  /** Payer cool-downs and per-credential fee budgets (payments/relayGuards.ts); none when omitted. */
  guards?: RelayGuardSettings
}

/**
 * Live Solana. An option is one `build` action (preceded, for a wallet that also advertised an EVM
 * account, by a `personal_sign` attestation: the mixed-chain option). Fetch builds a fresh SPL
 * `transferChecked` to the service's collection account, fee paid and partially signed by the service;
 * confirm checks the wallet returned exactly that message with valid signatures, records it and
 * leaves the broadcast to a job (see jobs.ts).
 */
export function createSolanaDriver(options: SolanaDriverOptions): ChainDriver {
  const { chain } = options
  const { connection, service } = chain
  const etaS = options.etaS ?? 2
  const serviceKey = ed25519Key(service.publicKey.toBytes())
  const serviceBytes = service.publicKey.toBytes()

  async function buyerBalance(asset: AssetConfig, owner: PublicKey): Promise<bigint> {
    const mint = await chain.mintInfo(asset)
    const account = getAssociatedTokenAddressSync(mint.mint, owner, true, mint.programId)
    try {
      return (await getAccount(connection, account, undefined, mint.programId)).amount
    } catch (error) {
      if (error instanceof TokenAccountNotFoundError) return 0n
      throw error
    }
  }

  /** Whether the quoted account holds the first payment's amount (RPC trouble: no, and it is reported). */
  async function canPay(ctx: QuoteContext): Promise<boolean> {
    let owner: PublicKey
    try {
      owner = new PublicKey(ctx.account.address)
    } catch {
      return false
    }
    try {
      return (await buyerBalance(ctx.asset, owner)) >= ctx.tokenAmount
    } catch (error) {
      options.onQuoteError?.(error, { account: ctx.account.id, asset: ctx.asset.id })
      return false
    }
  }

  async function quoteMandate(ctx: MandateQuoteContext): Promise<MandateDraft[]> {
    return (await canPay(ctx)) ? [mandateDraft(chain, ctx, etaS)] : []
  }

  async function quote(ctx: QuoteContext): Promise<OptionDraft[]> {
    if (!(await canPay(ctx))) return []
    const drafts: OptionDraft[] = [{ kind: 'transfer', actions: [buildAction()], etaS }]
    const evm = ctx.accounts.find((a) => a.namespace === 'eip155')
    if (evm) {
      const attest = attestation(ctx, evm)
      drafts.push({
        kind: 'mixed',
        actions: [attest.action, buildAction()],
        etaS,
        state: { attestation: { ...attest.state } },
      })
    }
    return drafts
  }

  async function build(ctx: BuildContext, data: string): Promise<BuildResult> {
    const previous = optionState(ctx.option.state)
    const owner = new PublicKey(ctx.option.account.slice(ctx.option.account.lastIndexOf(':') + 1))
    const mint = await chain.mintInfo(ctx.asset)
    const { actions, built } = await resolveBuildActions({
      actions: ctx.option.actions,
      data,
      chainId: chain.caip2,
      transfer: async () => {
        if (previous.total !== undefined) {
          const approval = await buildApproval({ chain, mint, owner, total: BigInt(previous.total) })
          const { blockhash, lastValidBlockHeight } = approval
          return { transaction: approval.transaction, details: { blockhash, lastValidBlockHeight } }
        }
        const transfer = await buildTransfer({
          chain,
          mint,
          owner,
          recipient: service.publicKey,
          amount: ctx.option.tokenAmount,
          memo: `caipay:${ctx.payment.id}:${ctx.option.id}`,
        })
        const { blockhash, lastValidBlockHeight } = transfer
        return { transaction: transfer.transaction, details: { blockhash, lastValidBlockHeight } }
      },
    })
    // Build replaces the option's state: carry the attestation over.
    const state: SolanaOptionState = {
      ...(previous.attestation && { attestation: previous.attestation }),
      ...(previous.total !== undefined && { total: previous.total }),
      built,
    }
    return { actions, state: state as unknown as JsonValue }
  }

  async function builtUsable(ctx: BuildContext): Promise<boolean> {
    for (const entry of optionState(ctx.option.state).built ?? []) {
      try {
        if (!(await chain.sharedBlockhashValid(entry.blockhash))) return false
      } catch {
        // Unknown is not expired: keep what the wallet may already be signing; confirm checks again.
      }
    }
    return true
  }

  async function verify(ctx: ConfirmContext): Promise<void> {
    // The service pays the transaction's fee: not for a cooled-down payer, nor past the caller's budget.
    // A planned confirm (a FastPath: one statement) leaves it to the reservation that refuses in that
    // statement, or in `confirm`'s transaction when it plans none: the same verdicts, one read fewer.
    if (options.guards && !ctx.planned) {
      await assertRelayable(ctx.db, options.guards, {
        chainId: chain.caip2,
        subjects: payerSubjects(ctx.option.account),
        credentialId: ctx.credentialId,
      })
    }
    const state = optionState(ctx.option.state)
    if (state.attestation) {
      const index = ctx.actions.findIndex((a) => a.walletRpc.method === 'personal_sign')
      if (index === -1 || !(await validAttestation(state.attestation, ctx.results[index]!))) {
        throw paramsError(
          `results.${index}`,
          `results[${index}] is not a personal_sign signature of the attestation by ${state.attestation.evmAccount}`,
        )
      }
    }
    const built = state.built ?? []
    if (built.length === 0) fail('invalid_state', 'Fetch this option first: it has actions to build.')
    for (const entry of built) {
      const { index } = entry
      // The message must be the service's own bytes, so they need no decoding: only its signatures do.
      const signed = signedTransaction(ctx.results[index]!, index)
      const message = Buffer.from(entry.message, 'base64')
      const signers = messageSigners(message)
      if (!bytesEqual(signed.message, message) || signed.signatures.length !== signers.length) {
        throw paramsError(`results.${index}`, `results[${index}] is not the transaction the service built`)
      }
      signers.forEach((signer, i) => {
        const ours = bytesEqual(signer, serviceBytes)
        if (validSignature(ours ? serviceKey : ed25519Key(signer), message, signed.signatures[i]!)) return
        const who = ours ? 'the service' : encodeBase58(signer)
        throw paramsError(`results.${index}`, `results[${index}] lacks a valid signature of ${who}`)
      })
      // Checked last: it is the one check a wallet cannot fix by signing again, only by fetching again.
      // A blockhash with only a few blocks left would likely expire on the way to the chain, and the
      // payment would then fail instead of being fetched again.
      const [valid, height] = await Promise.all([
        chain.sharedBlockhashValid(entry.blockhash),
        chain.blockHeight(),
      ])
      if (!valid || height > entry.lastValidBlockHeight - blockhashMarginBlocks) {
        fail('quote_expired', 'The transaction expired before it was confirmed; fetch the option again.', {
          optionId: ctx.option.id,
          index,
        })
      }
    }
  }

  /** What confirm records, enqueues and sends for one built transaction of the option. */
  function confirmed(
    ctx: Omit<ConfirmContext, 'db' | 'afterCommit'>,
    entry: BuiltEntry,
    purpose: 'payment' | 'mandate' = 'payment',
  ) {
    const raw = ctx.results[entry.index]!
    const signature = encodeBase58(signedTransaction(raw, entry.index).signatures[0]!)
    const record: NewSolanaTransaction = {
      signature,
      paymentId: ctx.payment.id,
      purpose,
      chainId: chain.caip2,
      raw,
      blockhash: entry.blockhash,
      lastValidBlockHeight: entry.lastValidBlockHeight,
    }
    const job = {
      kind: solanaJobKinds.broadcast,
      payload: {
        signature,
        asset: ctx.option.asset,
        amount: ctx.option.tokenAmount.toString(),
        credentialId: ctx.credentialId,
      } satisfies BroadcastPayload,
    }
    // Sent as soon as it is committed, not when its job starts: the job then finds it sent and waits
    // (the watcher sends only what is recorded, so a rolled-back confirm sends nothing; a crash before
    // this leaves the send to the job).
    const { watcher } = options
    const send = watcher
      ? () => {
          const inFlight = {
            signature,
            raw,
            blockhash: entry.blockhash,
            lastValidBlockHeight: entry.lastValidBlockHeight,
            sentAt: undefined,
            error: null,
          }
          const attributes = {
            'caipay.payment_id': ctx.payment.id,
            'caipay.chain': chain.caip2,
            'caipay.purpose': purpose,
          }
          void inSpan('solana.send', attributes, () => watcher.send(inFlight)).catch(() => {})
        }
      : undefined
    return { record, job, send }
  }

  async function confirm(ctx: ConfirmContext): Promise<ConfirmOutcome> {
    const now = new Date()
    const { total } = optionState(ctx.option.state)
    for (const entry of optionState(ctx.option.state).built ?? []) {
      const terms = optionTerms(ctx.option.state)
      const mandate = total !== undefined && terms !== undefined
      const { record, job, send } = confirmed(ctx, entry, mandate ? 'mandate' : 'payment')
      // Its fee is the service's until it lands: reserved from the payer's and the caller's budgets (under
      // their locks, so confirms racing on several instances cannot overshoot them) before it is recorded.
      if (options.guards) {
        try {
          await reserveExecutorFee(ctx.db, options.guards, {
            chainId: chain.caip2,
            paymentId: ctx.payment.id,
            credentialId: ctx.credentialId,
            subjects: payerSubjects(ctx.option.account),
            amount: maxFeeLamports(decodeSolanaTransaction(record.raw)),
            now,
          })
        } catch (error) {
          if (error instanceof GasBudgetExhausted || error instanceof PayerCoolingDown)
            fail('rate_limited', error.message)
          throw error
        }
      }
      await recordTransaction(ctx.db, record, now)
      await enqueueJob(
        ctx.db,
        mandate
          ? {
              // The first period: the delegation lands, then the service charges the period under it.
              kind: solanaJobKinds.mandateCharge,
              paymentId: ctx.payment.id,
              payload: {
                subscriptionId: terms.subscriptionId,
                period: 0,
                at: new Date(ctx.now * 1000).toISOString(),
                mandate: {
                  buyer: ctx.option.account,
                  asset: ctx.option.asset,
                  amountPerPeriod: ctx.option.tokenAmount.toString(),
                  spender: terms.spender,
                  state: {
                    kind: mandateOptionKind,
                    approval: record.signature,
                    delegatedAmount: total,
                  } satisfies SolanaMandateState,
                },
              } satisfies MandateChargePayload,
              now,
            }
          : { ...job, paymentId: ctx.payment.id, now },
      )
      if (send && ctx.afterCommit) ctx.afterCommit(send)
    }
    return { status: 'processing' }
  }

  /**
   * One built transaction: its record, job and wake-up ride in the payment's move (gateway/confirm.ts).
   * Not for a mandate (its own job): `confirm` does that. With relay guards, the fee reservation rides
   * too, evaluated after the move (so under the payment's row lock, as in `confirm`) and refusing by
   * raising, which rolls the move, record and job back: `429 rate_limited` as `confirm` answers.
   */
  function planConfirm(ctx: Omit<ConfirmContext, 'db' | 'afterCommit'>): ConfirmPlan | undefined {
    const { built = [], total } = optionState(ctx.option.state)
    if (built.length !== 1 || total !== undefined) return undefined
    const now = new Date()
    const { record, job, send } = confirmed(ctx, built[0]!)
    const plan: ConfirmPlan = {
      job,
      inserts: [recordAlong(record, now)],
      ...(send ? { afterCommit: send } : {}),
    }
    const guards = options.guards
    if (!guards) return plan
    const reservation = {
      chainId: chain.caip2,
      paymentId: ctx.payment.id,
      subjects: payerSubjects(ctx.option.account),
    }
    const check = reserveExecutorFeeOrRaise(guards, {
      ...reservation,
      credentialId: ctx.credentialId,
      amount: maxFeeLamports(decodeSolanaTransaction(record.raw)),
      now,
    })
    return {
      ...plan,
      guard: {
        check,
        refused(error) {
          const refusal = reservationRaised(error, guards, reservation)
          if (refusal instanceof GasBudgetExhausted || refusal instanceof PayerCoolingDown)
            fail('rate_limited', refusal.message)
          if (refusal) throw refusal
        },
      },
    }
  }

  return {
    caip2: chain.caip2,
    namespace: 'solana',
    assets: chain.assets,
    newPushReference: () => Keypair.generate().publicKey.toBase58(),
    pushRequest: createPushQuoter(chain),
    transactionRequest: (ctx) => transactionRequestTransaction(chain, ctx),
    quote,
    quoteMandate,
    startMandateCharge: (db, charge) => armChargeJob(db, solanaJobKinds.mandateCharge, charge),
    build,
    builtUsable,
    verify,
    confirm,
    planConfirm,
  }
}

function optionState(state: unknown): SolanaOptionState {
  return state && typeof state === 'object' && !Array.isArray(state) ? (state as SolanaOptionState) : {}
}

/** A Solana payer is cooled down and budgeted by its address (the option's CAIP-10 account). */
function payerSubjects(account: string): CooldownSubject[] {
  return [{ subject: account.slice(account.lastIndexOf(':') + 1), kind: 'address' }]
}

function signedTransaction(result: string, index: number) {
  const signed = splitSolanaTransaction(result)
  if (!signed) throw paramsError(`results.${index}`, `results[${index}] is not a Solana transaction`)
  return signed
}
