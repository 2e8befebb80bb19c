/**
 * What bounds the fees hostile callers can make the service's executors (EVM relayer, Solana fee payer)
 * spend, kept in the database so every instance applies them (migration 019, docs/security-model.md):
 *
 * - a payer whose relay failed on chain after passing its simulation is cooled down: refused at verify,
 *   confirm and before any send until `relays.payerCooldownSeconds` have passed. A contract payer is
 *   cooled down by its code hash too: a fresh copy of the same account at a new address is no way round.
 * - each credential has an executor fee budget per chain and window (`relays.gasBudget`): a send is
 *   signed only when its worst-case cost (gas limit x max fee per gas; a Solana transaction's fee) fits
 *   in what the window's reverted and in-flight sends left. A send that succeeds gives its reservation
 *   back: a payment that moved the payer's money is the partner's business, priced by its fees; only
 *   sends that moved nothing are the executor's loss, and those are what the budget bounds.
 */
import { sql } from 'kysely'
import type { ServerConfig } from '../config.js'
import { fail } from '../errors.js'
import type { Db } from '../store/db.js'
import './relayGuardsSchema.js'

export interface CooldownSubject {
  /** A payer address (EVM lowercased) or a contract payer's code hash. */
  subject: string
  kind: 'address' | 'code_hash'
}

export interface ActiveCooldown {
  subject: string
  kind: 'address' | 'code_hash'
  until: Date
  reason: string
}

export interface RelayGuardSettings {
  /** How long a payer whose relay failed on chain is refused, ms (0: never). */
  cooldownMs: number
  /** The gas budget's window, ms. */
  windowMs: number
  /** A credential's budget on the chain per window, in the chain's smallest native unit. */
  budget(chainId: string): bigint
}

export function relayGuardSettings(config: ServerConfig): RelayGuardSettings {
  const { relays } = config
  return {
    cooldownMs: relays.payerCooldownSeconds * 1000,
    windowMs: relays.gasBudget.windowSeconds * 1000,
    budget(chainId) {
      const perChain = config.chains[chainId]?.gasBudgetPerCredential
      return nativeUnits(perChain ?? relays.gasBudget.perCredential, nativeDecimals(chainId))
    },
  }
}

/** Ether and its kin: 18 decimals; SOL: 9. */
function nativeDecimals(chainId: string): number {
  return chainId.startsWith('solana:') ? 9 : 18
}

function nativeUnits(decimal: string, decimals: number): bigint {
  const [whole = '0', fraction = ''] = decimal.split('.')
  return BigInt(whole) * 10n ** BigInt(decimals) + BigInt(fraction.slice(0, decimals).padEnd(decimals, '0'))
}

/** The cool-down refusing any of `subjects` on the chain now, if one does. */
export async function activeCooldown(
  db: Db,
  chainId: string,
  subjects: readonly CooldownSubject[],
  now: Date = new Date(),
): Promise<ActiveCooldown | undefined> {
  if (subjects.length === 0) return undefined
  const row = await db
    .selectFrom('payer_cooldowns')
    .select(['subject', 'kind', 'until', 'reason'])
    .where('chain_id', '=', chainId)
    .where(
      'subject',
      'in',
      subjects.map((s) => s.subject),
    )
    .where('until', '>', now)
    .orderBy('until', 'desc')
    .executeTakeFirst()
  return row
}

/** Words for a refusal: who is cooled down, why, until when. */
export function cooldownMessage(cooldown: ActiveCooldown): string {
  const who = cooldown.kind === 'address' ? `The payer ${cooldown.subject}` : 'A payer with this account code'
  return `${who} is refused until ${cooldown.until.toISOString()}: ${cooldown.reason}`
}

/** Refuses the payer (each subject) until now + the cool-down; a longer cool-down already there stays. */
export async function coolDownPayer(
  db: Db,
  input: {
    chainId: string
    subjects: readonly CooldownSubject[]
    settings: RelayGuardSettings
    reason: string
    paymentId: string
    now?: Date
  },
): Promise<void> {
  if (input.settings.cooldownMs <= 0 || input.subjects.length === 0) return
  const now = input.now ?? new Date()
  const until = new Date(now.getTime() + input.settings.cooldownMs)
  await db
    .insertInto('payer_cooldowns')
    .values(
      input.subjects.map((s) => ({
        chain_id: input.chainId,
        subject: s.subject,
        kind: s.kind,
        until,
        reason: input.reason,
        payment_id: input.paymentId,
        created_at: now,
      })),
    )
    .onConflict((oc) =>
      oc.columns(['chain_id', 'subject']).doUpdateSet((eb) => ({
        until: sql`greatest(${eb.ref('payer_cooldowns.until')}, ${eb.ref('excluded.until')})`,
        reason: eb.ref('excluded.reason'),
        payment_id: eb.ref('excluded.payment_id'),
      })),
    )
    .execute()
}

