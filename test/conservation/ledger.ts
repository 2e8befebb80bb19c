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
  /**
   * The operator's whole book at the collection address (every account's stored balance, the operator's
   * unallocated top-ups included, which no partner sees), read from the service's database.
   */
  book: readonly { kind: string; owner: string; balance: bigint }[]
}

const mode = (process.env.CONSERVATION_LEDGER ?? 'on') as 'auto' | 'on' | 'off'

interface BalanceRow {
  asset: string
  holder: string
  account: string
  merchantId: string | null
  amount: { value: string }
}

/**
 * After a drained run: in the partner's view (`GET /v1/balances`) every merchant's collected balance,
 * in-flight settlement and owed refund is zero, and no reconciliation difference is open; in the
 * operator's book the accounts at the collection address add up to exactly what the chain holds there.
 */
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
  const violations: string[] = []
  const { data, differences } = answer.json as { data: BalanceRow[]; differences: unknown[] }
  const collection = facts.collection.toLowerCase()
  const here = data.filter(
    (row) =>
      row.asset.toLowerCase() === facts.asset.toLowerCase() && row.holder.toLowerCase().endsWith(collection),
  )
  for (const row of here.filter((r) => r.merchantId !== null && BigInt(r.amount.value) !== 0n))
    violations.push(
      `ledger: merchant ${row.merchantId}'s ${row.account} holds ${row.amount.value} after the drain`,
    )
  const partnerHeld = here
    .filter((r) => r.merchantId === null)
    .reduce((sum, r) => sum + BigInt(r.amount.value), 0n)
  if (partnerHeld > facts.collectionBalance)
    violations.push(`ledger: the partner's float and fees (${partnerHeld}) exceed the collection balance`)
  if (differences.length > 0)
    violations.push(`ledger: open reconciliation differences ${JSON.stringify(differences)}`)
  const booked = facts.book.reduce((sum, account) => sum + account.balance, 0n)
  if (booked !== facts.collectionBalance)
    violations.push(
      `ledger: the book at the collection address adds up to ${booked}, the chain holds ${facts.collectionBalance} (${facts.book
        .filter((a) => a.balance !== 0n)
        .map((a) => `${a.kind}:${a.owner || 'operator'}=${a.balance}`)
        .join(', ')})`,
    )
  return {
    violations,
    note: `checked ${here.length} accounts in the API and ${facts.book.length} in the book (${booked} held)`,
  }
}
