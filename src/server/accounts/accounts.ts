import { defaultApiVersion } from '../../contract/errors.js'
import { forgetApiKeyEverywhere } from '../authCache.js'
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
