import * as z from 'zod/mini'
import { Amount } from './common.js'

/**
 * The partner's balances (`GET /v1/balances`): what the service's ledger holds for the partner and its
 * merchants, per chain, asset and holding address (the collection address), and any reconciliation
 * difference that stops sends from those addresses. See docs/live-mode.md, "The ledger".
 */

/**
 * `collected`: a merchant's payments not yet in a settlement; `settling`: in a settlement transfer not yet
 * mined; `refunds`: refunds owed, until their transfer is mined; `float`: the partner's, which pays its
 * refunds after settlement; `fees`: the settlement fee kept of the partner's payments; `authorized`: a
 * merchant's manual-capture payments held until captured or voided (docs/capture.md).
 */
export const balanceAccounts = ['collected', 'settling', 'refunds', 'float', 'fees', 'authorized'] as const
export const BalanceAccount = z.enum(balanceAccounts)
export type BalanceAccount = z.infer<typeof BalanceAccount>

export const BalancesQuery = z.strictObject({
  merchantId: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
})
export type BalancesQuery = z.infer<typeof BalancesQuery>

export const Balance = z.object({
  /** CAIP-2 of the chain the money is on. */
  chainId: z.string(),
  /** CAIP-19 of the asset. */
  asset: z.string(),
  /** CAIP-10 of the address that holds it (the collection address). */
  holder: z.string(),
  account: BalanceAccount,
  /** The merchant of a `collected`, `settling` or `refunds` account; null for the partner's `float` and `fees`. */
  merchantId: z.nullable(z.string()),
  /** In the asset's minor units (`unit` is `caip19/<asset>`). */
  amount: Amount,
  /** True while an open reconciliation difference at `holder` stops settlements and refunds from it. */
  sendsStopped: z.boolean(),
})
export type Balance = z.infer<typeof Balance>

/** A signed integer of minor units (negative: the chain holds less than the ledger explains). */
const SignedMinorUnits = z
  .string()
  .check(z.regex(/^(0|-?[1-9][0-9]{0,38})$/, 'Expected an integer string of minor units.'))

export const LedgerDifference = z.object({
  id: z.string(),
  chainId: z.string(),
  asset: z.string(),
  holder: z.string(),
  /** The confirmed block the chain's balance was read at. */
  block: z.string().check(z.regex(/^(0|[1-9][0-9]*)$/)),
  /** The chain's balance less what the ledger explains, in the asset's minor units. */
  difference: SignedMinorUnits,
  detectedAt: z.string(),
  message: z.string(),
})
export type LedgerDifference = z.infer<typeof LedgerDifference>

export const BalancesResponse = z.object({
  data: z.array(Balance),
  /** Differences not yet acknowledged by the operator at the holding addresses of `data`. */
  differences: z.array(LedgerDifference),
})
export type BalancesResponse = z.infer<typeof BalancesResponse>
