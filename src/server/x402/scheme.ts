import type { AssetConfig } from '../chains/types.js'
import type { CooldownSubject } from '../payments/relayGuards.js'
import type { Db } from '../store/db.js'
import type { PaymentPayload, Requirements } from './wire.js'

/**
 * One x402 `exact` scheme on one configured chain. `verify` has no side effects; a valid verdict says
 * what the payload pays and how to settle it through the chain's own jobs.
 */
export interface X402Scheme {
  /** CAIP-2. */
  network: string
  /** The `signers` group of `/supported` (x402 groups them by CAIP family). */
  family: 'eip155:*' | 'solana:*'
  /** Accounts that sign or pay fees for settlements: the chain's executor / fee payer. */
  signers: string[]
  /** `extra` of the `/supported` kind (Solana: the fee payer). */
  extra: Record<string, unknown> | undefined
  /** What the chain lets pay only once (one payment per key), read from the payload; undefined when malformed. */
  key(payload: PaymentPayload, requirements: Requirements): string | undefined
  verify(payload: PaymentPayload, requirements: Requirements, now: Date): Promise<Verdict>
  /** The payment's transaction id once one is signed and recorded. */
  transaction(db: Db, paymentId: string): Promise<string | undefined>
}

export type Verdict = { valid: false; reason: string; message?: string; payer?: string } | ValidPayment

export interface ValidPayment {
  valid: true
  payer: string
  asset: AssetConfig
  /** Minor units of `asset` that move. */
  amount: bigint
  /** Who receives them (the requirement's `payTo`, as the chain spells it). */
  payTo: string
  key: string
  /**
   * What the payer is cooled down by once a send of theirs fails on chain (payments/relayGuards.ts):
   * its address, and a contract payer's code hash.
   */
  cooldownSubjects: readonly CooldownSubject[]
  /**
   * The most the executor's send may cost (smallest native unit): settle refuses it when the caller's
   * budget has less left.
   */
  worstCaseFee: bigint
  /**
   * Set when `enqueue` signs the executor's transaction itself (Solana: the fee payer's signature): its
   * worst-case fee is reserved from the payer's and the caller's budgets in the settle's transaction,
   * before it is signed. (An EVM relay reserves when its job signs it, at that moment's fees.)
   */
  signsAtSettle?: boolean
  /**
   * Records what lands the payment and queues its chain job (in the transaction that records the
   * payment); `credentialId`, the caller's, is charged for the executor's fees a failed send costs.
   */
  enqueue(db: Db, paymentId: string, now: Date, credentialId: string): Promise<void>
}
