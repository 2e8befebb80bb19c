import { sql } from 'kysely'
import type { Action, SubscriptionTerms, WalletRpcAction } from '../../contract/gateway.js'
import type { JsonValue, StoredOption } from '../chains/types.js'
import { unixSeconds } from '../payments/views.js'
import { type Db, inTransaction } from '../store/db.js'
import { columnsText, namedStatement } from '../store/prepared.js'
import type { PaymentOptionRow, PaymentOptionsTable } from './schema.js'

/** Named, never `*` (see store/prepared.ts: a prepared statement's result type must not change). */
const optionColumnSet: Record<keyof PaymentOptionsTable, true> = {
  id: true,
  payment_id: true,
  chain_id: true,
  kind: true,
  account: true,
  asset: true,
  amount: true,
  eta_s: true,
  actions: true,
  state: true,
  built: true,
  expires_at: true,
  collect_data_required: true,
  collect_data_completed_at: true,
  created_at: true,
  updated_at: true,
}
export const optionColumns = Object.keys(optionColumnSet) as (keyof PaymentOptionsTable)[]

export function toStoredOption(row: PaymentOptionRow): StoredOption {
  return {
    id: row.id,
    paymentId: row.payment_id,
    kind: row.kind,
    account: row.account,
    asset: row.asset,
    tokenAmount: BigInt(row.amount),
    actions: row.actions,
    expiresAt: unixSeconds(row.expires_at),
    state: row.state,
    built: row.built,
  }
}

export interface NewOption {
  id: string
  paymentId: string
  chainId: string
  kind: string
  account: string
  asset: string
  tokenAmount: bigint
  etaS: number
  actions: Action[]
  state: JsonValue | undefined
  expiresAt: number
  collectDataRequired: boolean
  /** A subscription's first period: the terms the mandate is bounded by (also kept in `state`). */
  subscription?: SubscriptionTerms
}

/** The columns of a quote: what an insert writes and a refresh replaces (which drops any build). */
function quoteColumns(o: NewOption, now: Date) {
  return {
    amount: o.tokenAmount,
    eta_s: o.etaS,
    actions: JSON.stringify(o.actions),
    state: o.state === undefined ? null : JSON.stringify(o.state),
    built: null,
    expires_at: new Date(o.expiresAt * 1000),
    collect_data_required: o.collectDataRequired,
    updated_at: now,
  }
}

/**
 * Every option of one quote in one prepared statement, whatever their number: the columns go as arrays
 * and `unnest` turns them into rows, so the text (and PostgreSQL's parse and plan of it) never changes.
 */
const insertOptionsStatement =
  namedStatement(`INSERT INTO payment_options (id, payment_id, chain_id, kind, account, asset, amount, eta_s,
    actions, state, built, expires_at, collect_data_required, collect_data_completed_at, created_at, updated_at)
  SELECT o.id, $1, o.chain_id, o.kind, o.account, o.asset, o.amount::numeric, o.eta_s, o.actions::jsonb,
    o.state::jsonb, NULL, o.expires_at, o.collect_data_required, NULL, $2, $2
  FROM unnest($3::text[], $4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::int[], $10::text[],
    $11::text[], $12::timestamptz[], $13::boolean[])
    AS o(id, chain_id, kind, account, asset, amount, eta_s, actions, state, expires_at, collect_data_required)`)

export async function insertOptions(db: Db, options: readonly NewOption[], now: Date): Promise<void> {
  if (options.length === 0) return
  await insertOptionsStatement(db, ...insertOptionsParameters(options[0]!.paymentId, options, now))
}

function insertOptionsParameters(paymentId: string, options: readonly NewOption[], now: Date): unknown[] {
  if (options.some((o) => o.paymentId !== paymentId)) throw new Error('insertOptions: one payment at a time')
  const column = <T>(pick: (o: NewOption) => T) => options.map(pick)
  return [
    paymentId,
    now,
    column((o) => o.id),
    column((o) => o.chainId),
    column((o) => o.kind),
    column((o) => o.account),
    column((o) => o.asset),
    column((o) => o.tokenAmount.toString()),
    column((o) => o.etaS),
    column((o) => JSON.stringify(o.actions)),
    column((o) => (o.state === undefined ? null : JSON.stringify(o.state))),
    column((o) => new Date(o.expiresAt * 1000)),
    column((o) => o.collectDataRequired),
  ]
}

/** A refresh keeps the option id (and any data the buyer already gave) but replaces the quote. */
export async function replaceQuote(db: Db, option: NewOption, now: Date): Promise<void> {
  await db.updateTable('payment_options').set(quoteColumns(option, now)).where('id', '=', option.id).execute()
}

/** By primary key alone, the payment checked on the row (see store/prepared.ts). */
const selectOptionById = namedStatement<PaymentOptionRow>(
  `SELECT ${columnsText(optionColumns)} FROM payment_options WHERE id = $1`,
)

export async function findOption(
  db: Db,
  paymentId: string,
  optionId: string,
): Promise<PaymentOptionRow | undefined> {
  const [row] = (await selectOptionById(db, optionId)).rows
  return row?.payment_id === paymentId ? row : undefined
}

export async function findOptions(
  db: Db,
  paymentId: string,
  optionIds: readonly string[],
): Promise<PaymentOptionRow[]> {
  if (optionIds.length === 0) return []
  return db
    .selectFrom('payment_options')
    .select(optionColumns)
    .where('payment_id', '=', paymentId)
    .where('id', 'in', optionIds)
    .execute()
}

/**
 * Stores what fetch built, unless a concurrent fetch stored it first; returns what is stored, so every
 * caller hands the wallet the same bytes confirm will compare against. `replacing` is the stale build
 * a rebuild replaces (compare-and-set, so two fetches racing on a stale build store one result).
 */
export async function saveBuilt(
  db: Db,
  optionId: string,
  built: WalletRpcAction[],
  state: JsonValue | undefined,
  now: Date,
  replacing: WalletRpcAction[] | null = null,
): Promise<PaymentOptionRow> {
  const updated = await db
    .updateTable('payment_options')
    .set({
      built: JSON.stringify(built),
      ...(state !== undefined ? { state: JSON.stringify(state) } : {}),
      updated_at: now,
    })
    .where('id', '=', optionId)
    .where((eb) =>
      replacing === null
        ? eb('built', 'is', null)
        : eb(sql`built`, '=', sql`${JSON.stringify(replacing)}::jsonb`),
    )
    .returningAll()
    .executeTakeFirst()
  return (
    updated ??
    db.selectFrom('payment_options').selectAll().where('id', '=', optionId).executeTakeFirstOrThrow()
  )
}

/** Data from the hosted form: stored with the payment, only ever read by the service itself. */
export async function saveCollectedData(
  db: Db,
  input: { paymentId: string; optionId: string; fields: Record<string, string> },
  now: Date,
): Promise<void> {
  await inTransaction(db, async (trx) => {
    await trx
      .insertInto('collected_data')
      .values({
        option_id: input.optionId,
        payment_id: input.paymentId,
        fields: JSON.stringify(input.fields),
        created_at: now,
        updated_at: now,
      })
      .onConflict((oc) =>
        oc.column('option_id').doUpdateSet({ fields: JSON.stringify(input.fields), updated_at: now }),
      )
      .execute()
    await trx
      .updateTable('payment_options')
      .set({ collect_data_completed_at: now, updated_at: now })
      .where('id', '=', input.optionId)
      .execute()
  })
}
