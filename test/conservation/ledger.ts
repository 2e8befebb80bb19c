import type { PaymentView, RefundView } from './judge.js'

/**
 * "The ledger agrees with both": the hook for issue 37's ledger, which lands separately and serves the
 * partner's balances at `GET /v1/balances`. `CONSERVATION_LEDGER` is the switch:
 *
 * - `auto` (default): checked when the server serves the endpoint, reported as not served otherwise;
 * - `on`: the endpoint must be served (a run fails without it);
 * - `off`: not read.
 *
 * `expectedBalances` is what the chain and the API say each account must hold after a drained run;
 * `readBalances` maps the endpoint's answer onto the same accounts. Both are written against the issue's
 * account list (per merchant: collected and not settled, in a sent settlement, refunds owed; the
 * partner's float) and keyed by account name: wiring the endpoint's real shape in means editing
 * `readBalances` only.
 */
export type LedgerReader = () => Promise<{ status: number; json: unknown } | undefined>

export interface LedgerFacts {
  asset: string
  collection: string
  payments: readonly PaymentView[]
  refunds: readonly RefundView[]
  /** The collection address's token balance on chain now. */
  collectionBalance: bigint
}

const mode = (process.env.CONSERVATION_LEDGER ?? 'auto') as 'auto' | 'on' | 'off'

/** After a drained run every merchant's collected balance, in-flight settlement and owed refund is zero. */
export function expectedBalances(facts: LedgerFacts): Map<string, bigint> {
  const expected = new Map<string, bigint>()
  const merchants = new Set(facts.payments.map((p) => p.destination.toLowerCase()))
  for (const destination of merchants) {
    expected.set(`collected:${destination}`, 0n)
    expected.set(`settling:${destination}`, 0n)
    expected.set(`refunds_owed:${destination}`, 0n)
  }
  // Everything at the collection address is then the partner's: fees and what is left of the float.
  expected.set(`collection:${facts.collection.toLowerCase()}`, facts.collectionBalance)
  return expected
}

/**
 * The endpoint's answer as `account name -> balance`. Assumed shape (to adjust when the endpoint lands):
 * `{ data: [{ account: 'collected' | 'settling' | 'refunds_owed' | 'float' | 'fees', holder, asset, value }] }`,
 * with the partner's float and fees together making up the collection address.
 */
export function readBalances(json: unknown, facts: LedgerFacts): Map<string, bigint> {
  const rows = ((json as { data?: unknown[] })?.data ?? []) as {
    account?: string
    holder?: string
    asset?: string
    value?: string
  }[]
  const balances = new Map<string, bigint>()
  const add = (key: string, value: bigint) => balances.set(key, (balances.get(key) ?? 0n) + value)
  for (const row of rows.filter((r) => r.asset === facts.asset)) {
    const value = BigInt(row.value ?? '0')
    if (row.account === 'float' || row.account === 'fees')
      add(`collection:${facts.collection.toLowerCase()}`, value)
    else add(`${row.account}:${String(row.holder).toLowerCase()}`, value)
  }
  return balances
}

export async function ledgerAgrees(
  read: LedgerReader,
  facts: LedgerFacts,
): Promise<{ violations: string[]; note: string }> {
  if (mode === 'off') return { violations: [], note: 'not read (CONSERVATION_LEDGER=off)' }
  const answer = await read()
  if (answer === undefined)
    return mode === 'on'
      ? {
          violations: ['ledger: GET /v1/balances is not served (CONSERVATION_LEDGER=on)'],
          note: 'not served',
        }
      : { violations: [], note: 'GET /v1/balances not served: not checked (CONSERVATION_LEDGER=auto)' }
  if (answer.status !== 200)
    return {
      violations: [`ledger: GET /v1/balances answered ${answer.status} ${JSON.stringify(answer.json)}`],
      note: 'error',
    }
  const expected = expectedBalances(facts)
  const actual = readBalances(answer.json, facts)
  const violations = [...expected]
    .filter(([key, value]) => (actual.get(key) ?? 0n) !== value)
    .map(([key, value]) => `ledger: ${key} is ${actual.get(key) ?? 0n}, the chain and the API say ${value}`)
  return { violations, note: `checked ${expected.size} accounts` }
}
