import { sql } from 'kysely'
import { canonicalCaip } from '../../caip/caip.js'
import { RetryLater } from '../jobs/runner.js'
import { startSweep } from '../jobs/sweep.js'
import type { Db } from '../store/db.js'
import type { Mode } from '../store/schema.js'
import './schema.js'

/**
 * Reconciliation (docs/live-mode.md, "Reconciliation"): the ledger's balance at a holding address
 * against the chain's at a confirmed block. Between the two, only what is in flight may differ: money
 * on its way out (settling, refunds owed: their transfers may be mined before the ledger hears of it)
 * and on its way in (payments still processing: their transfer may be mined before they succeed; pushed
 * transfers still counting toward an open payment, docs/push-payments.md). A
 * chain balance outside that range is a difference: recorded, logged, shown in the API and the CLI, and
 * no settlement or refund signs a new transfer from that address until an operator acknowledges it.
 */

/** A send refused because reconciliation found its address's ledger and chain disagree. */
export class LedgerHold extends RetryLater {
  override name = 'LedgerHold'
}

export interface Difference {
  id: string
  mode: Mode
  asset: string
  holder: string
  block: string
  chainBalance: string
  ledgerBalance: string
  inFlightOut: string
  inFlightIn: string
  difference: string
  detectedAt: Date
  acknowledgedAt: Date | null
}

/** Throws LedgerHold when `holder` has a difference no operator acknowledged yet. */
export async function assertSendsAllowed(db: Db, holder: string): Promise<void> {
  const open = await db
    .selectFrom('ledger_differences')
    .select(['id', 'asset', 'difference', 'block'])
    .where('holder', '=', holder)
    .where('acknowledged_at', 'is', null)
    .executeTakeFirst()
  if (!open) return
  throw new LedgerHold(
    `Sends from ${holder} are stopped: reconciliation found the chain holds ${open.difference} of ${open.asset} ` +
      `more (negative: less) than the ledger explains at block ${open.block} (difference ${open.id}); an operator acknowledges ` +
      `it with \`caipay ledger ack ${open.id}\`.`,
  )
}

/** The ledger's side at a holding address: what its accounts hold, and what is in flight each way. */
export async function ledgerPosition(
  db: Db,
  params: { mode: Mode; holder: string; asset: string },
): Promise<{ balance: bigint; out: bigint; in: bigint; acknowledged: bigint }> {
  const asset = canonicalCaip(params.asset)
  const { rows } = await sql<{ balance: string; out: string; in: string; acknowledged: string }>`
    SELECT
      (SELECT coalesce(sum(balance), 0) FROM ledger_accounts
        WHERE mode = ${params.mode} AND asset = ${asset} AND holder = ${params.holder}) AS balance,
      (SELECT coalesce(sum(balance), 0) FROM ledger_accounts WHERE mode = ${params.mode} AND asset = ${asset}
        AND holder = ${params.holder} AND kind IN ('settling', 'refunds')) AS out,
      (SELECT coalesce(sum((option_amount->>'value')::numeric), 0) FROM payments
        WHERE mode = ${params.mode} AND status = 'processing'
          AND lower(option_amount->>'unit') = lower(${`caip19/${asset}`}))
      + (SELECT coalesce(sum(amount), 0) FROM push_transfers
        WHERE state = 'pending' AND asset = ${asset} AND holder = ${params.holder})
      -- EVM push transfers found at a deposit address: the sweep brings them here before they are applied.
      + (SELECT coalesce(sum(amount), 0) FROM evm_push_transfers
        WHERE state = 'found' AND asset = ${asset} AND holder = ${params.holder}) AS in,
      (SELECT coalesce(sum(difference), 0) FROM ledger_differences
        WHERE holder = ${params.holder} AND asset = ${asset} AND acknowledged_at IS NOT NULL) AS acknowledged`.execute(
    db,
  )
  const row = rows[0]!
  return {
    balance: BigInt(row.balance),
    out: BigInt(row.out),
    in: BigInt(row.in),
    acknowledged: BigInt(row.acknowledged),
  }
}

async function compare(
  db: Db,
  params: { mode: Mode; holder: string; asset: string; chainBalance: bigint },
): Promise<{ difference: bigint; position: Awaited<ReturnType<typeof ledgerPosition>>; expected: bigint }> {
  const position = await ledgerPosition(db, params)
  const expected = position.balance + position.acknowledged
  const low = expected - position.out
  const high = expected + position.in
  const chain = params.chainBalance
  const difference = chain < low ? chain - low : chain > high ? chain - high : 0n
  return { difference, position, expected }
}

/** What `reconcile` would find (0n: none), recording and logging nothing. */
export async function measureDifference(
  db: Db,
  params: { mode: Mode; holder: string; asset: string; chainBalance: bigint },
): Promise<bigint> {
  return (await compare(db, { ...params, asset: canonicalCaip(params.asset) })).difference
}

