import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely'
import type { Amount, PaymentSource, PaymentStatus } from '../../contract/index.js'

/**
 * Row types of the database. These are interfaces so another module can add its own tables or
 * columns with declaration merging (`declare module '.../store/schema.js' { interface Database {...} }`)
 * next to the migration that creates them.
 */

export type Mode = 'test' | 'live'
export type KeyRole = 'partner' | 'wallet'

/** timestamptz: read as Date, written as Date. */
export type Timestamp = ColumnType<Date, Date, Date>
/** numeric: pg returns text, so money never passes through a float. */
export type Numeric = ColumnType<string, string | bigint, string | bigint>
/** jsonb: written as a JSON string (pg would turn arrays into Postgres arrays otherwise). */
export type Json<T> = ColumnType<T, string, string>

export interface PartnersTable {
  id: string
  name: string | null
  api_version: string
  created_at: Timestamp
}

export interface ApiKeysTable {
  id: string
  partner_id: string
  mode: Mode
  role: KeyRole
  /** hex SHA-256 of the whole key; the key itself is never stored. */
  key_hash: string
  /** First characters, for people to recognise a key in listings. */
  key_prefix: string
  created_at: Timestamp
  revoked_at: Timestamp | null
}

export interface AppsTable {
  /** The public app id itself (`app_test_...`, `app_...`). */
  id: string
  partner_id: string
  mode: Mode
  created_at: Timestamp
  revoked_at: Timestamp | null
}

export interface MerchantsTable {
  id: string
  partner_id: string
  mode: Mode
  name: string
  email: string
  icon_url: string | null
  status: 'active' | 'inactive' | 'suspended'
  created_at: Timestamp
  updated_at: Timestamp
  deleted_at: Timestamp | null
}

export interface CryptoSettlementsTable {
  id: string
  merchant_id: string
  partner_id: string
  mode: Mode
  asset: string
  /** The asset folded for uniqueness (EVM hex is case-insensitive). */
  asset_key: string
  destination: string
  created_at: Timestamp
  updated_at: Timestamp
}

export type SettlementStatus = 'pending' | 'succeeded'

export interface PaymentsTable {
  id: string
  partner_id: string
  merchant_id: string
  mode: Mode
  reference_id: string
  amount_unit: string
  amount_value: Numeric
  status: PaymentStatus
  failure_code: string | null
  expires_at: Timestamp
  selected_option_id: string | null
  /** CAIP-10 account that paid. */
  buyer: string | null
  option_amount: Json<Amount> | null
  tx_id: string | null
  /** null: no settlement step (test mode, direct transfers); pending, then succeeded. */
  settlement_status: SettlementStatus | null
  settlement_tx_id: string | null
  settlement_unit: string | null
  refunded_at: Timestamp | null
  cancelled_at: Timestamp | null
  cancelled_reason: 'cancelled_by_merchant' | 'cancelled_by_user' | null
  checkout: Json<{ successUrl: string; errorUrl: string }> | null
  created_at: Timestamp
  updated_at: Timestamp
  /** 0 at creation, +1 per state change; each change writes its `payment_events` row (payments/lifecycle.ts). */
  payment_state_version: ColumnType<number, number | undefined, number>
  processing_at: Timestamp | null
  succeeded_at: Timestamp | null
  failed_at: Timestamp | null
  expired_at: Timestamp | null
  settled_at: Timestamp | null
  /** Token minor units that reached the merchant's settlement destination (unit: `settlement_unit`). */
  settlement_value: Numeric | null
  /** `manual`: held once paid until captured or voided (migration 020, docs/capture.md). */
  capture_method: ColumnType<CaptureMethod, CaptureMethod | undefined, CaptureMethod>
  /** Manual capture only: when the held money is voided by itself if not captured. */
  capture_by: Timestamp | null
  capture_status: CaptureStatus | null
  /** What a capture took, in the payment's unit (`amount_unit`). */
  captured_value: Numeric | null
  /** What a capture settles, fixed when the payment succeeded (payments/capture.ts CapturePlan). */
  capture_plan: Json<unknown> | null
  captured_at: Timestamp | null
  voided_at: Timestamp | null
  /**
   * `transfer_failed`: the money a void, expiry or partial capture gave back did not go (migration 029):
   * it is held again (`authorized`, or a partial capture's rest) until the next void.
   */
  capture_failure_code: CaptureFailureCode | null
  /** How its money arrives (migration 021): `pull` until a pushed transfer pays it (docs/push-payments.md). */
  source: ColumnType<PaymentSource, PaymentSource | undefined, PaymentSource>
}

