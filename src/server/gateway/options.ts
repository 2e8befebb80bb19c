import { parseAccountId, sameCaip } from '../../caip/caip.js'
import type {
  OptionsBody,
  OptionsResponse,
  PaymentOption,
  SubscriptionTerms,
} from '../../contract/gateway.js'
import type {
  AssetConfig,
  ChainDriver,
  MandateQuoteContext,
  OptionDraft,
  WalletAccount,
} from '../chains/types.js'
import type { ServerConfig } from '../config.js'
import { fail, paramsError } from '../errors.js'
import { newId } from '../ids.js'
import { toAmount } from '../payments/assets.js'
import { pushReference } from '../payments/push.js'
import { unixSeconds } from '../payments/views.js'
import type { Db } from '../store/db.js'
import type { PaymentRow } from '../store/schema.js'
import { mandateOfPayment, type PendingMandate, withTerms } from '../subscriptions/mandates.js'
import { collectDataSchema, collectDataUrl } from './collectData.js'
import type { DriverRegistry } from './drivers.js'
import { driverPayment, type GatewayPaymentRow, gatewayPaymentJson } from './payment.js'
import { quoteExpiry, tokenAmountFor, usdMinorOf } from './quote.js'
import { findOptions, insertOptions, type NewOption, replaceQuote } from './store.js'

export interface OptionsInput {
  db: Db
  config: ServerConfig
  registry: DriverRegistry
  payment: GatewayPaymentRow
  body: OptionsBody
  now: Date
}

/** Spec row 20: fresh quotes for the wallet's accounts, or re-quotes of the options named in `refresh`. */
export async function paymentOptions(input: OptionsInput): Promise<OptionsResponse> {
  const { config, payment, body } = input
  const sanctioned = sanctionedAccount(config, body)
  if (sanctioned) fail('sanctioned_user', 'This account cannot make payments.', { account: sanctioned })
  const info = gatewayPaymentJson(payment, config)
  if (payment.status === 'expired')
    fail('payment_expired', 'The payment has expired.', { paymentId: payment.id })
  if (payment.status !== 'requires_action') {
    const resultInfo =
      payment.status === 'succeeded' && payment.tx_id
        ? { resultInfo: { txId: payment.tx_id, optionAmount: payment.option_amount ?? info.amount } }
        : {}
    return { options: [], info, ...resultInfo }
  }
  const accounts = walletAccounts(body)
  if (body.refresh?.length) return { options: await requote(input, accounts), info }
  const drafts = await quoteAll(input, accounts)
  await insertOptions(input.db, drafts, input.now)
  const push = await pushOptions(input)
  return { options: [...drafts.map((o) => optionJson(config, o)), ...push], info }
}

/**
 * The push options (docs/push-payments.md): one per live asset that offers them, whatever accounts the
 * wallet advertised (a buyer who can only send pays these), all under the payment's one reference key.
 * They carry no actions and are not stored: nothing of them is fetched or confirmed; the chain's scan
 * finds the transfer by its reference. A chain that cannot quote one now (its RPC down) offers none.
 */
export async function pushOptions(input: Omit<OptionsInput, 'body'>): Promise<PaymentOption[]> {
  const { registry, payment, config, now } = input
  // A subscription's period is paid under its mandate: a pushed transfer grants none.
  if (payment.source === 'mandate') return []
  const drivers = registry.drivers(payment.mode).filter((d) => d.pushRequest)
  if (drivers.length === 0) return []
  const out: PaymentOption[] = []
  for (const driver of drivers) {
    // A driver with no reference key (EVM: the deposit address identifies the payment) gets none.
    const reference = driver.newPushReference
      ? await pushReference(input.db, payment.id, driver.newPushReference, now)
      : ''
    for (const asset of driver.assets) {
      if (asset.push === false) continue
      const tokenAmount = tokenAmountFor({ unit: payment.amount_unit, value: payment.amount_value }, asset)
      if (tokenAmount === null || tokenAmount <= 0n) continue
      const expiresAt = unixSeconds(payment.expires_at)
      const request = await driver.pushRequest!({
        payment: driverPayment(payment),
        asset,
        tokenAmount,
        expiresAt,
        reference,
        label: payment.merchant_name,
        publicBaseUrl: config.publicBaseUrl,
      }).catch(() => undefined)
      if (!request) continue
      out.push({
        // Not stored: the reference and the asset name it (a wallet that fetches it gets no actions).
        id: `push_${request.reference.slice(0, 16)}_${out.length}`,
        account: `${driver.caip2}:${request.recipient}`,
        amount: toAmount(`caip19/${asset.id}`, tokenAmount.toString(), config),
        etaS: 0,
        expiresAt,
        actions: [],
        source: 'push',
        push: request,
      })
    }
  }
  return out
}

/** What never changes about a payment once created: quotes are made from these alone. */
type PaymentFacts = Pick<
  PaymentRow,
  'id' | 'mode' | 'merchant_id' | 'amount_unit' | 'amount_value' | 'expires_at' | 'capture_method' | 'source'
>

/** What quoting needs: the payment's facts, never its state. */
interface QuoteInput {
  config: ServerConfig
  registry: DriverRegistry
  payment: PaymentFacts
  now: Date
  db: Db
}

function sanctionedAccount(config: ServerConfig, body: OptionsBody): string | undefined {
  return body.accounts.find((a) => config.sanctioned.some((s) => sameCaip(s, a)))
}

function walletAccounts(body: OptionsBody): WalletAccount[] {
  return dedupe(body.accounts).map((id): WalletAccount => ({ ...parseAccountId(id), id }))
}