/** Why a credential's budget is spent: the refusal settle and confirm answer, and a payment's failure. */
export class GasBudgetExhausted extends Error {
  constructor(
    readonly chainId: string,
    readonly used: bigint,
    readonly budget: bigint,
    windowMs: number,
  ) {
    super(
      `This credential's executor fee budget on ${chainId} is spent: ${used} of ${budget} (smallest native units) in the last ${windowMs / 1000} s went to reverted, failed or in-flight sends. Sends resume as the window moves on.`,
    )
  }
}

/** What the credential's reverted, failed and in-flight sends on the chain took in the window. */
async function usedInWindow(db: Db, chainId: string, credentialId: string, since: Date): Promise<bigint> {
  const row = await db
    .selectFrom('executor_gas_charges')
    .select(sql<string | null>`sum(amount)`.as('used'))
    .where('credential_id', '=', credentialId)
    .where('chain_id', '=', chainId)
    .where('created_at', '>', since)
    .executeTakeFirst()
  return BigInt(row?.used ?? 0)
}

/**
 * Throws GasBudgetExhausted when what the credential has left of its budget on the chain is not more
 * than `needed` (a send's worst-case cost, when known; else any send).
 */
export async function assertGasBudgetLeft(
  db: Db,
  settings: RelayGuardSettings,
  chainId: string,
  credentialId: string,
  options: { needed?: bigint; now?: Date } = {},
): Promise<void> {
  const now = options.now ?? new Date()
  const budget = settings.budget(chainId)
  const used = await usedInWindow(db, chainId, credentialId, new Date(now.getTime() - settings.windowMs))
  if (used >= budget || used + (options.needed ?? 0n) > budget)
    throw new GasBudgetExhausted(chainId, used, budget, settings.windowMs)
}

/**
 * A payment the executor would pay fees for, refused at confirm with `429 rate_limited` (before the
 * payment moves, before anything is sent) when its payer is cooled down or the caller's budget is spent.
 */
export async function assertRelayable(
  db: Db,
  settings: RelayGuardSettings,
  input: { chainId: string; subjects: readonly CooldownSubject[]; credentialId: string },
): Promise<void> {
  const cooling = await activeCooldown(db, input.chainId, input.subjects)
  if (cooling) fail('rate_limited', cooldownMessage(cooling))
  try {
    await assertGasBudgetLeft(db, settings, input.chainId, input.credentialId)
  } catch (error) {
    if (error instanceof GasBudgetExhausted) fail('rate_limited', error.message)
    throw error
  }
}

/**
 * Reserves `amount` (a send's worst-case cost) of the credential's budget for the payment's send, or
 * throws GasBudgetExhausted when it does not fit. Under a lock per (chain, credential), so sends racing on
 * several instances cannot together overshoot it.
 */
export async function reserveGas(
  db: Db,
  settings: RelayGuardSettings,
  input: { chainId: string; credentialId: string; paymentId: string; amount: bigint; now?: Date },
): Promise<void> {
  const now = input.now ?? new Date()
  const budget = settings.budget(input.chainId)
  await db.transaction().execute(async (trx) => {
    const lock = `caipay.gas:${input.chainId}:${input.credentialId}`
    await sql`SELECT pg_advisory_xact_lock(hashtextextended(${lock}, 0))`.execute(trx)
    const since = new Date(now.getTime() - settings.windowMs)
    const used = await usedInWindow(trx, input.chainId, input.credentialId, since)
    if (used + input.amount > budget)
      throw new GasBudgetExhausted(input.chainId, used, budget, settings.windowMs)
    await trx
      .insertInto('executor_gas_charges')
      .values({
        chain_id: input.chainId,
        credential_id: input.credentialId,
        payment_id: input.paymentId,
        state: 'reserved',
        amount: input.amount,
        created_at: now,
        updated_at: now,
      })
      .execute()
  })
}

/**
 * After the chain decided the payment's send: its reservation is given back, and what a send that
 * reverted or failed cost (`spent`) is charged to the credential instead.
 */
export async function settleGasCharge(
  db: Db,
  input: { chainId: string; credentialId: string | undefined; paymentId: string; spent?: bigint; now?: Date },
): Promise<void> {
  const now = input.now ?? new Date()
  await db.transaction().execute(async (trx) => {
    await trx
      .deleteFrom('executor_gas_charges')
      .where('payment_id', '=', input.paymentId)
      .where('chain_id', '=', input.chainId)
      .where('state', '=', 'reserved')
      .execute()
    if (input.spent === undefined || input.credentialId === undefined) return
    // A run that charged it and stopped before finishing the payment: charged once.
    const charged = await trx
      .selectFrom('executor_gas_charges')
      .select('id')
      .where('payment_id', '=', input.paymentId)
      .where('chain_id', '=', input.chainId)
      .where('state', '=', 'spent')
      .executeTakeFirst()
    if (charged) return
    await trx
      .insertInto('executor_gas_charges')
      .values({
        chain_id: input.chainId,
        credential_id: input.credentialId,
        payment_id: input.paymentId,
        state: 'spent',
        amount: input.spent,
        created_at: now,
        updated_at: now,
      })
      .execute()
  })
}