/**
 * Compares the chain's balance at a confirmed block with the ledger, and records a difference (one open
 * per holding address and asset). Acknowledged differences count as explained from then on. Returns the
 * difference found (0n: none).
 */
export async function reconcile(
  db: Db,
  params: {
    mode: Mode
    holder: string
    asset: string
    block: bigint
    chainBalance: bigint
    now: Date
    log?: { error(obj: object, msg: string): void }
  },
): Promise<bigint> {
  const asset = canonicalCaip(params.asset)
  const { difference, position, expected } = await compare(db, { ...params, asset })
  const chain = params.chainBalance
  if (difference === 0n) return 0n
  const inserted = await db
    .insertInto('ledger_differences')
    .values({
      mode: params.mode,
      asset,
      holder: params.holder,
      block: params.block,
      chain_balance: chain,
      ledger_balance: expected,
      in_flight_out: position.out,
      in_flight_in: position.in,
      difference,
      detected_at: params.now,
    })
    .onConflict((oc) => oc.column('holder').column('asset').where('acknowledged_at', 'is', null).doNothing())
    .returning('id')
    .executeTakeFirst()
  params.log?.error(
    {
      holder: params.holder,
      asset,
      block: String(params.block),
      chainBalance: String(chain),
      ledgerBalance: String(expected),
      inFlightOut: String(position.out),
      inFlightIn: String(position.in),
      difference: String(difference),
      ...(inserted ? { differenceId: String(inserted.id) } : {}),
    },
    'Ledger and chain disagree: sends from this address are stopped until an operator runs `caipay ledger ack`',
  )
  return difference
}

/**
 * An operator's acknowledgement: the difference counts as explained from now on (a later reconciliation
 * compares against the ledger plus it) and sends from its address resume. Undefined: no open difference
 * with that id.
 */
export async function acknowledgeDifference(
  db: Db,
  params: { id: string; note: string | null; now: Date },
): Promise<Difference | undefined> {
  const row = await db
    .updateTable('ledger_differences')
    .set({ acknowledged_at: params.now, acknowledged_note: params.note })
    .where('id', '=', params.id)
    .where('acknowledged_at', 'is', null)
    .returningAll()
    .executeTakeFirst()
  return row && differenceView(row)
}

/** Differences, open first then newest; `open` only those not yet acknowledged. */
export async function listDifferences(db: Db, options: { open?: boolean; mode?: Mode } = {}) {
  let query = db.selectFrom('ledger_differences').selectAll()
  if (options.open) query = query.where('acknowledged_at', 'is', null)
  if (options.mode) query = query.where('mode', '=', options.mode)
  const rows = await query.orderBy('id', 'desc').limit(100).execute()
  return rows.map(differenceView)
}

/** The open differences at any of `holders` (every asset: a difference stops all sends from its address). */
export async function openDifferencesAt(
  db: Db,
  params: { mode: Mode; holders: readonly string[] },
): Promise<Difference[]> {
  if (params.holders.length === 0) return []
  const rows = await db
    .selectFrom('ledger_differences')
    .selectAll()
    .where('mode', '=', params.mode)
    .where('holder', 'in', [...new Set(params.holders)])
    .where('acknowledged_at', 'is', null)
    .orderBy('id')
    .execute()
  return rows.map(differenceView)
}

function differenceView(row: {
  id: string
  mode: Mode
  asset: string
  holder: string
  block: string
  chain_balance: string
  ledger_balance: string
  in_flight_out: string
  in_flight_in: string
  difference: string
  detected_at: Date
  acknowledged_at: Date | null
}): Difference {
  return {
    id: String(row.id),
    mode: row.mode,
    asset: row.asset,
    holder: row.holder,
    block: String(row.block),
    chainBalance: String(row.chain_balance),
    ledgerBalance: String(row.ledger_balance),
    inFlightOut: String(row.in_flight_out),
    inFlightIn: String(row.in_flight_in),
    difference: String(row.difference),
    detectedAt: row.detected_at,
    acknowledgedAt: row.acknowledged_at,
  }
}

/**
 * The reconciliation job of a worker: every `intervalMs` (default 60 s) each chain's holding addresses
 * are reconciled (`chains`: one reconcile step per configured chain, EVM or Solana); a failure to read is
 * logged and tried at the next tick (it decides nothing).
 */
export function startReconciliation(options: {
  chains: readonly { id: string; reconcile(): Promise<void> }[]
  intervalMs?: number
  log?: { warn(obj: object, msg: string): void }
}): { stop(): Promise<void> } {
  if (options.chains.length === 0) return { stop: async () => {} }
  return startSweep({
    async run() {
      for (const chain of options.chains)
        await chain
          .reconcile()
          .catch((error: unknown) =>
            options.log?.warn(
              { chain: chain.id, error: String(error) },
              'Ledger reconciliation could not read',
            ),
          )
    },
    intervalMs: options.intervalMs ?? 60_000,
  })
}
