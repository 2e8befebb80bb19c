import { defaultApiVersion } from '../../contract/errors.js'
import { forgetApiKeyEverywhere, forgetAppEverywhere } from '../authCache.js'
import { isExternalAppId, newApiKey, newAppId, newId, sha256Hex } from '../ids.js'
import type { Db } from '../store/db.js'
import type { KeyRole, Mode } from '../store/schema.js'

/** Partners, API keys and app ids: what the CLI and the test harness create. */

export async function createPartner(db: Db, options: { name?: string; now?: Date } = {}): Promise<string> {
  const id = newId('partner')
  await db
    .insertInto('partners')
    .values({
      id,
      name: options.name ?? null,
      api_version: defaultApiVersion,
      created_at: options.now ?? new Date(),
    })
    .execute()
  return id
}

export async function partnerExists(db: Db, partnerId: string): Promise<boolean> {
  const row = await db.selectFrom('partners').select('id').where('id', '=', partnerId).executeTakeFirst()
  return row !== undefined
}

export interface CreatedApiKey {
  partnerId: string
  keyId: string
  /** The only time the key exists in clear. */
  apiKey: string
}

export async function createApiKey(
  db: Db,
  options: { partnerId: string; mode: Mode; role?: KeyRole; now?: Date },
): Promise<CreatedApiKey> {
  const apiKey = newApiKey(options.mode)
  const keyId = newId('apiKey')
  await db
    .insertInto('api_keys')
    .values({
      id: keyId,
      partner_id: options.partnerId,
      mode: options.mode,
      role: options.role ?? 'partner',
      key_hash: sha256Hex(apiKey),
      key_prefix: apiKey.slice(0, options.mode === 'test' ? 13 : 8),
      created_at: options.now ?? new Date(),
      revoked_at: null,
    })
    .execute()
  return { partnerId: options.partnerId, keyId, apiKey }
}

export async function revokeApiKey(db: Db, keyId: string, now = new Date()): Promise<void> {
  await db.updateTable('api_keys').set({ revoked_at: now }).where('id', '=', keyId).execute()
  // Apps of this process refuse the key at once; other processes once their cache entry expires.
  forgetApiKeyEverywhere(keyId)
}

export async function createAppId(
  db: Db,
  options: { partnerId: string; mode: Mode; now?: Date; externalId?: string },
): Promise<{ partnerId: string; appId: string }> {
  if (options.externalId !== undefined && !isExternalAppId(options.externalId)) {
    throw new Error('An external app id is a WalletConnect project id: 32 lowercase hex characters.')
  }
  const appId = options.externalId ?? newAppId(options.mode)
  const inserted = await db
    .insertInto('apps')
    .values({
      id: appId,
      partner_id: options.partnerId,
      mode: options.mode,
      created_at: options.now ?? new Date(),
      revoked_at: null,
    })
    .onConflict((oc) => oc.column('id').doNothing())
    .returning('id')
    .executeTakeFirst()
  if (!inserted) throw new Error(`The app id ${appId} is already registered.`)
  return { partnerId: options.partnerId, appId }
}

/** What an operator sees of a partner. */
export interface PartnerListing {
  id: string
  name: string | null
  createdAt: string
}

export async function listPartners(db: Db): Promise<PartnerListing[]> {
  const rows = await db.selectFrom('partners').selectAll().orderBy('created_at').orderBy('id').execute()
  return rows.map((row) => ({ id: row.id, name: row.name, createdAt: row.created_at.toISOString() }))
}

/** An API key as listings show it: the prefix people recognise, never the key (it is not stored). */
export interface ApiKeyListing {
  id: string
  partnerId: string
  mode: Mode
  role: KeyRole
  prefix: string
  createdAt: string
  revokedAt: string | null
}

export async function listApiKeys(
  db: Db,
  filter: { partnerId?: string | undefined; mode?: Mode | undefined; keyId?: string } = {},
): Promise<ApiKeyListing[]> {
  let query = db
    .selectFrom('api_keys')
    .select(['id', 'partner_id', 'mode', 'role', 'key_prefix', 'created_at', 'revoked_at'])
  if (filter.keyId !== undefined) query = query.where('id', '=', filter.keyId)
  if (filter.partnerId !== undefined) query = query.where('partner_id', '=', filter.partnerId)
  if (filter.mode !== undefined) query = query.where('mode', '=', filter.mode)
  const rows = await query.orderBy('created_at').orderBy('id').execute()
  return rows.map((row) => ({
    id: row.id,
    partnerId: row.partner_id,
    mode: row.mode,
    role: row.role,
    prefix: row.key_prefix,
    createdAt: row.created_at.toISOString(),
    revokedAt: row.revoked_at?.toISOString() ?? null,
  }))
}

/**
 * Revokes the key with this id. Undefined when no such key exists; a key already revoked keeps its
 * first revocation time.
 */
export async function revokeApiKeyById(
  db: Db,
  keyId: string,
  now = new Date(),
): Promise<ApiKeyListing | undefined> {
  const existing = await db
    .selectFrom('api_keys')
    .select('revoked_at')
    .where('id', '=', keyId)
    .executeTakeFirst()
  if (!existing) return undefined
  if (existing.revoked_at === null) await revokeApiKey(db, keyId, now)
  const [listed] = await listApiKeys(db, { keyId })
  return listed
}

export interface AppListing {
  appId: string
  partnerId: string
  mode: Mode
  createdAt: string
  revokedAt: string | null
}

export async function listApps(
  db: Db,
  filter: { partnerId?: string | undefined; mode?: Mode | undefined; appId?: string } = {},
): Promise<AppListing[]> {
  let query = db.selectFrom('apps').selectAll()
  if (filter.appId !== undefined) query = query.where('id', '=', filter.appId)
  if (filter.partnerId !== undefined) query = query.where('partner_id', '=', filter.partnerId)
  if (filter.mode !== undefined) query = query.where('mode', '=', filter.mode)
  const rows = await query.orderBy('created_at').orderBy('id').execute()
  return rows.map((row) => ({
    appId: row.id,
    partnerId: row.partner_id,
    mode: row.mode,
    createdAt: row.created_at.toISOString(),
    revokedAt: row.revoked_at?.toISOString() ?? null,
  }))
}

/**
 * Revokes the app id: every gateway request with it is refused (`401 invalid_app_id`) by this process at
 * once and by every other instance when the change commits (the `caipay_credentials` notification).
 * Undefined when no such app id exists; one already revoked keeps its first revocation time.
 */
export async function revokeAppById(
  db: Db,
  appId: string,
  now = new Date(),
): Promise<AppListing | undefined> {
  const existing = await db.selectFrom('apps').select('revoked_at').where('id', '=', appId).executeTakeFirst()
  if (!existing) return undefined
  if (existing.revoked_at === null) {
    await db.updateTable('apps').set({ revoked_at: now }).where('id', '=', appId).execute()
    forgetAppEverywhere(appId)
  }
  return (await listApps(db, { appId }))[0]
}
