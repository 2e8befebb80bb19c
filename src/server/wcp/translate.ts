/** caipay's gateway shapes -> the WalletConnect Pay SDK's wire format (wire.ts). */
import type {
  Action,
  CollectData,
  GatewayPayment,
  PaymentOption,
  WalletRpcAction,
} from '../../contract/gateway.js'
import { collectFields } from '../gateway/collectData.js'
import { statusJson } from '../payments/views.js'
import type { PaymentRow } from '../store/schema.js'
import {
  type WcpAction,
  type WcpCollectData,
  type WcpPaymentInfo,
  type WcpPaymentOption,
  type WcpStatusResponse,
  type WcpWalletRpcAction,
  wcpFailureCodes,
} from './wire.js'

export function wcpWalletRpc(action: WalletRpcAction): WcpWalletRpcAction {
  const { chainId, method, params } = action.walletRpc
  return { type: 'walletRpc', data: { chain_id: chainId, method, params: JSON.parse(params) as unknown[] } }
}

export function wcpAction(action: Action): WcpAction {
  return action.type === 'walletRpc'
    ? wcpWalletRpc(action)
    : { type: 'build', data: { data: action.build.data } }
}

/**
 * The hosted form's fields as the SDK lists them. A field's `id` is caipay's form field name, so the
 * `collectedData` a wallet sends back is stored exactly as the hosted form's submission would be.
 */
export function wcpCollectData(collect: CollectData): WcpCollectData {
  return {
    fields: collectFields.map((f) => ({ id: f.name, name: f.title, required: true, type: f.input })),
    url: collect.url,
    ...(collect.schema !== undefined ? { schema: JSON.parse(collect.schema) as unknown } : {}),
  }
}

export function wcpOption(option: PaymentOption): WcpPaymentOption {
  return {
    id: option.id,
    account: option.account,
    amount: option.amount,
    etaS: option.etaS,
    expiresAt: option.expiresAt,
    actions: option.actions.map(wcpAction),
    ...(option.collectData ? { collectData: wcpCollectData(option.collectData) } : {}),
  }
}

export function wcpPaymentInfo(info: GatewayPayment): WcpPaymentInfo {
  const { name, iconUrl } = info.merchant
  return {
    status: info.status,
    amount: info.amount,
    expiresAt: info.expiresAt,
    merchant: { name, ...(iconUrl ? { iconUrl } : {}) },
  }
}

/**
 * caipay's failure codes in the SDK's vocabulary: a Solana transaction that failed on-chain is its
 * `broadcast_failed`; a code it does not know would make it fail to parse the whole answer.
 */
function wcpFailureCode(code: string | null): WcpStatusResponse['failureCode'] {
  if (code === 'transaction_failed') return 'broadcast_failed'
  return (wcpFailureCodes as readonly string[]).includes(code ?? '')
    ? (code as WcpStatusResponse['failureCode'])
    : 'internal_error'
}

/** Status, with `info` once succeeded and `failureCode` once failed (what confirm and status answer). */
export function wcpStatus(row: PaymentRow): WcpStatusResponse {
  const { status, isFinal, pollInMs } = statusJson(row)
  return {
    status,
    isFinal,
    pollInMs,
    ...(status === 'succeeded' && row.tx_id && row.option_amount
      ? { info: { txId: row.tx_id, optionAmount: row.option_amount } }
      : {}),
    ...(status === 'failed' ? { failureCode: wcpFailureCode(row.failure_code) } : {}),
  }
}
