import { AuthCache, registerAuthCache } from './authCache.js'
import { FinalStatuses } from './payments/finalStatuses.js'

/**
 * Every fast path of the server behind one seam: one FastPath per app (`app.fastPath`), owning every
 * per-process memo as instance state. A shortcut answers what it knows, or undefined for "not known:
 * take the plain path", so the plain path alone is always correct and a shortcut only ever skips work.
 * `fastPaths: false` (config file, or buildApp's option) makes every shortcut know nothing; CI runs the
 * gateway and payments suites both ways (CAIPAY_FAST_PATHS=0, see vitest.config.ts).
 *
 * The fast paths, and what each costs and saves, are listed in docs/performance.md:
 * - `auth`: API key, App-Id and Merchant-Id lookups reused for `authCacheMs` (authCache.ts);
 * - `finalStatuses`: a final payment's status answer (payments/finalStatuses.ts);
 * - outside this class, read from the config by the Solana runtime: a blockhash's validity read shared by
 *   the confirms of one slot (chains/solana/chain.ts `sharedBlockhashValid`).
 * - outside this class, read from the config by the chain runtimes: a key's signature at an EVM confirm
 *   recovered by the node (chains/evm/payerSignature.ts `verifyKeySignatureOnNode`); a relay simulated
 *   only as sent (chains/evm/relay.ts `asSentOnly`); a relay job's first send without the prior-records
 *   lookup (`noPriorRecord`); a landed payment's fee reservation given back in the finisher's
 *   transaction (payments/finisher.ts `releaseReservation`); a relay's fee reservation taken by the
 *   executor key's sender for its whole group, in the transaction that records it (chains/evm/sender.ts,
 *   `reservation`); a live confirm whose plan is a job alone (EVM gasless) as one named statement
 *   (payments/lifecycle.ts `confirmWithJob`), its relay guard read riding in that statement as an
 *   expression that raises to refuse (chains/evm/driver.ts `guardInStatement`, payments/relayGuards.ts
 *   `relayGuardOrRaise`, migration 037); an EVM chain's nodes asked over kept-alive node:http
 *   connections instead of through fetch (chains/keepAliveFetch.ts); the offered authorization read once per confirm and hashed without viem's generic
 *   typed-data walk (chains/evm/driver.ts, authorization.ts `authorizationHashOfKnownShape`); a Solana
 *   confirm with relay guards on in one statement, its fee reservation raising to refuse
 *   (chains/solana/driver.ts `planConfirm`, payments/relayGuards.ts `reserveExecutorFeeOrRaise`), its guard
 *   read left to that statement (chains/solana/driver.ts `verify`); a Solana chain's nodes asked over
 *   kept-alive node:http connections (chains/solana/chain.ts `keepAlive`, chains/keepAliveFetch.ts).
 */
export class FastPath {
  readonly enabled: boolean
  readonly auth: AuthCache
  readonly finalStatuses: FinalStatuses

  constructor(options: { enabled: boolean; authCacheMs: number }) {
    this.enabled = options.enabled
    this.auth = new AuthCache({ ttlMs: options.enabled ? options.authCacheMs : 0 })
    this.finalStatuses = new FinalStatuses(options.enabled ? finalStatusLimit : 0)
  }

  /** Joins the process's revocation fan-out (authCache.ts); returns how to leave it. */
  register(): () => void {
    return registerAuthCache(this.auth)
  }
}

/** Final answers kept per app: ~20,000 polls' worth of payments, a few MB. */
export const finalStatusLimit = 20_000
