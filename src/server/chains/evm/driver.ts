import { type Address, getAddress, type Hash, type Hex } from 'viem'
import { decodePermit2TypedData, permit2Hash } from '../../../../protocol/evm/index.js'
import { fail, paramsError } from '../../errors.js'
import { enqueueJob } from '../../jobs/queue.js'
import {
  assertRelayable,
  type CooldownSubject,
  type RelayGuardSettings,
  relayGuardOrRaise,
  relayGuardRaised,
} from '../../payments/relayGuards.js'
import { armChargeJob } from '../../subscriptions/liveCharges.js'
import type { ChainDriver, ConfirmContext, ConfirmOutcome, JsonValue } from '../types.js'
import {
  type Authorization,
  authorizationFromParams,
  authorizationHash,
  authorizationHashOfKnownShape,
  authorizationToJson,
} from './authorization.js'
import type { EvmChain } from './chain.js'
import { type Permit2Collection, permit2ToJson } from './collection.js'
import { confirmMandate, mandateChargeKind, mandateKind, quoteEvmMandate, verifyMandate } from './mandate.js'
import { evmJobKinds, type RelayPayload, type VerifyTransferPayload } from './outcome.js'
import { subjectsOf } from './payerCooldown.js'
import { classifyByCode, verifyPayerSignature } from './payerSignature.js'
import { createEvmPushQuoter } from './push.js'
import { type QuoteSettings, quoteEvm } from './quote.js'
import { same } from './transfers.js'

const hash32 = /^0x[0-9a-fA-F]{64}$/