export type CaptureMethod = 'automatic' | 'manual'
export type CaptureStatus = 'authorized' | 'captured' | 'partially_captured' | 'voided' | 'expired'
export type CaptureFailureCode = 'transfer_failed'

/**
 * Every column of `payments`, for prepared statements (store/prepared.ts), which must name their
 * columns: a cached plan's result type cannot change, so after a migration adds a column a prepared
 * `SELECT *` fails on every connection that prepared it. A record, so a column added to
 * PaymentsTable and not listed here does not compile.
 */
const paymentColumnSet: Record<keyof PaymentsTable, true> = {
  id: true,
  partner_id: true,
  merchant_id: true,
  mode: true,
  reference_id: true,
  amount_unit: true,
  amount_value: true,
  status: true,
  failure_code: true,
  expires_at: true,
  selected_option_id: true,
  buyer: true,
  option_amount: true,
  tx_id: true,
  settlement_status: true,
  settlement_tx_id: true,
  settlement_unit: true,
  refunded_at: true,
  cancelled_at: true,
  cancelled_reason: true,
  checkout: true,
  created_at: true,
  updated_at: true,
  payment_state_version: true,
  processing_at: true,
  succeeded_at: true,
  failed_at: true,
  expired_at: true,
  settled_at: true,
  settlement_value: true,
  capture_method: true,
  capture_by: true,
  capture_status: true,
  captured_value: true,
  capture_plan: true,
  captured_at: true,
  voided_at: true,
  capture_failure_code: true,
  source: true,
}
export const paymentColumns = Object.keys(paymentColumnSet) as (keyof PaymentsTable)[]

export type JobState = 'pending' | 'running' | 'succeeded' | 'failed'

export interface JobsTable {
  id: Generated<string>
  kind: string
  payment_id: string
  state: ColumnType<JobState, JobState | undefined, JobState>
  attempts: ColumnType<number, number | undefined, number>
  /** `attempts` when the job was last queued again for new work (migration 032): its retries count from there. */
  armed_attempts: ColumnType<number, number | undefined, number>
  run_at: Timestamp
  locked_until: Timestamp | null
  payload: Json<unknown>
  result: Json<unknown> | null
  /** A webhook delivery's job (migration 009); null for a payment's own jobs. */
  delivery_id: ColumnType<string | null, string | null | undefined, string | null>
  /** A refund's job (migration 015): one per refund, where a payment's own jobs are one per kind. */
  refund_id: ColumnType<string | null, string | null | undefined, string | null>
  /** The enqueuer's W3C traceparent (migration 023_observability) when tracing is on: the step continues its trace. */
  trace_parent: ColumnType<string | null, string | null | undefined, string | null>
  last_error: string | null
  created_at: Timestamp
  updated_at: Timestamp
}

export interface IdempotencyKeysTable {
  partner_id: string
  mode: Mode
  key: string
  fingerprint: string
  state: 'in_flight' | 'done'
  response_status: number | null
  response_body: string | null
  response_headers: Json<Record<string, string>> | null
  /**
   * Informational: who runs a key is decided by a row lock (FOR UPDATE NOWAIT), which a crashed
   * request releases with its connection; see idempotency.ts.
   */
  locked_until: Timestamp
  created_at: Timestamp
  expires_at: Timestamp
}

/** The outbox of payment state changes (migration 006); the webhook dispatcher reads it. */
export interface PaymentEventsTable {
  id: Generated<string>
  payment_id: string
  type: string
  payment_state_version: number
  /** The payment row at this version, as `to_jsonb` wrote it (amounts as strings). */
  snapshot: ColumnType<Record<string, unknown>, string, string>
  created_at: Timestamp
  dispatched_at: Timestamp | null
}

export interface Database {
  partners: PartnersTable
  api_keys: ApiKeysTable
  apps: AppsTable
  merchants: MerchantsTable
  crypto_settlements: CryptoSettlementsTable
  payments: PaymentsTable
  jobs: JobsTable
  idempotency_keys: IdempotencyKeysTable
  payment_events: PaymentEventsTable
}

export type MerchantRow = Selectable<MerchantsTable>
export type CryptoSettlementRow = Selectable<CryptoSettlementsTable>
export type PaymentRow = Selectable<PaymentsTable>
export type NewPayment = Insertable<PaymentsTable>
export type PaymentUpdate = Updateable<PaymentsTable>
export type JobRow = Selectable<JobsTable>
export type PaymentEventRow = Selectable<PaymentEventsTable>
