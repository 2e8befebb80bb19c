/**
 * What bounds the fees hostile callers can make the service's executors (EVM relayer, Solana fee payer)
 * spend, kept in the database so every instance applies them (migration 019, docs/security-model.md):
 *
 * - a payer whose relay failed on chain after passing its simulation is cooled down: refused at verify,
 *   confirm and before any send until `relays.payerCooldownSeconds` have passed. A contract payer is
 *   cooled down by its code hash too: a fresh copy of the same account at a new address is no way round.
 * - each payer, then each credential, has an executor fee budget per chain and window
 *   (`relays.gasBudget.perPayer`, `.perCredential`): a send is signed only when its worst-case cost (gas
 *   limit x max fee per gas; a Solana transaction's fee) fits in what the window's failed and in-flight
 *   sends left of both. The payer's budget is checked first, so one payer's failures lock out that payer
 *   before they lock out the honest payers of the same merchant's public gateway.
 * - a payment holds one reservation (migration 024): its ERC-6492 deployment, its relay, the relay's
 *   re-sends and fee bumps raise it; its end settles it: deleted when the payer's money moved (a payment
 *   that paid is the partner's business, priced by its fees), else turned into what its sends cost.
 */
import { type RawBuilder, sql } from 'kysely'
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
  /** A payer's budget on the chain per window (smallest native unit), checked before its credential's. */
  payerBudget(chainId: string): bigint
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
    payerBudget(chainId) {
      const perChain = config.chains[chainId]?.gasBudgetPerPayer
      return nativeUnits(perChain ?? relays.gasBudget.perPayer, nativeDecimals(chainId))
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

/** Why a payer's or a credential's budget is spent: the refusal settle and confirm answer, and a payment's failure. */
export class GasBudgetExhausted extends Error {
  constructor(
    readonly chainId: string,
    readonly used: bigint,
    readonly budget: bigint,
    windowMs: number,
    /** Whose budget: the payer's (checked first) or the caller's credential's. */
    readonly scope: 'payer' | 'credential' = 'credential',
  ) {
    super(
      `${scope === 'payer' ? "This payer's" : "This credential's"} executor fee budget on ${chainId} is spent: ${used} of ${budget} (smallest native units) in the last ${windowMs / 1000} s went to reverted, failed or in-flight sends. Sends resume as the window moves on.`,
    )
  }
}

/** The payer is cooled down (a send for it failed on chain before): nothing is signed for it. */
export class PayerCoolingDown extends Error {}

/** A send of the payment reverted on chain already: nothing is sent for it again. */
export class SendReverted extends Error {}

/** The payer's address among its subjects: whose budget a send counts against. */
function payerOf(subjects: readonly CooldownSubject[]): string | undefined {
  return subjects.find((s) => s.kind === 'address')?.subject
}

/**
 * Whether a payment for the payer may be taken on for the executor to pay fees for (x402 verify and
 * settle, the gateway's confirm): refused when the payer is cooled down, or when what the payer's, then
 * the credential's, failed and in-flight sends took in the window leaves no room for `needed` (a send's
 * worst case, when known). One statement. Undefined: allowed.
 */
export async function guardRefusal(
  db: Db,
  settings: RelayGuardSettings,
  input: {
    chainId: string
    subjects: readonly CooldownSubject[]
    credentialId: string
    needed?: bigint
    now?: Date
  },
): Promise<PayerCoolingDown | GasBudgetExhausted | undefined> {
  const now = input.now ?? new Date()
  const since = new Date(now.getTime() - settings.windowMs)
  const payer = payerOf(input.subjects) ?? null
  const subjects = input.subjects.map((s) => s.subject)
  const { rows } = await sql<GuardRead>`
    SELECT c.subject, c.kind, c.until, c.reason,
      (SELECT coalesce(sum(amount), 0) FROM executor_gas_charges
        WHERE ${payer}::text IS NOT NULL AND payer = ${payer} AND chain_id = ${input.chainId}
          AND created_at > ${since}) AS payer_used,
      (SELECT coalesce(sum(amount), 0) FROM executor_gas_charges
        WHERE credential_id = ${input.credentialId} AND chain_id = ${input.chainId}
          AND created_at > ${since}) AS credential_used
    FROM (SELECT 1) one
    LEFT JOIN LATERAL (
      SELECT subject, kind, until, reason FROM payer_cooldowns
      WHERE chain_id = ${input.chainId} AND subject = ANY(${subjects}::text[]) AND until > ${now}
      ORDER BY until DESC LIMIT 1
    ) c ON true`.execute(db)
  return guardVerdict(rows[0]!, settings, { ...input, payer })
}

/** What guardRefusal read: the newest cool-down of a subject (all null: none) and the window's usage. */
interface GuardRead {
  subject: string | null
  kind: 'address' | 'code_hash' | null
  until: Date | null
  reason: string | null
  payer_used: string
  credential_used: string
}

/** guardRefusal's verdict on what it read (also the raising form's, from its error: relayGuardRaised). */
function guardVerdict(
  row: GuardRead,
  settings: RelayGuardSettings,
  input: { chainId: string; payer: string | null; needed?: bigint | undefined },
): PayerCoolingDown | GasBudgetExhausted | undefined {
  const { payer } = input
  if (row.subject !== null && row.kind !== null && row.until !== null && row.reason !== null)
    return new PayerCoolingDown(
      cooldownMessage({ subject: row.subject, kind: row.kind, until: row.until, reason: row.reason }),
    )
  const needed = input.needed ?? 0n
  const exhausted = (used: bigint, budget: bigint) => used >= budget || used + needed > budget
  const payerUsed = BigInt(row.payer_used)
  if (payer !== null && exhausted(payerUsed, settings.payerBudget(input.chainId)))
    return new GasBudgetExhausted(
      input.chainId,
      payerUsed,
      settings.payerBudget(input.chainId),
      settings.windowMs,
      'payer',
    )
  const credentialUsed = BigInt(row.credential_used)
  if (exhausted(credentialUsed, settings.budget(input.chainId)))
    return new GasBudgetExhausted(
      input.chainId,
      credentialUsed,
      settings.budget(input.chainId),
      settings.windowMs,
    )
  return undefined
}

/**
 * guardRefusal (nothing needed) as an expression a statement selects (migration 037's
 * `caipay_relay_guard_or_raise`): true when allowed; a refusal raises and rolls back the whole statement,
 * and relayGuardRaised turns that error back into guardRefusal's verdict. It reads what guardRefusal
 * reads and takes no lock. For an EVM gasless confirm whose guard rides in the statement that moves the
 * payment (gateway/confirm.ts), one round trip where the read was one of its own. `arguments` are the
 * function's, in order, for a named statement that writes the call itself (lifecycle.ts confirmWithJob).
 */
export function relayGuardOrRaise(
  settings: RelayGuardSettings,
  input: { chainId: string; subjects: readonly CooldownSubject[]; credentialId: string; now: Date },
): { check: RawBuilder<boolean>; arguments: readonly unknown[] } {
  const args = [
    input.chainId,
    input.credentialId,
    payerOf(input.subjects) ?? null,
    input.subjects.map((s) => s.subject),
    settings.budget(input.chainId).toString(),
    settings.payerBudget(input.chainId).toString(),
    new Date(input.now.getTime() - settings.windowMs),
    input.now,
  ] as const
  const [chainId, credentialId, payer, subjects, budget, payerBudget, since, now] = args
  return {
    check: sql<boolean>`caipay_relay_guard_or_raise(${chainId}::text, ${credentialId}::text, ${payer}::text,
      ${subjects}::text[], ${budget}::numeric, ${payerBudget}::numeric, ${since}::timestamptz, ${now}::timestamptz)`,
    arguments: args,
  }
}

/** The refusal guardRefusal would have returned, when `error` is relayGuardOrRaise's; else undefined. */
export function relayGuardRaised(
  error: unknown,
  settings: RelayGuardSettings,
  input: { chainId: string; subjects: readonly CooldownSubject[] },
): PayerCoolingDown | GasBudgetExhausted | undefined {
  const raised = error as { code?: unknown; detail?: unknown }
  if (raised?.code !== 'CP429' || typeof raised.detail !== 'string') return undefined
  const read = JSON.parse(raised.detail) as Omit<GuardRead, 'until'> & {
    guard?: boolean
    until: string | null
  }
  if (read.guard !== true) return undefined
  return guardVerdict({ ...read, until: read.until === null ? null : new Date(read.until) }, settings, {
    chainId: input.chainId,
    payer: payerOf(input.subjects) ?? null,
  })
}

/**
 * A payment the executor would pay fees for, refused at confirm with `429 rate_limited` (before the
 * payment moves, before anything is sent) when its payer is cooled down or its payer's or the caller's
 * budget is spent.
 */
export async function assertRelayable(
  db: Db,
  settings: RelayGuardSettings,
  input: { chainId: string; subjects: readonly CooldownSubject[]; credentialId: string },
): Promise<void> {
  const refusal = await guardRefusal(db, settings, input)
  if (refusal) fail('rate_limited', refusal.message)
}

/**
 * The guard before the executor signs a send of the payment (an EVM relay or deployment, a fee bump of
 * one, a Solana transaction): one round trip that refuses a payment whose send reverted on chain already
 * (SendReverted), a cooled-down payer (PayerCoolingDown), a send whose worst case `amount` does not fit in
 * the payer's, then the credential's, budget (GasBudgetExhausted); else raises the payment's one
 * reservation to what its landed sends cost plus `amount`. Under a lock per (chain, payer) and per
 * (chain, credential), so sends racing on several instances cannot together overshoot either budget.
 * Without a credential (and no reservation to take it from), only the first two are checked.
 */
export async function reserveExecutorFee(
  db: Db,
  settings: RelayGuardSettings,
  input: {
    chainId: string
    paymentId: string
    credentialId?: string | undefined
    subjects: readonly CooldownSubject[]
    amount: bigint
    now?: Date
  },
): Promise<void> {
  const now = input.now ?? new Date()
  const since = new Date(now.getTime() - settings.windowMs)
  const { rows } = await sql<ReservationVerdict>`
    SELECT * FROM caipay_reserve_executor_fee(
      ${input.chainId}, ${input.paymentId}, ${input.credentialId ?? null}::text,
      ${payerOf(input.subjects) ?? null}::text, ${input.subjects.map((s) => s.subject)}::text[],
      ${input.amount.toString()}::numeric, ${settings.budget(input.chainId).toString()}::numeric,
      ${settings.payerBudget(input.chainId).toString()}::numeric, ${since}, ${now})`.execute(db)
  const refusal = reservationRefusal(rows[0]!, settings, input)
  if (refusal) throw refusal
}

/**
 * reserveExecutorFee as an expression a statement selects (migration 034's raising form): true when
 * reserved; a refusal raises and rolls back the whole statement, and reservationRaised turns that error
 * back into reserveExecutorFee's. For a write that must happen only with its reservation, in one round
 * trip (a Solana confirm's move, record and job: gateway/confirm.ts).
 */
export function reserveExecutorFeeOrRaise(
  settings: RelayGuardSettings,
  input: {
    chainId: string
    paymentId: string
    credentialId?: string | undefined
    subjects: readonly CooldownSubject[]
    amount: bigint
    now: Date
  },
): RawBuilder<boolean> {
  const since = new Date(input.now.getTime() - settings.windowMs)
  return sql<boolean>`caipay_reserve_executor_fee_or_raise(
    ${input.chainId}, ${input.paymentId}, ${input.credentialId ?? null}::text,
    ${payerOf(input.subjects) ?? null}::text, ${input.subjects.map((s) => s.subject)}::text[],
    ${input.amount.toString()}::numeric, ${settings.budget(input.chainId).toString()}::numeric,
    ${settings.payerBudget(input.chainId).toString()}::numeric, ${since}, ${input.now})`
}

/** The refusal reserveExecutorFee would have thrown, when `error` is reserveExecutorFeeOrRaise's; else undefined. */
export function reservationRaised(
  error: unknown,
  settings: RelayGuardSettings,
  input: { chainId: string; paymentId: string; subjects: readonly CooldownSubject[] },
): Error | undefined {
  const raised = error as { code?: unknown; detail?: unknown }
  if (raised?.code !== 'CP429' || typeof raised.detail !== 'string') return undefined
  const verdict = JSON.parse(raised.detail) as ReservationVerdict
  return reservationRefusal(
    { ...verdict, until: verdict.until === null ? null : new Date(verdict.until) },
    settings,
    input,
  )
}

/** One relay's reservation, as reserveExecutorFee takes it, for reserveExecutorFees. */
export interface FeeReservation {
  paymentId: string
  credentialId?: string | undefined
  subjects: readonly CooldownSubject[]
  amount: bigint
  guards: RelayGuardSettings
}

/**
 * reserveExecutorFee for several sends of one chain in one round trip (migration 034), in the caller's
 * database transaction: the EVM sender's group, under its key lock, so the reservations commit with the
 * records of the sends they allow. Each send's verdict is reserveExecutorFee's: undefined when reserved,
 * else the error it would throw (nothing reserved for that send); the others are reserved regardless.
 */
export async function reserveExecutorFees(
  db: Db,
  chainId: string,
  reservations: readonly FeeReservation[],
  now: Date = new Date(),
): Promise<(Error | undefined)[]> {
  if (reservations.length === 0) return []
  const { rows } = await sql<ReservationVerdict & { ord: number }>`
    SELECT * FROM caipay_reserve_executor_fees(
      ${chainId}, ${reservations.map((r) => r.paymentId)}::text[],
      ${reservations.map((r) => r.credentialId ?? null)}::text[],
      ${reservations.map((r) => payerOf(r.subjects) ?? null)}::text[],
      ${JSON.stringify(reservations.map((r) => r.subjects.map((s) => s.subject)))}::jsonb,
      ${reservations.map((r) => r.amount.toString())}::numeric[],
      ${reservations.map((r) => r.guards.budget(chainId).toString())}::numeric[],
      ${reservations.map((r) => r.guards.payerBudget(chainId).toString())}::numeric[],
      ${reservations.map((r) => new Date(now.getTime() - r.guards.windowMs))}::timestamptz[], ${now})`.execute(
    db,
  )
  const byOrd = new Map(rows.map((row) => [Number(row.ord), row]))
  return reservations.map((r, i) =>
    reservationRefusal(byOrd.get(i + 1)!, r.guards, {
      chainId,
      paymentId: r.paymentId,
      subjects: r.subjects,
    }),
  )
}

interface ReservationVerdict {
  refusal: 'reverted' | 'cooling_down' | 'payer_budget' | 'credential_budget' | null
  subject: string | null
  reason: string | null
  used: string | null
  budget: string | null
  until: Date | null
}

/** The error a reservation's verdict (migration 024's function) stands for; undefined when reserved. */
function reservationRefusal(
  row: ReservationVerdict,
  settings: RelayGuardSettings,
  input: { chainId: string; paymentId: string; subjects: readonly CooldownSubject[] },
): Error | undefined {
  switch (row.refusal) {
    case null:
      return undefined
    case 'reverted':
      return new SendReverted(`A send of payment ${input.paymentId} already reverted on chain.`)
    case 'cooling_down': {
      const subject = input.subjects.find((s) => s.subject === row.subject) ?? input.subjects[0]!
      return new PayerCoolingDown(
        cooldownMessage({
          subject: subject.subject,
          kind: subject.kind,
          until: row.until!,
          reason: row.reason!,
        }),
      )
    }
    case 'payer_budget':
    case 'credential_budget':
      return new GasBudgetExhausted(
        input.chainId,
        BigInt(row.used!),
        BigInt(row.budget!),
        settings.windowMs,
        row.refusal === 'payer_budget' ? 'payer' : 'credential',
      )
  }
}

/**
 * A send of the payment landed ahead of the rest (an ERC-6492 deployment before its relay): what it
 * cost stays in the reservation, charged with the rest if the payment fails.
 */
export async function recordLandedSend(
  db: Db,
  input: { chainId: string; paymentId: string; cost: bigint; now?: Date },
): Promise<void> {
  await db
    .updateTable('executor_gas_charges')
    .set((eb) => ({
      landed: input.cost.toString(),
      amount: sql`greatest(${eb.ref('amount')}, ${input.cost.toString()}::numeric)`,
      updated_at: input.now ?? new Date(),
    }))
    .where('payment_id', '=', input.paymentId)
    .where('chain_id', '=', input.chainId)
    .where('state', '=', 'reserved')
    .execute()
}

/**
 * The payments' money moved: their reservations on the chain are given back, in one statement (the
 * finisher's transaction that succeeds them, payments/finisher.ts), as settleGasCharge without `spent`
 * does for one.
 */
export async function releaseReservations(
  db: Db,
  chainId: string,
  paymentIds: readonly string[],
): Promise<void> {
  if (paymentIds.length === 0) return
  await db
    .deleteFrom('executor_gas_charges')
    .where('payment_id', 'in', paymentIds)
    .where('chain_id', '=', chainId)
    .where('state', '=', 'reserved')
    .execute()
}

/**
 * The payment is final: its reservation is given back when the payer's money moved (`spent` undefined),
 * else turned into what its sends cost (`spent`, the last send's cost, plus what its landed sends cost;
 * nothing at all: released). A payment without a reservation (none taken, or a run that charged it and
 * stopped before finishing the payment) is charged once. One statement; answers what is charged.
 */
export async function settleGasCharge(
  db: Db,
  input: {
    chainId: string
    credentialId: string | undefined
    paymentId: string
    spent?: bigint
    payer?: string | undefined
    now?: Date
  },
): Promise<bigint> {
  const now = input.now ?? new Date()
  if (input.spent === undefined) {
    await db
      .deleteFrom('executor_gas_charges')
      .where('payment_id', '=', input.paymentId)
      .where('chain_id', '=', input.chainId)
      .where('state', '=', 'reserved')
      .execute()
    return 0n
  }
  const spent = input.spent.toString()
  const { rows } = await sql<{ charged: string }>`
    WITH settled AS (
      UPDATE executor_gas_charges SET state = 'spent', amount = landed + ${spent}::numeric, updated_at = ${now}
      WHERE payment_id = ${input.paymentId} AND chain_id = ${input.chainId} AND state = 'reserved'
        AND landed + ${spent}::numeric > 0
      RETURNING amount
    ), released AS (
      DELETE FROM executor_gas_charges
      WHERE payment_id = ${input.paymentId} AND chain_id = ${input.chainId} AND state = 'reserved'
        AND landed + ${spent}::numeric = 0
      RETURNING id
    ), earlier AS (
      SELECT amount FROM executor_gas_charges
      WHERE payment_id = ${input.paymentId} AND chain_id = ${input.chainId} AND state = 'spent'
    ), inserted AS (
      INSERT INTO executor_gas_charges
        (chain_id, credential_id, payer, payment_id, state, amount, created_at, updated_at)
      SELECT ${input.chainId}, ${input.credentialId ?? null}::text, ${input.payer ?? null}::text,
        ${input.paymentId}, 'spent', ${spent}::numeric, ${now}, ${now}
      WHERE ${spent}::numeric > 0 AND ${input.credentialId ?? null}::text IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM settled) AND NOT EXISTS (SELECT 1 FROM released)
        AND NOT EXISTS (SELECT 1 FROM earlier)
      RETURNING amount
    )
    SELECT coalesce((SELECT amount FROM settled), (SELECT amount FROM inserted),
      (SELECT max(amount) FROM earlier), 0)::text AS charged`.execute(db)
  return BigInt(rows[0]?.charged ?? 0)
}