function dedupe(accounts: readonly string[]): string[] {
  return accounts.filter((a, i) => accounts.findIndex((b) => sameCaip(a, b)) === i)
}

async function quoteAll(input: QuoteInput, accounts: readonly WalletAccount[]): Promise<NewOption[]> {
  const { registry, payment } = input
  const drafts: NewOption[] = []
  for (const account of accounts) {
    const driver = registry.driver(payment.mode, account.chainId)
    // Rule 1: an account on a chain the service does not serve simply yields no option.
    if (!driver) continue
    for (const asset of driver.assets)
      drafts.push(...(await quoteOne(input, driver, account, accounts, asset)))
  }
  return drafts
}

async function requote(input: OptionsInput, accounts: readonly WalletAccount[]): Promise<PaymentOption[]> {
  const { registry, payment, now, body } = input
  const ids = body.refresh ?? []
  const rows = await findOptions(input.db, payment.id, ids)
  const known = new Set(rows.map((r) => r.id))
  const unknown = ids.findIndex((id) => !known.has(id))
  if (unknown !== -1)
    throw paramsError(`body.refresh.${unknown}`, `Unknown option ${ids[unknown]} for this payment.`)
  const out: PaymentOption[] = []
  for (const id of ids) {
    const row = rows.find((r) => r.id === id)!
    const account = accounts.find((a) => sameCaip(a.id, row.account))
    if (!account) {
      throw paramsError(
        'body.accounts',
        `Option ${id} is for ${row.account}, which is not among the accounts sent.`,
      )
    }
    const driver = registry.driver(payment.mode, row.chain_id)
    const asset = driver?.assets.find((a) => sameCaip(a.id, row.asset))
    if (!driver || !asset) continue
    const fresh = (await quoteOne(input, driver, account, accounts, asset)).find((d) => d.kind === row.kind)
    // The account can no longer pay this way (e.g. its balance fell short): the option is gone.
    if (!fresh) continue
    const replaced = { ...fresh, id: row.id }
    await replaceQuote(input.db, replaced, now)
    out.push(optionJson(input.config, replaced))
  }
  return out
}

async function quoteOne(
  input: QuoteInput,
  driver: ChainDriver,
  account: WalletAccount,
  accounts: readonly WalletAccount[],
  asset: AssetConfig,
): Promise<NewOption[]> {
  const { payment, now } = input
  const tokenAmount = tokenAmountFor({ unit: payment.amount_unit, value: payment.amount_value }, asset)
  if (tokenAmount === null || tokenAmount <= 0n) return []
  const expiresAt = quoteExpiry(unixSeconds(now), unixSeconds(payment.expires_at))
  const context = {
    payment: driverPayment(payment),
    account,
    accounts,
    asset,
    tokenAmount,
    expiresAt,
    now: unixSeconds(now),
  }
  let drafts: (OptionDraft & { subscription?: SubscriptionTerms })[]
  if (payment.source === 'mandate') {
    // A subscription's first period: only a mandate option, from a driver that can charge one.
    const mandate = await mandateOfPayment(input.db, payment.id)
    if (!mandate || !driver.quoteMandate) return []
    drafts = await quoteMandate(driver, { ...context, mandate: mandate.terms }, mandate)
  } else {
    drafts = await driver.quote(context)
  }
  const collect = collectDataRequired(input)
  return drafts.map((d) => ({
    id: newId('option'),
    paymentId: payment.id,
    chainId: driver.caip2,
    kind: d.kind,
    account: account.id,
    asset: asset.id,
    tokenAmount,
    etaS: d.etaS,
    actions: d.actions,
    // The terms go with the option: confirm activates the subscription from them.
    state: d.subscription ? withTerms(d.state, d.subscription) : d.state,
    ...(d.subscription ? { subscription: d.subscription } : {}),
    expiresAt,
    collectDataRequired: collect,
  }))
}

async function quoteMandate(
  driver: ChainDriver,
  ctx: MandateQuoteContext,
  mandate: PendingMandate,
): Promise<(OptionDraft & { subscription: SubscriptionTerms })[]> {
  const drafts = await driver.quoteMandate!(ctx)
  return drafts.map(({ spender, ...draft }) => ({
    ...draft,
    subscription: {
      subscriptionId: mandate.terms.subscriptionId,
      asset: ctx.asset.id,
      amountPerPeriod: ctx.tokenAmount.toString(),
      interval: mandate.terms.interval,
      intervalCount: mandate.terms.intervalCount,
      periods: mandate.terms.periods,
      endAt: mandate.terms.endAt,
      spender,
    },
  }))
}

/** Payments worth at least `collectDataAtMinor` USD cents ask the buyer for identity data first. */
export function collectDataRequired(input: {
  config: ServerConfig
  registry: DriverRegistry
  payment: PaymentFacts
}): boolean {
  const threshold = input.config.collectDataAtMinor
  if (threshold === null) return false
  const assets = input.registry.drivers(input.payment.mode).flatMap((d) => d.assets)
  const usd = usdMinorOf({ unit: input.payment.amount_unit, value: input.payment.amount_value }, assets)
  return usd !== null && usd >= BigInt(threshold)
}

function optionJson(config: ServerConfig, o: NewOption): PaymentOption {
  return {
    id: o.id,
    account: o.account,
    amount: toAmount(`caip19/${o.asset}`, o.tokenAmount.toString(), config),
    etaS: o.etaS,
    expiresAt: o.expiresAt,
    actions: o.actions,
    ...(o.subscription ? { subscription: o.subscription } : {}),
    ...(o.collectDataRequired
      ? {
          collectData: {
            url: collectDataUrl(config.publicBaseUrl, o.paymentId, o.id),
            schema: collectDataSchema,
          },
        }
      : {}),
  }
}
