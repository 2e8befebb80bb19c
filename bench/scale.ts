/**
 * Reads and lists with a big `payments` table against a small one.
 * - `populate`: a migrated database (the real schema and indexes), a partner with four merchants of
 *   skewed size plus another partner, and N payments copied in one statement from a payment the domain
 *   made (mixed statuses, ~30 s apart, random-looking ids). Secondary indexes are dropped during the load
 *   and recreated from their own definitions, then VACUUM ANALYZE.
 * - `scaleEndpoints`: the requests measured (status reads, list first page, deep cursor page, filters).
 * - `explainEndpoints`: runs each request once in-process with a query log, then `EXPLAIN (ANALYZE,
 *   BUFFERS)` on the SQL the endpoint actually ran, with its parameters.
 */
import { Kysely, PostgresDialect, sql } from 'kysely'
import pg from 'pg'
import { createApiKey, createPartner } from '../src/server/accounts/accounts.js'
import { buildApp } from '../src/server/app.js'
import { resolveConfig } from '../src/server/config.js'
import type { AuthContext } from '../src/server/context.js'
import { newId } from '../src/server/ids.js'
import { encodeCursor } from '../src/server/pagination.js'
import { createPayment } from '../src/server/payments/create.js'
import { type Db, openDatabase } from '../src/server/store/db.js'
import type { Database } from '../src/server/store/schema.js'

/**
 * One payment awaiting payment, made by the domain as `POST /v1/payments` makes it: the template the
 * bench's bulk rows copy (jsonb_populate_record), so they follow every migration. Its id.
 */
async function templatePayment(db: Db, partnerId: string, merchantId: string): Promise<string> {
  const created = await createPayment(db, {
    auth: { partnerId, mode: 'test' } as AuthContext,
    merchant: { id: merchantId },
    body: { referenceId: 'bench-template', amount: { unit: 'iso4217/USD', value: '1250' } },
    config: resolveConfig({}),
    now: new Date(),
    afterCommit: () => {},
  })
  return created.paymentId
}

export interface ScaleData {
  url: string
  rows: number
  partnerId: string
  apiKey: string
  walletKey: string
  /** Largest first. */
  merchantIds: string[]
  /** Payment ids of the biggest merchant, sampled across the table. */
  sampleIds: string[]
  /** Payments of the bench partner still awaiting payment (`requires_action`), up to 5,000. */
  openIds: string[]
  cursors: {
    /** 90 % deep into the partner's list. */
    partnerDeep: string
    /** 90 % deep into the biggest merchant's list. */
    merchantDeep: string
    /** 90 % deep into the partner's `failed` payments. */
    failedDeep: string
  }
  referenceId: string
  /** Seconds spent inserting and indexing. */
  loadSeconds: number
}

/** Share of the rows per merchant of the bench partner; the rest belongs to another partner. */
const merchantShares = [0.45, 0.25, 0.15, 0.05] as const

