/**
 * The conservation suite's judge: what the chain shows (token Transfer and AuthorizationUsed logs read
 * from the test's own node, never through the proxies caipay uses) against what the API says. Pure
 * functions over plain records, so that every rule is stated once and a failing run names the rule, the
 * payment or refund, and the amounts.
 *
 * Addresses are compared lowercased; amounts are token minor units.
 */
import type { RefundSource } from '../../src/server/refunds/schema.js'

export interface TransferLog {
  hash: string
  blockNumber: bigint
  logIndex: number
  from: string
  to: string
  value: bigint
}

export interface AuthorizationUsedLog {
  hash: string
  authorizer: string
}

export interface PaymentView {
  paymentId: string
  /** gasless: collected at the collection address, settled later less the fee; direct: straight to the destination. */
  kind: 'gasless' | 'direct'
  buyer: string
  /** The merchant's settlement destination. */
  destination: string
  amount: bigint
  feeBps: number
  /** What the API answers: status, info.txId, settlement.successful.txId (null: none yet). */
  api: { status: string; txId?: string; settlementTxId?: string | null; settlementPending: boolean }
  /** The settlement's value the service recorded (token minor units), once succeeded. */
  settlementValue?: bigint
}

export interface RefundView {
  refundId: string
  paymentId: string
  /** The token value the service sends back (its record), and where it draws it from. */
  assetValue: bigint
  paidFrom: RefundSource
  destination: string
  api: { status: string; txId?: string }
}

export interface ChainFacts {
  transfers: readonly TransferLog[]
  authorizations: readonly AuthorizationUsedLog[]
  collection: string
  collectionBefore: bigint
  collectionAfter: bigint
  /** Mints to the collection address (the operator's top-ups of the float). */
  topUps: bigint
  /** Settlement transaction hash -> the payments its one transfer settles (the service's batches). */
  settlementBatches: ReadonlyMap<string, readonly string[]>
}

const lower = (s: string) => s.toLowerCase()
const sum = (xs: readonly bigint[]) => xs.reduce((a, b) => a + b, 0n)
const zero = '0x0000000000000000000000000000000000000000'

