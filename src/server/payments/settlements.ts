import { fail } from '../errors.js'
import { type Db, inTransaction } from '../store/db.js'
import { preparedStatement } from '../store/prepared.js'
import type { CryptoSettlementRow, PaymentRow, PaymentUpdate } from '../store/schema.js'
import { foldAsset } from './assets.js'
import { changePaymentInSteps, type PaymentStep, settlePayment, succeedPayment } from './lifecycle.js'

/** The settlement destination of a merchant for an asset, if any (for the settlement step). */
export async function settlementFor(
  db: Db,
  merchantId: string,
  asset: string,
): Promise<CryptoSettlementRow | undefined> {
  return (await selectSettlement(db, merchantId, foldAsset(asset))).rows[0]
}

/** By its unique key (merchant_id, asset_key): a fixed plan, so a prepared statement. */
const selectSettlement = preparedStatement((db: Db, merchantId: string, assetKey: string) =>
  db
    .selectFrom('crypto_settlements')
    .select([
      'id',
      'merchant_id',
      'partner_id',
      'mode',
      'asset',
      'asset_key',
      'destination',
      'created_at',
      'updated_at',
    ])
    .where('merchant_id', '=', merchantId)
    .where('asset_key', '=', assetKey),
)

/**
 * Test mode's success: nothing moves on a chain, so the payment succeeds with `test:<id>` and, when the
 * merchant has a crypto settlement for the paid asset, settles at once (`test:<id>:settlement`), each
 * its own state change and event. `asset` undefined: the payment was never quoted in a token.
 */
export async function succeedTestPayment(
  db: Db,
  params: {
    payment: Pick<PaymentRow, 'id' | 'merchant_id'>
    asset: string | undefined
    /** Token minor units paid (what a settlement forwards). */
    value: string
    txId?: string
    now: Date
  },
): Promise<PaymentRow> {
  return inTransaction(db, (trx) => succeedInTestMode(trx, params))
}

async function succeedInTestMode(
  db: Db,
  params: Parameters<typeof succeedTestPayment>[1],
): Promise<PaymentRow> {
  const { payment, asset, value, txId, now } = params
  const settlementAsset = asset
    ? ((await settlementFor(db, payment.merchant_id, asset))?.asset ?? null)
    : null
  const succeeded = await succeedPayment(db, {
    paymentId: payment.id,
    txId: txId ?? `test:${payment.id}`,
    now,
    settlement: settlementAsset === null ? undefined : {},
  })
  if (!succeeded) fail('invalid_state', 'The payment is no longer processing.', { paymentId: payment.id })
  if (settlementAsset === null) return succeeded
  const settled = await settlePayment(db, {
    paymentId: payment.id,
    txId: `test:${payment.id}:settlement`,
    assetId: settlementAsset,
    value,
    now,
  })
  return settled ?? succeeded
}

/**
 * Test mode's whole confirm in one statement (changePaymentInSteps): `requires_action -> processing` with
 * what was confirmed (`confirmed`), unless expired at `now`; `succeeded` with `txId`; and settled at once
 * when the merchant settles `asset`. Each step writes the event it would have written on its own.
 */
export async function confirmTestPayment(
  db: Db,
  params: {
    payment: Pick<PaymentRow, 'id' | 'merchant_id'>
    confirmed: Pick<PaymentUpdate, 'selected_option_id' | 'buyer' | 'option_amount'>
    asset: string
    /** Token minor units paid (what a settlement forwards). */
    value: string
    txId: string
    /** The asset of the merchant's crypto settlement for `asset`, when already read (null: none). */
    settlementAsset?: string | null
    now: Date
  },
): Promise<PaymentRow> {
  const { payment, now } = params
  const settlementAsset =
    params.settlementAsset !== undefined
      ? params.settlementAsset
      : ((await settlementFor(db, payment.merchant_id, params.asset))?.asset ?? null)
  const steps: PaymentStep[] = [
    {
      type: 'payment.processing',
      set: { processing_at: now, ...params.confirmed, status: 'processing' },
    },
    {
      type: 'payment.succeeded',
      set: {
        status: 'succeeded',
        succeeded_at: now,
        tx_id: params.txId,
        ...(settlementAsset === null ? {} : { settlement_status: 'pending' as const }),
      },
    },
  ]
  if (settlementAsset !== null) {
    steps.push({
      type: 'payment.settled',
      set: {
        settlement_status: 'succeeded',
        settlement_tx_id: `test:${payment.id}:settlement`,
        settlement_unit: `caip19/${settlementAsset}`,
        settlement_value: params.value,
        settled_at: now,
      },
    })
  }
  return changePaymentInSteps(db, {
    paymentId: payment.id,
    from: 'requires_action',
    notExpiredAt: now,
    steps,
    now,
  })
}