export async function populate(url: string, rows: number): Promise<ScaleData> {
  const database = await openDatabase({ databaseUrl: url })
  const started = Date.now()
  try {
    const db = database.db
    const partnerId = await createPartner(db, { name: 'bench scale' })
    const otherPartner = await createPartner(db, { name: 'other' })
    const { apiKey } = await createApiKey(db, { partnerId, mode: 'test', role: 'partner' })
    const { apiKey: walletKey } = await createApiKey(db, { partnerId, mode: 'test', role: 'wallet' })
    const now = new Date()
    const merchant = async (partner: string, n: number) => {
      const id = newId('merchant')
      await db
        .insertInto('merchants')
        .values({
          id,
          partner_id: partner,
          mode: 'test',
          name: `Scale merchant ${n}`,
          email: `m${n}@scale.example`,
          icon_url: null,
          status: 'active',
          created_at: now,
          updated_at: now,
          deleted_at: null,
        })
        .execute()
      return id
    }
    const merchantIds: string[] = []
    for (let i = 0; i < merchantShares.length; i++) merchantIds.push(await merchant(partnerId, i))
    const otherMerchant = await merchant(otherPartner, 99)
    const template = await templatePayment(db, partnerId, merchantIds[0]!)

    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      await client.query('SET maintenance_work_mem = $1', ['256MB']).catch(() => {})
      const { rows: indexes } = await client.query<{ indexname: string; indexdef: string }>(
        `SELECT i.indexname, i.indexdef FROM pg_indexes i
          WHERE i.schemaname = current_schema() AND i.tablename = 'payments'
            AND NOT EXISTS (SELECT 1 FROM pg_constraint c WHERE c.conname = i.indexname)`,
      )
      for (const index of indexes) await client.query(`DROP INDEX ${index.indexname}`)
      // g = 1 is the oldest payment, g = rows the newest; 30 s apart, the newest a minute ago.
      // The bench partner's merchants take the shares above; the other partner gets the rest.
      let cumulative = 0
      const bounds = merchantShares.map((share) => (cumulative += share))
      const merchantCase = `CASE ${bounds
        .map((b, i) => `WHEN (g::bigint * 7919) % 1000 < ${Math.round(b * 1000)} THEN '${merchantIds[i]}'`)
        .join(' ')} ELSE '${otherMerchant}' END`
      // Every row is a copy of one payment made by the domain (createPayment), with the columns below
      // replaced: a column a migration adds comes along with the template's value.
      await client.query(
        `INSERT INTO payments
         SELECT (jsonb_populate_record(NULL::payments, to_jsonb(t) || jsonb_build_object(
           'id', s.id, 'partner_id', CASE WHEN s.merchant_id = $3 THEN $2 ELSE $1 END,
           'merchant_id', s.merchant_id, 'reference_id', 'order-' || g, 'amount_unit', 'iso4217/USD',
           'amount_value', 100 + (g * 37) % 100000, 'status', s.status,
           'failure_code', CASE WHEN s.status = 'failed' THEN 'declined_user' END,
           'expires_at', CASE WHEN s.status = 'requires_action' THEN now() + interval '1 day' ELSE s.created_at + interval '15 minutes' END,
           'buyer', CASE WHEN s.status IN ('processing', 'succeeded', 'failed') THEN 'eip155:8453:0x' || md5(g::text || 'buyer') END,
           'option_amount', CASE WHEN s.status IN ('processing', 'succeeded', 'failed')
             THEN jsonb_build_object('unit', 'caip19/eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
               'value', ((100 + (g * 37) % 100000) * 10000)::text,
               'display', jsonb_build_object('assetName', 'USD Coin', 'assetSymbol', 'USDC', 'decimals', 6)) END,
           'tx_id', CASE WHEN s.status = 'succeeded' THEN 'test:' || s.id END,
           'settlement_status', CASE WHEN s.status = 'succeeded' THEN 'succeeded' END,
           'settlement_tx_id', CASE WHEN s.status = 'succeeded' THEN 'test:' || s.id || ':settlement' END,
           'settlement_unit', CASE WHEN s.status = 'succeeded' THEN 'caip19/eip155:8453/erc20:0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913' END,
           'refunded_at', CASE WHEN s.status = 'succeeded' AND g % 97 = 0 THEN s.created_at + interval '1 day' END,
           'cancelled_at', CASE WHEN s.status = 'cancelled' THEN s.created_at + interval '5 minutes' END,
           'cancelled_reason', CASE WHEN s.status = 'cancelled' THEN 'cancelled_by_merchant' END,
           'created_at', s.created_at, 'updated_at', s.created_at + interval '2 minutes'))).*
         FROM (SELECT * FROM payments WHERE id = $5) AS t, (
           SELECT g,
             'pay_' || substr(md5(g::text || 'caipay-bench'), 1, 24) AS id,
             ${merchantCase} AS merchant_id,
             CASE
               WHEN g > $4::int - greatest($4::int / 100, 1) THEN 'requires_action'
               WHEN g % 20 = 0 THEN 'failed'
               WHEN g % 20 = 1 THEN 'expired'
               WHEN g % 20 = 2 THEN 'cancelled'
               WHEN g % 50 = 3 THEN 'processing'
               ELSE 'succeeded'
             END AS status,
             now() - interval '1 minute' - ($4::int - g) * interval '30 seconds' AS created_at
           FROM generate_series(1, $4::int) AS g
         ) AS s`,
        [partnerId, otherPartner, otherMerchant, rows, template],
      )
      await client.query('DELETE FROM payment_events WHERE payment_id = $1', [template])
      await client.query('DELETE FROM payments WHERE id = $1', [template])
      for (const index of indexes) await client.query(index.indexdef)
      await client.query('VACUUM ANALYZE payments')
      await client.query('ANALYZE merchants')
    } finally {
      await client.end()
    }
    const loadSeconds = (Date.now() - started) / 1000

    const deepRow = async (where: (q: ReturnType<typeof base>) => ReturnType<typeof base>) => {
      const total = await where(base())
        .select((eb) => eb.fn.countAll<string>().as('n'))
        .executeTakeFirstOrThrow()
      const offset = Math.floor(Number(total.n) * 0.9)
      const row = await where(base())
        .select(['created_at', 'id'])
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .offset(offset)
        .limit(1)
        .executeTakeFirstOrThrow()
      return encodeCursor(row)
    }
    const base = () =>
      db.selectFrom('payments').where('partner_id', '=', partnerId).where('mode', '=', 'test')
    const sample = await db
      .selectFrom('payments')
      .select('id')
      .where('merchant_id', '=', merchantIds[0]!)
      .orderBy(sql`random()`)
      .limit(500)
      .execute()
    const open = await db
      .selectFrom('payments')
      .select('id')
      .where('partner_id', '=', partnerId)
      .where('status', '=', 'requires_action')
      .limit(5000)
      .execute()
    const reference = await db
      .selectFrom('payments')
      .select('reference_id')
      .where('merchant_id', '=', merchantIds[1]!)
      .limit(1)
      .executeTakeFirstOrThrow()
    return {
      url,
      rows,
      partnerId,
      apiKey,
      walletKey,
      merchantIds,
      sampleIds: sample.map((r) => r.id),
      openIds: open.map((r) => r.id),
      cursors: {
        partnerDeep: await deepRow((q) => q),
        merchantDeep: await deepRow((q) => q.where('merchant_id', '=', merchantIds[0]!)),
        failedDeep: await deepRow((q) => q.where('status', '=', 'failed')),
      },
      referenceId: reference.reference_id,
      loadSeconds,
    }
  } finally {
    await database.close()
  }
}

