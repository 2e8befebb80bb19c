import type { AuthContext } from './context.js'
import { type JobListener, listenOn } from './jobs/notify.js'
import type { MerchantRow, Mode } from './store/schema.js'

/**
 * Short-lived in-process cache of credential and merchant lookups: without it every merchant call pays
 * two extra database round trips before doing any work.
 *
 * Only hits are cached (an unknown key or merchant always goes to the database). Revoking a key
 * (`revokeApiKey`) and updating or deleting a merchant through this process forget the entry at once in
 * every cache of the process; other instances forget it when the change commits, through the
 * `caipay_credentials` notification (`listenForCredentialChanges`; migration 008), or at the latest
 * when their entry's TTL runs out should that connection be down.
 */

interface Entry<V> {
  value: V
  until: number
}

/** A bounded map whose entries live `ttlMs`; when full, the oldest insertion goes first. */
class TtlMap<V> {
  readonly #entries = new Map<string, Entry<V>>()
  constructor(
    private readonly ttlMs: number,
    private readonly maxEntries: number,
  ) {}

  get(key: string): V | undefined {
    const entry = this.#entries.get(key)
    if (entry === undefined) return undefined
    if (entry.until <= performance.now()) {
      this.#entries.delete(key)
      return undefined
    }
    return entry.value
  }

  set(key: string, value: V): void {
    this.#entries.delete(key)
    if (this.#entries.size >= this.maxEntries) {
      const oldest = this.#entries.keys().next()
      if (!oldest.done) this.#entries.delete(oldest.value)
    }
    this.#entries.set(key, { value, until: performance.now() + this.ttlMs })
  }

  deleteWhere(match: (value: V) => boolean): void {
    for (const [key, entry] of this.#entries) if (match(entry.value)) this.#entries.delete(key)
  }

  clear(): void {
    this.#entries.clear()
  }
}

/** The cached part of an App-Id login: everything but the per-request Client-Id. */
export type AppAuth = Omit<AuthContext, 'clientId'>

export class AuthCache {
  readonly enabled: boolean
  readonly #apiKeys: TtlMap<AuthContext>
  readonly #apps: TtlMap<AppAuth>
  readonly #merchants: TtlMap<MerchantRow>
  /**
   * Bumped by every invalidation: a lookup that was already reading the database when a key was
   * revoked may hold the old row, so it must not store it.
   */
  #generation = 0

  constructor(options: { ttlMs: number; maxEntries?: number }) {
    const max = options.maxEntries ?? 10_000
    this.enabled = options.ttlMs > 0
    this.#apiKeys = new TtlMap(options.ttlMs, max)
    this.#apps = new TtlMap(options.ttlMs, max)
    this.#merchants = new TtlMap(options.ttlMs, max)
  }

  /** `keyHash`: the SHA-256 of the key, so the cache holds no secret the database does not. */
  apiKey(keyHash: string, load: () => Promise<AuthContext | undefined>): Promise<AuthContext | undefined> {
    return this.#lookup(this.#apiKeys, keyHash, load)
  }

  app(appId: string, load: () => Promise<AppAuth | undefined>): Promise<AppAuth | undefined> {
    return this.#lookup(this.#apps, appId, load)
  }

  merchant(
    scope: { partnerId: string; mode: Mode; merchantId: string },
    load: () => Promise<MerchantRow | undefined>,
  ): Promise<MerchantRow | undefined> {
    return this.#lookup(this.#merchants, `${scope.partnerId}:${scope.mode}:${scope.merchantId}`, load)
  }

  /** Whether a credential is cached as valid now (a read that loads nothing). */
  knows(credential: { keyHash: string } | { appId: string }): boolean {
    return 'keyHash' in credential
      ? this.#apiKeys.get(credential.keyHash) !== undefined
      : this.#apps.get(credential.appId) !== undefined
  }

  forgetApiKey(keyId: string): void {
    this.#generation++
    this.#apiKeys.deleteWhere((auth) => auth.credentialId === keyId)
  }

  forgetMerchant(merchantId: string): void {
    this.#generation++
    this.#merchants.deleteWhere((merchant) => merchant.id === merchantId)
  }

  forgetApp(appId: string): void {
    this.#generation++
    this.#apps.deleteWhere((app) => app.credentialId === appId)
  }

  /** A `caipay_credentials` payload, `<table>:<id>`; anything else clears the whole cache. */
  forgetChanged(payload: string): void {
    const [table, id] = payload.split(':', 2)
    if (table === 'api_keys' && id) this.forgetApiKey(id)
    else if (table === 'apps' && id) this.forgetApp(id)
    else if (table === 'merchants' && id) this.forgetMerchant(id)
    else this.clear()
  }

  clear(): void {
    this.#generation++
    this.#apiKeys.clear()
    this.#apps.clear()
    this.#merchants.clear()
  }

  async #lookup<V extends object>(
    map: TtlMap<V>,
    key: string,
    load: () => Promise<V | undefined>,
  ): Promise<V | undefined> {
    if (!this.enabled) return load()
    const hit = map.get(key)
    if (hit !== undefined) return hit
    const generation = this.#generation
    const value = await load()
    // Frozen: one object is shared by every request that hits it.
    if (value !== undefined && generation === this.#generation) map.set(key, Object.freeze(value))
    return value
  }
}

/** Every cache of this process (one per app), so a revocation reaches them all whatever db handle it used. */
const caches = new Set<AuthCache>()

export function registerAuthCache(cache: AuthCache): () => void {
  caches.add(cache)
  return () => {
    caches.delete(cache)
  }
}

/** Forget an API key in every app of this process (ids are unique, so other apps lose nothing). */
export function forgetApiKeyEverywhere(keyId: string): void {
  for (const cache of caches) cache.forgetApiKey(keyId)
}

/** Forget an App-Id in every app of this process. */
export function forgetAppEverywhere(appId: string): void {
  for (const cache of caches) cache.forgetApp(appId)
}

export function forgetMerchantEverywhere(merchantId: string): void {
  for (const cache of caches) cache.forgetMerchant(merchantId)
}

export const credentialsChannel = 'caipay_credentials'

/**
 * Keeps `cache` in step with credential and merchant changes made by any instance. While the
 * connection is down nothing is heard, so every (re)connect clears the cache.
 */
export function listenForCredentialChanges(options: {
  connectionString: string
  cache: AuthCache
  onError?: (error: unknown) => void
}): JobListener {
  const { cache } = options
  return listenOn({
    connectionString: options.connectionString,
    channel: credentialsChannel,
    onMessage: (payload) => cache.forgetChanged(payload),
    onListening: () => cache.clear(),
    ...(options.onError ? { onError: options.onError } : {}),
  })
}