/** The live driver of one EVM chain (see chains/types.ts for the contract with the gateway). */
export function createEvmDriver(
  chain: EvmChain,
  settings: QuoteSettings,
  guards: RelayGuardSettings,
  /**
   * config.fastPaths (fastPath.ts): a key's signature at confirm is recovered by the node; the offered
   * authorization is read once per confirm (verify, then the relay's payload) and hashed without viem's
   * generic typed-data walk (authorizationHashOfKnownShape); a planned confirm's relay guard checked in
   * the statement that moves the payment instead of read at verify (guardInStatement).
   */
  fastPaths = false,
): ChainDriver {
  const keyOnNode = { keyOnNode: fastPaths }
  const offered = fastPaths ? offeredOnce(chain) : (ctx: OfferedContext) => offeredAuthorization(chain, ctx)
  const hashOf = fastPaths ? authorizationHashOfKnownShape : authorizationHash
  /**
   * A gasless payment for a cooled-down payer, or past the caller's budget: `429 rate_limited`. Else
   * what the payer's signature is: the payer's code, read once, decides both (its code hash is a
   * cool-down subject; code or none decides who checks the signature).
   */
  const relayable = async (ctx: ConfirmContext, payer: Address, signature: Hex) => {
    const code = await chain.publicClient.getCode({ address: payer })
    const subjects = subjectsOf(payer, code)
    // Planned (one statement, fast paths on): the guard rides in the statement that moves the payment
    // (planConfirm), so its read is not a round trip of its own.
    if (fastPaths && ctx.planned) guardedInStatement.set(ctx.option, subjects)
    else
      await assertRelayable(ctx.db, guards, {
        chainId: chain.caip2,
        subjects,
        credentialId: ctx.credentialId,
      })
    return classifyByCode(code, signature)
  }
  /** The payer's cool-down subjects verify left to the plan, per option as this confirm holds it. */
  const guardedInStatement = new WeakMap<ConfirmContext['option'], readonly CooldownSubject[]>()
  /** The relay guard in the confirm's statement: 429 rate_limited with guardRefusal's words, as verify's. */
  const guardInStatement = (ctx: OfferedContext) => {
    const subjects = guardedInStatement.get(ctx.option)
    if (!subjects) return undefined
    const input = { chainId: chain.caip2, subjects, credentialId: ctx.credentialId }
    const { check, arguments: relayGuardArguments } = relayGuardOrRaise(guards, { ...input, now: new Date() })
    return {
      check,
      relayGuardArguments,
      refused(error: unknown) {
        const refusal = relayGuardRaised(error, guards, input)
        if (refusal) fail('rate_limited', refusal.message)
      },
    }
  }

  return {
    caip2: chain.caip2,
    namespace: 'eip155',
    assets: chain.assets,
    quote: (ctx) => quoteEvm(chain, settings, ctx),
    quoteMandate: (ctx) => quoteEvmMandate(chain, settings, ctx),
    startMandateCharge: (db, charge) => armChargeJob(db, mandateChargeKind, charge),
    pushRequest: createEvmPushQuoter(chain, settings.db, settings.log),

    async verify(ctx) {
      if (ctx.option.kind === mandateKind) return verifyMandate(chain, ctx)
      if (ctx.option.kind === 'permit2') {
        const { index, permit, hash } = offeredPermit(chain, ctx)
        const signed = await relayable(ctx, permit.owner, ctx.results[index] as Hex)
        const verdict =
          signed.kind === 'undeployed'
            ? { valid: false as const, reason: 'Permit2 cannot deploy an ERC-6492 account; deploy it first' }
            : await verifyPayerSignature(chain, permit.owner, hash, signed, keyOnNode)
        if (!verdict.valid) {
          throw paramsError(
            `results.${index}`,
            `results[${index}] is not ${permit.owner}'s signature of the Permit2 transfer this option offered: ${verdict.reason}`,
          )
        }
        return
      }
      if (ctx.option.kind === 'eip3009') {
        const { index, authorization } = offered(ctx)
        // Checked against the message stored with the option, never against anything the wallet sent back:
        // a signature over other typed data (amount, token, payee changed) does not verify. Who checks it
        // depends on the payer's code now: its key (no code) or the account itself (ERC-1271).
        const signed = await relayable(ctx, authorization.from, ctx.results[index] as Hex)
        const verdict = await verifyPayerSignature(
          chain,
          authorization.from,
          hashOf(authorization),
          signed,
          keyOnNode,
        )
        if (!verdict.valid) {
          throw paramsError(
            `results.${index}`,
            `results[${index}] is not ${authorization.from}'s signature of the authorization this option offered: ${verdict.reason}`,
          )
        }
        return
      }
      const { index, hash } = submittedHash(ctx)
      const claimed = await ctx.db
        .selectFrom('evm_direct_claims')
        .select('payment_id')
        .where('chain_id', '=', chain.caip2)
        .where('tx_hash', '=', hash)
        .executeTakeFirst()
      if (claimed) throw alreadyUsed(index)
    },

    async confirm(ctx): Promise<ConfirmOutcome> {
      if (ctx.option.kind === mandateKind) return confirmMandate(chain, ctx)
      if (ctx.option.kind === 'permit2' || ctx.option.kind === 'eip3009') {
        const payload = relayPayload(chain, ctx, offered)
        await enqueueJob(ctx.db, { kind: evmJobKinds.relay, paymentId: ctx.payment.id, payload })
        return { status: 'processing' }
      }
      const { index, hash } = submittedHash(ctx)
      // One transaction pays one payment: the claim commits with the move to processing, or neither does.
      const claim = await ctx.db
        .insertInto('evm_direct_claims')
        .values({ chain_id: chain.caip2, tx_hash: hash, payment_id: ctx.payment.id, created_at: new Date() })
        .onConflict((oc) => oc.columns(['chain_id', 'tx_hash']).doNothing())
        .returning('payment_id')
        .executeTakeFirst()
      if (!claim) throw alreadyUsed(index)
      const state = ctx.option.state as { destination: Address; notBefore: number }
      const payload: VerifyTransferPayload = {
        chain: chain.caip2,
        asset: ctx.asset.id,
        hash,
        from: getAddress(ctx.option.account.split(':')[2]!),
        to: state.destination,
        value: ctx.option.tokenAmount.toString(),
        notBefore: state.notBefore,
      }
      await enqueueJob(ctx.db, { kind: evmJobKinds.verifyTransfer, paymentId: ctx.payment.id, payload })
      return { status: 'processing' }
    },

    // A gasless confirm only enqueues its relay; a direct one also claims its hash (its own statement).
    planConfirm(ctx) {
      if (ctx.option.kind !== 'permit2' && ctx.option.kind !== 'eip3009') return undefined
      const guard = guardInStatement(ctx)
      return {
        job: { kind: evmJobKinds.relay, payload: relayPayload(chain, ctx, offered) as unknown as JsonValue },
        ...(guard ? { guard } : {}),
      }
    },
  }
}

