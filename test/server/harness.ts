import type { FastifyInstance, InjectOptions, LightMyRequestResponse } from 'fastify'
import { createApiKey, createAppId, createPartner } from '../../src/server/accounts/accounts.js'
import { buildApp } from '../../src/server/app.js'
import type { ServerConfig } from '../../src/server/config.js'
import type { Db } from '../../src/server/store/db.js'
import type { KeyRole, Mode } from '../../src/server/store/schema.js'
import { undocumented } from '../contract/documented.js'
import { createTestDatabase } from '../postgres.js'

/**
 * An in-process server on its own fresh database (cloned from the migrated template).
 *
 * ```ts
 * const t = await createTestServer()
 * const { apiKey } = await t.createKey('test')            // partner key of t.partnerId
 * const res = await t.app.inject({ method: 'GET', url: '/v1/merchants', headers: { 'api-key': apiKey } })
 * await t.close()
 * ```
 */
export interface TestServer {
  app: FastifyInstance
  db: Db
  /** Connection string of this server's database. */
  databaseUrl: string
  /** A partner made at start; createKey/createAppId default to it. */
  partnerId: string
  createPartner(): Promise<string>
  createKey(
    mode?: Mode,
    role?: KeyRole,
    partnerId?: string,
  ): Promise<{ apiKey: string; keyId: string; partnerId: string }>
  createAppId(mode?: Mode, partnerId?: string): Promise<{ appId: string; partnerId: string }>
  /** `app.inject` returning the parsed JSON body as `json`. */
  request(options: InjectOptions): Promise<LightMyRequestResponse & { json: any }>
  /** Moves the app clock (buildApp's `now`) by this many milliseconds. */
  advanceTime(ms: number): void
  close(): Promise<void>
}

export interface TestServerOptions {
  /** Config-file-shaped overrides (rate limit is off unless given here). */
  config?: Record<string, unknown>
  /** Start of the fake clock; the real clock when omitted (time still moves with advanceTime). */
  startTime?: Date
  /** Fast paths on or off (fastPath.ts); by default on, unless CAIPAY_FAST_PATHS=0. */
  fastPaths?: boolean
}

export async function createTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const pg = await createTestDatabase()
  let offset = 0
  const base = options.startTime
  const now = () => new Date((base ? base.getTime() : Date.now()) + offset)
  const app = await buildApp({
    db: pg.db,
    config: { rateLimit: false, ...options.config } as Partial<ServerConfig>,
    now,
    // CI runs the gateway and payments suites a second time with every fast path off (vitest.config.ts).
    fastPaths: options.fastPaths ?? process.env.CAIPAY_FAST_PATHS !== '0',
  })
  const partnerId = await createPartner(pg.db)
  return {
    app,
    db: pg.db,
    databaseUrl: pg.url,
    partnerId,
    createPartner: () => createPartner(pg.db),
    createKey: (mode = 'test', role = 'partner', partner = partnerId) =>
      createApiKey(pg.db, { partnerId: partner, mode, role }),
    createAppId: (mode = 'test', partner = partnerId) => createAppId(pg.db, { partnerId: partner, mode }),
    async request(injectOptions) {
      const response = await app.inject(injectOptions)
      // Every answer a test sees is one the published document lists (status, and error code per status).
      const mismatch = undocumented(
        injectOptions.method ?? 'GET',
        typeof injectOptions.url === 'string' ? injectOptions.url : (injectOptions.url?.pathname ?? ''),
        response.statusCode,
        response.body,
      )
      if (mismatch) throw new Error(`Not in /openapi.json: ${mismatch}`)
      let json: unknown
      try {
        json = response.body === '' ? undefined : JSON.parse(response.body)
      } catch {
        json = undefined
      }
      return Object.assign(response, { json })
    },
    advanceTime(ms) {
      offset += ms
    },
    async close() {
      await app.close()
      await pg.drop()
    },
  }
}
