/** Row types of migration 002_gateway, merged into the server's Database interface. */
import type { Selectable } from 'kysely'
import type { Action, WalletRpcAction } from '../../contract/gateway.js'
import type { JsonValue } from '../chains/types.js'
import type { Json, Numeric, Timestamp } from '../store/schema.js'

export interface PaymentOptionsTable {
  /** `opt_` + random: also the capability for the hosted form of this option (see pages/collect.ts). */
  id: string
  payment_id: string
  /** CAIP-2 chain of the driver that quoted the option (it also builds and confirms it). */
  chain_id: string
  kind: string
  account: string
  asset: string
  /** Token minor units. */
  amount: Numeric
  eta_s: number
  /** As offered; `build` actions carry their opaque data. */
  actions: Json<Action[]>
  state: Json<JsonValue> | null
  /** The resolved actions after fetch: exactly what the wallet signs and confirm checks against. */
  built: Json<WalletRpcAction[]> | null
  /** Quote expiry. */
  expires_at: Timestamp
  collect_data_required: boolean
  collect_data_completed_at: Timestamp | null
  created_at: Timestamp
  updated_at: Timestamp
}

export interface CollectedDataTable {
  option_id: string
  payment_id: string
  fields: Json<Record<string, string>>
  created_at: Timestamp
  updated_at: Timestamp
}

export type PaymentOptionRow = Selectable<PaymentOptionsTable>

declare module '../store/schema.js' {
  interface Database {
    payment_options: PaymentOptionsTable
    collected_data: CollectedDataTable
  }
}
