/**
 * An App-Id copied out of a wallet and abused: the operator revokes it with `caipay apps revoke` (its own
 * process, as an operator runs it) and two API instances, each holding it in a 60 s credential cache,
 * refuse it at once; `caipay apps list` shows it revoked.
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApiKey, createAppId, createPartner } from '../../src/server/accounts/accounts.js'
import { resolveConfig } from '../../src/server/config.js'
import { type RunningServer, startServer } from '../../src/server/server.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'

const bin = fileURLToPath(new URL('../../bin/caipay.js', import.meta.url))

let pg: TestDatabase
const servers: RunningServer[] = []
beforeAll(async () => {
  pg = await createTestDatabase()
})
afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()))
  await pg?.drop()
})

function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args, '--database-url', pg.url], {
      env: { ...process.env, DATABASE_URL: '' },
    })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

describe('caipay apps revoke', () => {
  it('a revoked App-Id is refused by every instance at once (well before the caches’ 60 s); apps list shows it', {
    timeout: 60_000,
  }, async () => {
    const start = async () => {
      const server = await startServer({
        port: 0,
        databaseUrl: pg.url,
        role: 'api',
        config: resolveConfig({ rateLimit: false, authCacheMs: 60_000 }),
      })
      servers.push(server)
      return server
    }
    const [a, b] = [await start(), await start()]
    const partnerId = await createPartner(pg.db)
    const { apiKey } = await createApiKey(pg.db, { partnerId, mode: 'test' })
    const { appId } = await createAppId(pg.db, { partnerId, mode: 'test' })
    const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
      fetch(`${a.url}${path}`, {
        method: 'POST',
        headers: { 'api-key': apiKey, 'content-type': 'application/json', ...headers },
        body: JSON.stringify(body),
      }).then((r) => r.json() as Promise<{ merchant: { id: string }; paymentId: string }>)
    const { merchant } = await post(
      '/v1/merchants',
      { merchantName: 'Shop', merchantEmail: 'shop@example.com' },
      { 'idempotency-key': 'm-revoke' },
    )
    const { paymentId } = await post(
      '/v1/payments',
      { referenceId: 'revoke', amount: { unit: 'iso4217/USD', value: '100' } },
      { 'merchant-id': merchant.id },
    )
    const read = (server: RunningServer) =>
      fetch(`${server.url}/v1/gateway/payment/${paymentId}`, {
        headers: { 'app-id': appId, 'client-id': 'abuser' },
      }).then(async (r) => ({ status: r.status, body: (await r.json()) as { code?: string } }))
    // Both instances hold the App-Id in their caches.
    expect([(await read(a)).status, (await read(b)).status]).toEqual([200, 200])

    const revoked = await cli(['apps', 'revoke', appId, '--json'])
    expect(revoked.code, revoked.stderr).toBe(0)
    const revokedAt = Date.now()
    expect(JSON.parse(revoked.stdout)).toMatchObject({ appId, partnerId, revokedAt: expect.any(String) })
    for (;;) {
      const [ra, rb] = [await read(a), await read(b)]
      if (ra.status === 401 && rb.status === 401) {
        expect([ra.body.code, rb.body.code]).toEqual(['invalid_app_id', 'invalid_app_id'])
        break
      }
      expect(Date.now() - revokedAt).toBeLessThan(10_000)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }

    const listed = await cli(['apps', 'list', '--json'])
    const row = (JSON.parse(listed.stdout) as { appId: string; revokedAt: string | null }[]).find(
      (r) => r.appId === appId,
    )
    expect(row?.revokedAt).toBe(JSON.parse(revoked.stdout).revokedAt)
    expect((await cli(['apps', 'list'])).stdout).toMatch(/REVOKED/)
    // Again: nothing changes; an unknown id is an error.
    expect(JSON.parse((await cli(['apps', 'revoke', appId, '--json'])).stdout).revokedAt).toBe(
      JSON.parse(revoked.stdout).revokedAt,
    )
    expect((await cli(['apps', 'revoke', 'app_test_unknown'])).code).toBe(1)
  })
})
