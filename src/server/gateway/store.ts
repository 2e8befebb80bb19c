import { sql } from 'kysely'
import type { Action, WalletRpcAction } from '../../contract/gateway.js'
import type { JsonValue, StoredOption } from '../chains/types.js'
import { unixSeconds } from '../payments/views.js'
import { type Db, inTransaction } from '../store/db.js'
import type { PaymentOptionRow } from './schema.js'

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

export async function insertOptions(db: Db, options: readonly NewOption[], now: Date): Promise<void> {
  if (options.length === 0) return
  await db
    .insertInto('payment_options')
    .values(
      options.map((o) => ({
        id: o.id,
        payment_id: o.paymentId,
        chain_id: o.chainId,
        kind: o.kind,
        account: o.account,
        asset: o.asset,
        ...quoteColumns(o, now),
        collect_data_completed_at: null,
        created_at: now,
      })),
    )
    .execute()
}

/** A refresh keeps the option id (and any data the buyer already gave) but replaces the quote. */
export async function replaceQuote(db: Db, option: NewOption, now: Date): Promise<void> {
  await db.updateTable('payment_options').set(quoteColumns(option, now)).where('id', '=', option.id).execute()
}

export async function findOption(
  db: Db,
  paymentId: string,
  optionId: string,
): Promise<PaymentOptionRow | undefined> {
  const [row] = await findOptions(db, paymentId, [optionId])
  return row
}

export async function findOptions(
  db: Db,
  paymentId: string,
  optionIds: readonly string[],
): Promise<PaymentOptionRow[]> {
  if (optionIds.length === 0) return []
  return db
    .selectFrom('payment_options')
    .selectAll()
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