/** Every rule the chain and the API must meet after a drained run; each broken rule is one message. */
export function judgeEvm(
  payments: readonly PaymentView[],
  refunds: readonly RefundView[],
  chain: ChainFacts,
) {
  const violations: string[] = []
  const collection = lower(chain.collection)
  const byBuyer = new Map(payments.map((p) => [lower(p.buyer), p]))
  const destinations = new Set(payments.map((p) => lower(p.destination)))
  const refundsOf = (paymentId: string) => refunds.filter((r) => r.paymentId === paymentId)

  // --- Every transfer on chain is a buyer's payment, a settlement, a refund or a top-up.
  for (const t of chain.transfers) {
    const from = lower(t.from)
    const to = lower(t.to)
    const known =
      byBuyer.has(from) ||
      (from === collection && (destinations.has(to) || refunds.some((r) => lower(r.destination) === to))) ||
      (from === zero && to === collection)
    if (!known) violations.push(`transfer nobody explains: ${t.value} from ${t.from} to ${t.to} in ${t.hash}`)
  }

  // --- Buyers debited only for succeeded payments, once each, in the transaction the API names.
  for (const p of payments) {
    const debits = chain.transfers.filter((t) => lower(t.from) === lower(p.buyer))
    const succeeded = p.api.status === 'succeeded'
    const payee = p.kind === 'gasless' ? collection : lower(p.destination)
    if (!succeeded && debits.length > 0)
      violations.push(
        `payment ${p.paymentId} (${p.kind}) is ${p.api.status} in the API but its buyer was debited ${debits.length}x (${debits.map((d) => `${d.value} in ${d.hash}`).join(', ')})`,
      )
    if (succeeded) {
      const ok =
        debits.length === 1 &&
        debits[0]!.value === p.amount &&
        lower(debits[0]!.to) === payee &&
        lower(debits[0]!.hash) === lower(p.api.txId ?? '')
      if (!ok)
        violations.push(
          `payment ${p.paymentId} (${p.kind}) succeeded with txId ${p.api.txId} for ${p.amount}, but the buyer's debits on chain are [${debits.map((d) => `${d.value} to ${d.to} in ${d.hash}`).join(', ')}]`,
        )
    }
    if (p.kind === 'gasless') {
      const used = chain.authorizations.filter((a) => lower(a.authorizer) === lower(p.buyer)).length
      if (used !== (succeeded ? 1 : 0))
        violations.push(
          `payment ${p.paymentId}: ${used} AuthorizationUsed for its buyer on chain, the API says ${p.api.status}`,
        )
    }
    if (succeeded && p.api.settlementPending)
      violations.push(`payment ${p.paymentId}: its settlement is still pending after the drain`)
  }

  // --- Every refund paid once, in the transaction the API names; nothing pending.
  for (const p of payments) {
    const mine = refundsOf(p.paymentId)
    for (const r of mine.filter((x) => x.api.status === 'pending'))
      violations.push(`refund ${r.refundId} of ${p.paymentId} still pending after the drain`)
    const paidBack = chain.transfers.filter(
      (t) => lower(t.from) === collection && mine.some((r) => lower(r.destination) === lower(t.to)),
    )
    const succeeded = mine.filter((r) => r.api.status === 'succeeded')
    const unmatched = [...paidBack]
    for (const r of succeeded) {
      const i = unmatched.findIndex(
        (t) =>
          lower(t.hash) === lower(r.api.txId ?? '') &&
          t.value === r.assetValue &&
          lower(t.to) === lower(r.destination),
      )
      if (i < 0)
        violations.push(
          `refund ${r.refundId} of ${p.paymentId} succeeded with txId ${r.api.txId} for ${r.assetValue}, not found on chain`,
        )
      else unmatched.splice(i, 1)
    }
    for (const t of unmatched)
      violations.push(
        `refund transfer no succeeded refund accounts for (paid twice?): ${t.value} to ${t.to} in ${t.hash} (payment ${p.paymentId}; refunds ${mine.map((r) => `${r.refundId} ${r.api.status} ${r.assetValue}`).join(', ')})`,
      )
  }

  // --- Per destination: what its merchants' buyers paid = what it received + refunds from those payments'
  // own money + fees kept. The delivered amount is also what the service recorded as settled.
  for (const destination of destinations) {
    const here = payments.filter((p) => lower(p.destination) === destination && p.api.status === 'succeeded')
    const delivered = sum(
      chain.transfers
        .filter(
          (t) => lower(t.to) === destination && (lower(t.from) === collection || byBuyer.has(lower(t.from))),
        )
        .map((t) => t.value),
    )
    const debited = sum(here.map((p) => p.amount))
    const refundedCollected = (p: PaymentView) =>
      sum(
        refundsOf(p.paymentId)
          .filter((r) => r.api.status === 'succeeded' && r.paidFrom === 'collected')
          .map((r) => r.assetValue),
      )
    const feeKept = (p: PaymentView) => {
      if (p.kind === 'direct') return 0n
      const fee = (p.amount * BigInt(p.feeBps)) / 10_000n
      const left = p.amount - refundedCollected(p)
      return left < fee ? (left > 0n ? left : 0n) : fee
    }
    const refunded = sum(here.map(refundedCollected))
    const fees = sum(here.map(feeKept))
    if (debited !== delivered + refunded + fees)
      violations.push(
        `destination ${destination}: buyers debited ${debited} != delivered ${delivered} + refunded from collected ${refunded} + fees ${fees} (off by ${debited - delivered - refunded - fees})`,
      )
    const recorded = sum(here.map((p) => (p.kind === 'direct' ? p.amount : (p.settlementValue ?? 0n))))
    if (recorded !== delivered)
      violations.push(
        `destination ${destination}: the service recorded ${recorded} delivered, the chain shows ${delivered}`,
      )
    for (const p of here.filter((x) => x.kind === 'gasless' && x.api.settlementTxId)) {
      const onChain = chain.transfers.some(
        (t) =>
          lower(t.hash) === lower(p.api.settlementTxId!) &&
          lower(t.from) === collection &&
          lower(t.to) === destination,
      )
      if (!onChain)
        violations.push(
          `payment ${p.paymentId}: settlement txId ${p.api.settlementTxId} moves nothing to ${destination} on chain`,
        )
    }
  }

  // --- The collection address keeps exactly the fees and the float not spent on refunds.
  const floatRefunds = sum(
    refunds.filter((r) => r.api.status === 'succeeded' && r.paidFrom === 'float').map((r) => r.assetValue),
  )
  const fees = sum(
    payments
      .filter((p) => p.kind === 'gasless' && p.api.status === 'succeeded')
      .map((p) => {
        const collected = sum(
          refundsOf(p.paymentId)
            .filter((r) => r.api.status === 'succeeded' && r.paidFrom === 'collected')
            .map((r) => r.assetValue),
        )
        const fee = (p.amount * BigInt(p.feeBps)) / 10_000n
        const left = p.amount - collected
        return left < fee ? (left > 0n ? left : 0n) : fee
      }),
  )
  const kept = chain.collectionAfter - chain.collectionBefore
  if (kept !== chain.topUps + fees - floatRefunds)
    violations.push(
      `collection address: changed by ${kept}, expected top-ups ${chain.topUps} + fees ${fees} - refunds from the float ${floatRefunds} = ${chain.topUps + fees - floatRefunds}`,
    )

  violations.push(...judgeSolvency(payments, refunds, chain))
  return violations
}

