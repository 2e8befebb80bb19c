import type { FastifyRequest } from 'fastify'
import type { EndpointAuth } from '../contract/endpoints.js'
import { type ApiVersion, apiVersions, defaultApiVersion } from '../contract/errors.js'
import type { AppAuth, AuthCache } from './authCache.js'
import type { AuthContext } from './context.js'
import { fail } from './errors.js'
import { isExternalAppId, modeOfApiKey, modeOfAppId, sha256Hex } from './ids.js'
import type { Db } from './store/db.js'
import type { MerchantRow } from './store/schema.js'

/** Headers whose values must be printable ASCII: anything else is `400 header_not_ascii`. */
const asciiHeaders = [
  'api-key',
  'merchant-id',
  'idempotency-key',
  'pay-version',
  'app-id',
  'client-id',
] as const

/**
 * A header's value; undefined only when absent. An empty value is a value: an empty Idempotency-Key
 * or Pay-Version is refused like any other malformed one, never taken for "not sent" (a client bug
 * that sends an empty key would otherwise silently lose its idempotency).
 */
export function header(request: FastifyRequest, name: string): string | undefined {
  const value = request.headers[name]
  return Array.isArray(value) ? value[0] : value
}

/** A credential header: an empty one is no credential, answered as if it were not sent. */
function credential(request: FastifyRequest, name: string): string | undefined {
  const value = header(request, name)
  return value === '' ? undefined : value
}

export function checkAsciiHeaders(request: FastifyRequest): void {
  for (const name of asciiHeaders) {
    const raw = request.headers[name]
    const values = Array.isArray(raw) ? raw : raw === undefined ? [] : [raw]
    for (const value of values) {
      if (!/^[\x20-\x7e]*$/.test(value)) fail('header_not_ascii', `Header ${name} must be printable ASCII.`)
    }
  }
}

/** Establishes `request.auth` for an endpoint's auth kind (see EndpointAuth). */
export async function authenticate(
  db: Db,
  request: FastifyRequest,
  kind: EndpointAuth,
  cache?: AuthCache,
): Promise<AuthContext> {
  const apiKey = credential(request, 'api-key')
  const appId = credential(request, 'app-id')
  const clientId = credential(request, 'client-id')
  if (apiKey !== undefined && appId !== undefined) {
    fail('conflicting_auth_headers', 'Send either Api-Key or App-Id + Client-Id, not both.')
  }
  if (kind !== 'gateway') {
    if (apiKey === undefined) fail('missing_api_key', 'The Api-Key header is required.')
    const auth = await authenticateKey(db, apiKey, cache)
    if (auth.role !== 'partner') fail('forbidden', 'This key cannot call merchant endpoints.')
    return auth
  }
  if (apiKey !== undefined) return authenticateKey(db, apiKey, cache)
  if (appId === undefined && clientId === undefined) {
    fail('missing_auth_headers', 'Send Api-Key, or App-Id with Client-Id.')
  }
  if (appId === undefined) fail('missing_app_id', 'The App-Id header is required with Client-Id.')
  if (clientId === undefined) fail('missing_client_id', 'The Client-Id header is required with App-Id.')
  return authenticateApp(db, appId, clientId, cache)
}

export async function authenticateKey(
  db: Db,
  apiKey: string,
  cache: AuthCache | undefined,
): Promise<AuthContext> {
  const mode = modeOfApiKey(apiKey)
  if (!mode) fail('invalid_api_key', 'Invalid API key.')
  const keyHash = sha256Hex(apiKey)
  const load = async (): Promise<AuthContext | undefined> => {
    const row = await db
      .selectFrom('api_keys')
      .innerJoin('partners', 'partners.id', 'api_keys.partner_id')
      .select([
        'api_keys.id',
        'api_keys.partner_id',
        'api_keys.mode',
        'api_keys.role',
        'partners.api_version',
      ])
      .where('api_keys.key_hash', '=', keyHash)
      .where('api_keys.revoked_at', 'is', null)
      .executeTakeFirst()
    if (!row || (mode !== undefined && row.mode !== mode)) return undefined
    return {
      partnerId: row.partner_id,
      mode: row.mode,
      role: row.role,
      credentialId: row.id,
      clientId: null,
      pinnedVersion: knownVersion(row.api_version),
    }
  }
  const auth = await (cache ? cache.apiKey(keyHash, load) : load())
  if (!auth) fail('invalid_api_key', 'Invalid API key.')
  return auth
}

async function authenticateApp(
  db: Db,
  appId: string,
  clientId: string,
  cache: AuthCache | undefined,
): Promise<AuthContext> {
  // caipay's own ids carry their mode; an external one (a WalletConnect project id) takes it from its row.
  const mode = modeOfAppId(appId)
  if (!mode && !isExternalAppId(appId)) fail('invalid_app_id', 'Invalid App-Id.')
  if (clientId.length > 255) fail('invalid_params', 'Client-Id is longer than 255 characters.')
  const load = async (): Promise<AppAuth | undefined> => {
    const row = await db
      .selectFrom('apps')
      .innerJoin('partners', 'partners.id', 'apps.partner_id')
      .select(['apps.id', 'apps.partner_id', 'apps.mode', 'partners.api_version'])
      .where('apps.id', '=', appId)
      .where('apps.revoked_at', 'is', null)
      .executeTakeFirst()
    if (!row || (mode !== undefined && row.mode !== mode)) return undefined
    return {
      partnerId: row.partner_id,
      mode: row.mode,
      role: 'app',
      credentialId: row.id,
      pinnedVersion: knownVersion(row.api_version),
    }
  }
  const app = await (cache ? cache.app(appId, load) : load())
  if (!app) fail('invalid_app_id', 'Invalid App-Id.')
  return { ...app, clientId }
}

function knownVersion(version: string): ApiVersion {
  return (apiVersions as readonly string[]).includes(version) ? (version as ApiVersion) : defaultApiVersion
}

/** A merchant of the caller (same partner and mode, not deleted), else `404 merchant_not_found`. */
export async function findMerchant(db: Db, auth: AuthContext, merchantId: string): Promise<MerchantRow> {
  const merchant = await selectMerchant(db, auth, merchantId)
  if (!merchant) fail('merchant_not_found', 'Merchant not found.', { merchantId })
  return merchant
}

function selectMerchant(db: Db, auth: AuthContext, merchantId: string): Promise<MerchantRow | undefined> {
  return db
    .selectFrom('merchants')
    .selectAll()
    .where('id', '=', merchantId)
    .where('partner_id', '=', auth.partnerId)
    .where('mode', '=', auth.mode)
    .where('deleted_at', 'is', null)
    .executeTakeFirst()
}

/** The `Merchant-Id` merchant of a merchant-scoped call. */
export async function resolveMerchantHeader(
  db: Db,
  request: FastifyRequest,
  auth: AuthContext,
  cache?: AuthCache,
): Promise<MerchantRow> {
  const merchantId = credential(request, 'merchant-id')
  if (merchantId === undefined) fail('missing_merchant_id', 'The Merchant-Id header is required.')
  if (merchantId.length > 64) fail('merchant_not_found', 'Merchant not found.')
  if (!cache) return findMerchant(db, auth, merchantId)
  const merchant = await cache.merchant({ partnerId: auth.partnerId, mode: auth.mode, merchantId }, () =>
    selectMerchant(db, auth, merchantId),
  )
  if (!merchant) fail('merchant_not_found', 'Merchant not found.', { merchantId })
  return merchant
}