/** What the relay job collects: the permit or the authorization offered, with the wallet's signature. */
function relayPayload(
  chain: EvmChain,
  ctx: OfferedContext,
  readAuthorization: (ctx: OfferedContext) => { index: number; authorization: Authorization },
): RelayPayload {
  const collection =
    ctx.option.kind === 'permit2'
      ? (({ index, permit }) => ({ index, permit2: permit2ToJson(permit) }))(offeredPermit(chain, ctx))
      : (({ index, authorization }) => ({ index, authorization: authorizationToJson(authorization) }))(
          readAuthorization(ctx),
        )
  const { index, ...offered } = collection
  return {
    chain: chain.caip2,
    asset: ctx.asset.id,
    ...offered,
    signature: ctx.results[index] as Hex,
    credentialId: ctx.credentialId,
  }
}

type OfferedContext = Omit<ConfirmContext, 'db'>

/**
 * offeredAuthorization read once per option as the confirm holds it (verify, then the relay's payload,
 * get the same object): the stored option does not change within a confirm, and a later confirm reads it
 * anew.
 */
function offeredOnce(chain: EvmChain) {
  const read = new WeakMap<OfferedContext['option'], { index: number; authorization: Authorization }>()
  return (ctx: OfferedContext) => {
    let offered = read.get(ctx.option)
    if (!offered) {
      offered = offeredAuthorization(chain, ctx)
      read.set(ctx.option, offered)
    }
    return offered
  }
}

/** The authorization as offered (stored by the gateway with the option) and the index of its action. */
function offeredAuthorization(
  chain: EvmChain,
  ctx: OfferedContext,
): { index: number; authorization: Authorization } {
  const index = ctx.option.actions.findIndex(
    (a) => a.type === 'walletRpc' && a.walletRpc.method === 'eth_signTypedData_v4',
  )
  const action = ctx.option.actions[index]
  if (action?.type !== 'walletRpc') throw new Error(`Option ${ctx.option.id} has no authorization.`)
  const authorization = authorizationFromParams(action.walletRpc.params)
  // The stored option is the service's own data; a mismatch here is a bug or tampering with the database.
  if (
    !same(authorization.to, chain.executor.address) ||
    authorization.value !== ctx.option.tokenAmount ||
    authorization.chainId !== chain.chainId
  ) {
    throw new Error(`Option ${ctx.option.id} holds an authorization the service did not build.`)
  }
  return { index, authorization }
}

/** The Permit2 transfer as offered (the option's typed-data action), its payer, and the hash it signs. */
function offeredPermit(
  chain: EvmChain,
  ctx: Omit<ConfirmContext, 'db'>,
): { index: number; permit: Permit2Collection; hash: Hex } {
  const index = ctx.option.actions.findIndex(
    (a) => a.type === 'walletRpc' && a.walletRpc.method === 'eth_signTypedData_v4',
  )
  const action = ctx.option.actions[index]
  if (action?.type !== 'walletRpc') throw new Error(`Option ${ctx.option.id} has no Permit2 transfer.`)
  const [owner, json] = JSON.parse(action.walletRpc.params) as [Address, string]
  const { transfer } = decodePermit2TypedData(chain.chainId, JSON.parse(json))
  if (
    !same(transfer.spender, chain.executor.address) ||
    !same(transfer.to, chain.executor.address) ||
    transfer.amount !== ctx.option.tokenAmount
  ) {
    throw new Error(`Option ${ctx.option.id} holds a Permit2 transfer the service did not build.`)
  }
  const hash = permit2Hash(transfer)
  return { index, permit: { ...transfer, owner: getAddress(owner) }, hash }
}

function submittedHash(ctx: ConfirmContext): { index: number; hash: Hash } {
  const index = ctx.actions.findIndex((a) => a.walletRpc.method === 'eth_sendTransaction')
  const result = ctx.results[index]
  if (index === -1 || result === undefined || !hash32.test(result)) {
    throw paramsError(
      `results.${Math.max(index, 0)}`,
      'expected the 32-byte hash of the transfer transaction',
    )
  }
  return { index, hash: result.toLowerCase() as Hash }
}

function alreadyUsed(index: number) {
  return paramsError(`results.${index}`, `results[${index}] is a transaction that already paid a payment`)
}
