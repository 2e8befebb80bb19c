import { canonicalCaip } from '../../caip/caip.js'
import type { Db } from '../store/db.js'
import { columnsText, namedStatement } from '../store/prepared.js'
import {
  type CryptoSettlementRow,
  type PaymentRow,
  type PaymentUpdate,
  paymentColumns,
} from '../store/schema.js'
import {
  type CapturePlan,
  changePaymentInSteps,
  type PaymentStep,
  type PaymentStepsParams,
} from './lifecycle.js'

/** The settlement destination of a merchant for an asset, if any (for the settlement step). */
export async function settlementFor(
  db: Db,
  merchantId: string,
  asset: string,
): Promise<CryptoSettlementRow | undefined> {
  return (await selectSettlement(db, merchantId, canonicalCaip(asset))).rows[0]
}

/** By its unique key (merchant_id, asset_key): a fixed plan, so a named statement. */
const selectSettlement = namedStatement<CryptoSettlementRow>(
  `SELECT ${columnsText(['id', 'merchant_id', 'partner_id', 'mode', 'asset', 'asset_key', 'destination', 'created_at', 'updated_at'])}
  FROM crypto_settlements WHERE merchant_id = $1 AND asset_key = $2`,
)

/**
 * A payment and, in the same statement, its merchant's settlement destination for `asset` (a CAIP-19 id;
 * undefined: none is read): a chain job's first read, one round trip where it took two. A named statement
 * (two key lookups, a fixed plan): built by kysely, it cost the server about 0.3 ms per live payment to
 * build and compile (docs/performance.md, "Fifth round").
 */
export async function loadPaymentAndSettlement(
  db: Db,
  paymentId: string,
  asset: string | undefined,
): Promise<{ payment: PaymentRow; settlementDestination: string | undefined }> {
  const [row] = (
    await selectPaymentAndSettlement(db, paymentId, asset === undefined ? null : canonicalCaip(asset))
  ).rows
  if (!row) throw new Error(`Payment ${paymentId} not found.`)
  const { settlement_destination, ...payment } = row
  return { payment: payment as PaymentRow, settlementDestination: settlement_destination ?? undefined }
}

const selectPaymentAndSettlement = namedStatement<PaymentRow & { settlement_destination: string | null }>(
  `SELECT ${columnsText(paymentColumns, 'payments')},
    (SELECT s.destination FROM crypto_settlements s
      WHERE s.merchant_id = payments.merchant_id AND s.asset_key = $2::text) AS settlement_destination
  FROM payments WHERE payments.id = $1`,
)

/**
 * Test mode's success: nothing moves on a chain, so the payment succeeds with `test:<id>` and, when the
 * merchant has a crypto settlement for the paid asset, settles at once (`test:<id>:settlement`), each
 * step its own event, in one statement (changePaymentInSteps). `asset` undefined: the payment was never
 * quoted in a token.
 */
export async function succeedTestPayment(
  db: Db,
  params: {
    payment: Pick<PaymentRow, 'id' | 'merchant_id' | 'capture_method'>
    asset: string | undefined
    /** Token minor units paid (what a settlement forwards). */
    value: string
    txId?: string
    now: Date
  },
): Promise<PaymentRow> {
  const { payment, asset, now } = params
  const settlementAsset = asset ? await settlementAssetFor(db, payment, asset) : null
  return changePaymentInSteps(db, {
    paymentId: payment.id,
    from: 'processing',
    steps: testSuccessSteps({ ...params, txId: params.txId ?? `test:${payment.id}`, settlementAsset }),
    now,
  })
}

/**
 * Test mode's whole confirm in one statement: `requires_action -> processing` with what was confirmed
 * (`confirmed`), unless expired at `now`; then as succeedTestPayment.
 */
export async function testConfirmSteps(
  db: Db,
  params: {
    payment: Pick<PaymentRow, 'id' | 'merchant_id' | 'capture_method'>
    confirmed: Pick<PaymentUpdate, 'selected_option_id' | 'buyer' | 'option_amount'>
    asset: string
    /** Token minor units paid (what a settlement forwards). */
    value: string
    txId: string
    /** The asset of the merchant's crypto settlement for `asset`, when already read (null: none). */
    settlementAsset?: string | null | undefined
    now: Date
  },
): Promise<PaymentStepsParams> {
  const { payment, now } = params
  const settlementAsset =
    params.settlementAsset !== undefined
      ? params.settlementAsset
      : await settlementAssetFor(db, payment, params.asset)
  return {
    paymentId: payment.id,
    from: 'requires_action',
    notExpiredAt: now,
    steps: [
      { type: 'payment.processing', set: { processing_at: now, ...params.confirmed, status: 'processing' } },
      ...testSuccessSteps({ ...params, settlementAsset }),
    ],
    now,
  }
}

async function settlementAssetFor(
  db: Db,
  payment: Pick<PaymentRow, 'merchant_id'>,
  asset: string,
): Promise<string | null> {
  return (await settlementFor(db, payment.merchant_id, asset))?.asset ?? null
}

/**
 * `processing -> succeeded`, then settled at once when the merchant settles that asset; a manual-capture
 * payment is held instead (`payment.authorized`), and its capture settles it (payments/capture.ts).
 */
function testSuccessSteps(params: {
  payment: Pick<PaymentRow, 'id' | 'capture_method'>
  value: string
  txId: string
  settlementAsset: string | null
  now: Date
}): PaymentStep[] {
  const { payment, settlementAsset, now } = params
  if (payment.capture_method === 'manual') {
    const plan: CapturePlan = { mode: 'test', settlementAsset, value: params.value }
    return [
      { type: 'payment.succeeded', set: { status: 'succeeded', succeeded_at: now, tx_id: params.txId } },
      {
        type: 'payment.authorized',
        set: { capture_status: 'authorized', capture_plan: JSON.stringify(plan) },
      },
    ]
  }
  const succeeded: PaymentStep = {
    type: 'payment.succeeded',
    set: {
      status: 'succeeded',
      succeeded_at: now,
      tx_id: params.txId,
      ...(settlementAsset === null ? {} : { settlement_status: 'pending' as const }),
    },
  }
  if (settlementAsset === null) return [succeeded]
  return [
    succeeded,
    {
      type: 'payment.settled',
      set: {
        settlement_status: 'succeeded',
        settlement_tx_id: `test:${payment.id}:settlement`,
        settlement_unit: `caip19/${settlementAsset}`,
        settlement_value: params.value,
        settled_at: now,
      },
    },
  ]
}
