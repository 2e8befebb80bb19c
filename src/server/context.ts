import type { ApiVersion } from '../contract/errors.js'
import type { ServerConfig } from './config.js'
import type { FastPath } from './fastPath.js'
import type { ChainProbe } from './metrics/chains.js'
import type { InstanceMetrics } from './metrics/scrape.js'
import type { StatusChanges } from './payments/statusChanges.js'
import type { Db } from './store/db.js'
import type { MerchantRow, Mode } from './store/schema.js'

/** Who is calling, as established by the auth step. */
export interface AuthContext {
  partnerId: string
  /** From the key (or app id) prefix only. */
  mode: Mode
  /** `app`: authenticated with `App-Id` + `Client-Id` (gateway routes only). */
  role: 'partner' | 'wallet' | 'app'
  /** The API key id (`key_...`) or the app id: what rate limits count against. */
  credentialId: string
  /** `Client-Id` sent with an app id; null for API keys. */
  clientId: string | null
  /** The partner's pinned API version. */
  pinnedVersion: ApiVersion
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth step of routes made with defineRoute; null elsewhere. */
    auth: AuthContext | null
    /** The `Merchant-Id` merchant on `merchant` routes (live, not deleted, the caller's). */
    merchant: MerchantRow | null
    /** The version this request is served with (echoed as `Pay-Version`). */
    apiVersion: ApiVersion | null
  }
  interface FastifyInstance {
    db: Db
    config: ServerConfig
    /** Every in-process shortcut and memo of this app (fastPath.ts). */
    fastPath: FastPath
    /** The clock of the app (tests pass a fake one to buildApp). */
    now(): Date
    /** Status reads waiting for their payment's status to change (`Prefer: wait`). */
    statusChanges: StatusChanges
    /** What operators read: this instance's metrics and its chains' probes (metrics/). */
    operations: { metrics: InstanceMetrics; probes: readonly ChainProbe[] }
  }
}