/**
 * In the chain's own order: after every refund sent from the collection address, what is left there
 * still covers what it owes merchants for payments collected and not yet settled (a payment's money less
 * its fee and less what went back to its buyer). A refund that takes it lower was paid with other
 * merchants' money. Lenient where the order alone cannot tell (a refund drawn from the float mined
 * before its payment's settlement lowers that payment's debt), never stricter than the rule.
 */
export function judgeSolvency(
  payments: readonly PaymentView[],
  refunds: readonly RefundView[],
  chain: ChainFacts,
) {
  const violations: string[] = []
  const collection = lower(chain.collection)
  const byBuyer = new Map(payments.map((p) => [lower(p.buyer), p]))
  const refundDestinations = new Map(refunds.map((r) => [lower(r.destination), r.paymentId]))
  const owed = new Map<string, bigint>()
  const settledBy = new Map([...chain.settlementBatches].map(([hash, ids]) => [lower(hash), ids]))
  const ordered = [...chain.transfers].sort((a, b) =>
    a.blockNumber === b.blockNumber ? a.logIndex - b.logIndex : a.blockNumber < b.blockNumber ? -1 : 1,
  )
  let balance = chain.collectionBefore
  for (const t of ordered) {
    const from = lower(t.from)
    const to = lower(t.to)
    if (to === collection) {
      balance += t.value
      const payer = byBuyer.get(from)
      if (payer?.kind === 'gasless')
        owed.set(payer.paymentId, t.value - (t.value * BigInt(payer.feeBps)) / 10_000n)
      continue
    }
    if (from !== collection) continue
    balance -= t.value
    const settled = settledBy.get(lower(t.hash))
    if (settled) {
      for (const id of settled) owed.set(id, 0n)
      continue
    }
    const paymentId = refundDestinations.get(to)
    if (paymentId === undefined) continue
    const debt = owed.get(paymentId) ?? 0n
    owed.set(paymentId, debt > t.value ? debt - t.value : 0n)
    const owedToOthers = sum([...owed.values()])
    if (balance < owedToOthers)
      violations.push(
        `refund ${t.value} for ${paymentId} in ${t.hash} (block ${t.blockNumber}) left the collection address ${balance}, below the ${owedToOthers} it owed merchants for unsettled payments: paid with other merchants' money`,
      )
  }
  return violations
}