/**
 * `count` new payments of one merchant awaiting payment, as `POST /v1/payments` writes them (an hour to
 * expiry), in one statement: the payments the gateway flows of the mixed workload pay. Their ids.
 */
export async function insertOpenPayments(
  url: string,
  owner: { partnerId: string; merchantId: string },
  count: number,
): Promise<string[]> {
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const db = new Kysely<Database>({
      dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url, max: 1 }) }),
    })
    const template = await templatePayment(db, owner.partnerId, owner.merchantId).finally(() => db.destroy())
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO payments
       SELECT (jsonb_populate_record(NULL::payments, to_jsonb(t) || jsonb_build_object('id', 'pay_' || substr(md5($2 || g), 1, 24),
         'reference_id', 'flow-' || g, 'expires_at', now() + interval '1 hour', 'created_at', now(),
         'updated_at', now()))).*
       FROM (SELECT * FROM payments WHERE id = $1) AS t, generate_series(1, $3::int) AS g
       RETURNING id`,
      [template, `flow-${Date.now()}-`, count],
    )
    await client.query('ANALYZE payments')
    return rows.map((r) => r.id)
  } finally {
    await client.end()
  }
}

export interface ScaleEndpoint {
  name: string
  /** What the EXPLAIN summary and the table call it. */
  label: string
  paths: string[]
  headers: Record<string, string>
}

/** The requests compared between table sizes. */
export function scaleEndpoints(data: ScaleData): ScaleEndpoint[] {
  const partner = { 'api-key': data.apiKey }
  const merchant = { 'api-key': data.apiKey, 'merchant-id': data.merchantIds[0]! }
  const wallet = { 'api-key': data.walletKey }
  const q = (path: string, query: Record<string, string>) => `${path}?${new URLSearchParams(query)}`
  return [
    {
      name: 'status',
      label: 'GET /v1/payments/{id}/status',
      paths: data.sampleIds.map((id) => `/v1/payments/${id}/status`),
      headers: merchant,
    },
    {
      name: 'gateway_status',
      label: 'GET /v1/gateway/payment/{id}/status',
      paths: data.sampleIds.map((id) => `/v1/gateway/payment/${id}/status`),
      headers: wallet,
    },
    { name: 'list_first', label: 'GET /v1/payments (first page)', paths: ['/v1/payments'], headers: partner },
    {
      name: 'list_deep',
      label: 'GET /v1/payments (cursor 90% deep)',
      paths: [q('/v1/payments', { cursor: data.cursors.partnerDeep })],
      headers: partner,
    },
    {
      name: 'list_status',
      label: 'GET /v1/payments?status=failed',
      paths: [q('/v1/payments', { status: 'failed' })],
      headers: partner,
    },
    {
      name: 'list_status_deep',
      label: 'GET /v1/payments?status=failed (cursor 90% deep)',
      paths: [q('/v1/payments', { status: 'failed', cursor: data.cursors.failedDeep })],
      headers: partner,
    },
    {
      name: 'list_statuses',
      label: 'GET /v1/payments?status=processing&status=cancelled',
      paths: ['/v1/payments?status=processing&status=cancelled'],
      headers: partner,
    },
    {
      name: 'list_merchant_filter',
      label: 'GET /v1/payments?merchantId=<smallest>',
      paths: [q('/v1/payments', { merchantId: data.merchantIds.at(-1)! })],
      headers: partner,
    },
    {
      name: 'list_reference',
      label: 'GET /v1/payments?referenceId=...',
      paths: [q('/v1/payments', { referenceId: data.referenceId })],
      headers: partner,
    },
    {
      name: 'merchant_list_first',
      label: 'GET /v1/merchants/payments (first page)',
      paths: ['/v1/merchants/payments'],
      headers: merchant,
    },
    {
      name: 'merchant_list_deep',
      label: 'GET /v1/merchants/payments (cursor 90% deep)',
      paths: [q('/v1/merchants/payments', { cursor: data.cursors.merchantDeep })],
      headers: merchant,
    },
    {
      name: 'merchant_list_status',
      label: 'GET /v1/merchants/payments?status=cancelled (smallest merchant)',
      paths: [q('/v1/merchants/payments', { status: 'cancelled' })],
      headers: { ...merchant, 'merchant-id': data.merchantIds.at(-1)! },
    },
    {
      name: 'merchant_list_statuses',
      label: 'GET /v1/merchants/payments?status=processing&status=failed',
      paths: ['/v1/merchants/payments?status=processing&status=failed'],
      headers: merchant,
    },
  ]
}

export interface PlanSummary {
  sql: string
  /** Plan nodes, outermost first, e.g. `Limit > Index Scan using payments_page on payments`. */
  nodes: string
  rows: number
  sharedHit: number
  sharedRead: number
  /** Rows of `payments` read and thrown away by a filter, and rows fed into sorts. */
  filtered: number
  sorted: number
  executionMs: number
  /**
   * Not keyset-friendly: a sequential scan of `payments`, or more than `wasteLimit` rows filtered out or
   * sorted for one page, a cost that grows with the table rather than with the page.
   */
  suspicious: boolean
}

export interface EndpointPlans {
  endpoint: string
  plans: PlanSummary[]
}

interface PlanNode {
  'Node Type': string
  'Relation Name'?: string
  'Index Name'?: string
  'Actual Rows'?: number
  'Actual Loops'?: number
  'Rows Removed by Filter'?: number
  'Shared Hit Blocks'?: number
  'Shared Read Blocks'?: number
  Plans?: PlanNode[]
}

/** Ten pages' worth. */
const wasteLimit = 500

function walk(node: PlanNode, visit: (node: PlanNode) => void): void {
  visit(node)
  for (const child of node.Plans ?? []) walk(child, visit)
}

function label(node: PlanNode): string {
  return [
    node['Node Type'],
    node['Index Name'] ? ` using ${node['Index Name']}` : '',
    node['Relation Name'] ? ` on ${node['Relation Name']}` : '',
  ].join('')
}

/**
 * Runs each endpoint's first path once through the real app (in this process, a query log on its
 * database), then EXPLAIN (ANALYZE, BUFFERS) of the queries that touch `payments`. Writes (the lazy
 * expiry sweep) are explained inside a rolled-back transaction.
 */
export async function explainEndpoints(
  url: string,
  endpoints: readonly ScaleEndpoint[],
): Promise<EndpointPlans[]> {
  const pool = new pg.Pool({ connectionString: url, max: 2 })
  let capture: { sql: string; parameters: readonly unknown[] }[] | undefined
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: (event) => {
      if (event.level === 'query' && capture) capture.push({ ...event.query })
    },
  })
  const app = await buildApp({ db, config: resolveConfig({ rateLimit: false }), logger: false })
  await app.ready()
  const out: EndpointPlans[] = []
  try {
    for (const endpoint of endpoints) {
      capture = []
      const res = await app.inject({ method: 'GET', url: endpoint.paths[0]!, headers: endpoint.headers })
      const queries = capture
      capture = undefined
      if (res.statusCode !== 200) throw new Error(`${endpoint.label}: ${res.statusCode} ${res.body}`)
      const plans: PlanSummary[] = []
      for (const query of queries) {
        if (!/\bpayments\b/.test(query.sql)) continue
        plans.push(await explain(pool, query.sql, query.parameters))
      }
      out.push({ endpoint: endpoint.label, plans })
    }
  } finally {
    await app.close()
    await db.destroy()
  }
  return out
}

async function explain(pool: pg.Pool, sql: string, parameters: readonly unknown[]): Promise<PlanSummary> {
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const { rows } = await client.query<{ 'QUERY PLAN': [{ Plan: PlanNode; 'Execution Time': number }] }>(
      `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) ${sql}`,
      parameters as unknown[],
    )
    await client.query('ROLLBACK')
    const root = rows[0]!['QUERY PLAN'][0]
    const nodes: string[] = []
    let filtered = 0
    let sorted = 0
    let seqScan = false
    walk(root.Plan, (node) => {
      nodes.push(label(node))
      const loops = node['Actual Loops'] ?? 1
      if (node['Relation Name'] === 'payments') {
        filtered += (node['Rows Removed by Filter'] ?? 0) * loops
        if (node['Node Type'] === 'Seq Scan') seqScan = true
      }
      if (/Sort$/.test(node['Node Type'])) {
        for (const child of node.Plans ?? [])
          sorted += (child['Actual Rows'] ?? 0) * (child['Actual Loops'] ?? 1)
      }
    })
    return {
      sql: sql.replace(/\s+/g, ' '),
      nodes: nodes.join(' > '),
      rows: root.Plan['Actual Rows'] ?? 0,
      sharedHit: root.Plan['Shared Hit Blocks'] ?? 0,
      sharedRead: root.Plan['Shared Read Blocks'] ?? 0,
      filtered,
      sorted,
      executionMs: root['Execution Time'],
      suspicious: seqScan || filtered > wasteLimit || sorted > wasteLimit,
    }
  } catch (error) {
    await client.query('ROLLBACK').catch(() => {})
    throw error
  } finally {
    client.release()
  }
}
