/**
 * A database dump in the wrong hands: it must not hold a webhook signing secret in plain text, neither in
 * `webhook_endpoints` nor in the stored idempotent answers that replay the creation and the rotation.
 * Replays still return the secret; deliveries still verify with it (the `standardwebhooks` package); a
 * key rotation (`resealSecrets`, what `caipay secrets rotate` runs) moves everything to the new key.
 */
import { randomBytes } from 'node:crypto'
import { sql } from 'kysely'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../../src/server/app.js'
import { resolveConfig } from '../../src/server/config.js'
import { configuredSecretBox } from '../../src/server/secrets.js'
import { resealSecrets } from '../../src/server/secretsRotate.js'
import type { Db } from '../../src/server/store/db.js'
import { createTestServer, type TestServer } from '../server/harness.js'
import { type Receiver, startReceiver, verifyWithStandardWebhooks } from './receiver.js'

const firstKey = randomBytes(32).toString('base64')
const secondKey = randomBytes(32).toString('hex')

let t: TestServer
let apiKey: string
let receiver: Receiver
beforeAll(async () => {
  t = await createTestServer({ config: { secretsKey: firstKey } })
  apiKey = (await t.createKey('test')).apiKey
  receiver = await startReceiver()
})
afterAll(async () => {
  await receiver?.close()
  await t?.close()
})

/** Every row of every table of the database, as text. */
async function dump(db: Db): Promise<string> {
  const tables = await sql<{ table_name: string }>`
    SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_type = 'BASE TABLE'
  `.execute(db)
  const parts: string[] = []
  for (const { table_name } of tables.rows) {
    const rows = await sql<{ row: string }>`SELECT t::text AS row FROM ${sql.table(table_name)} t`.execute(db)
    parts.push(...rows.rows.map((r) => r.row))
  }
  return parts.join('\n')
}

/** The secret and the base64 part after `whsec_`: a dump holds neither. */
function expectAbsent(dumped: string, secret: string) {
  expect(dumped).not.toContain(secret)
  expect(dumped).not.toContain(secret.slice('whsec_'.length))
}

type App = TestServer['app']
const call = (app: App, method: 'POST' | 'GET', url: string, body?: unknown, idempotencyKey?: string) =>
  app
    .inject({
      method,
      url,
      headers: { 'api-key': apiKey, ...(idempotencyKey ? { 'idempotency-key': idempotencyKey } : {}) },
      ...(body !== undefined ? { payload: body as Record<string, unknown> } : {}),
    })
    .then((res) => ({ status: res.statusCode, json: JSON.parse(res.body), headers: res.headers }))

describe('webhook secrets at rest', () => {
  it('a dump holds no secret; replays return it; deliveries sign with it; a key rotation re-seals it all', async () => {
    const created = await call(t.app, 'POST', '/v1/webhook-endpoints', { url: receiver.url }, 'create-1')
    expect(created.status).toBe(201)
    const secret: string = created.json.secret
    expect(secret).toMatch(/^whsec_/)
    const rotated = await call(
      t.app,
      'POST',
      `/v1/webhook-endpoints/${created.json.id}/rotate-secret`,
      {},
      'rot-1',
    )
    expect(rotated.status).toBe(200)
    const newSecret: string = rotated.json.secret

    // Replays within the window answer what the first answers did.
    const replayedCreate = await call(
      t.app,
      'POST',
      '/v1/webhook-endpoints',
      { url: receiver.url },
      'create-1',
    )
    expect(replayedCreate.headers['idempotent-replayed']).toBe('true')
    expect(replayedCreate.json).toEqual(created.json)
    const replayedRotate = await call(
      t.app,
      'POST',
      `/v1/webhook-endpoints/${created.json.id}/rotate-secret`,
      {},
      'rot-1',
    )
    expect(replayedRotate.json).toEqual({ secret: newSecret })

    const dumped = await dump(t.db)
    expect(dumped).toContain(created.json.id)
    for (const s of [secret, newSecret]) expectAbsent(dumped, s)

    // A delivery is signed with both secrets during the overlap: each verifies on its own.
    expect((await call(t.app, 'POST', `/v1/webhook-endpoints/${created.json.id}/test`, {})).status).toBe(200)
    const [delivered] = await receiver.waitFor(1)
    for (const s of [secret, newSecret]) expect(() => verifyWithStandardWebhooks(s, delivered!)).not.toThrow()

    // Rotation of the key: the new key seals, the old one still opens until everything is re-sealed.
    const rotatedConfig = { rateLimit: false, secretsKey: secondKey, previousSecretsKeys: [firstKey] }
    const during = await buildApp({ db: t.db, config: rotatedConfig })
    try {
      expect(
        (await call(during, 'POST', '/v1/webhook-endpoints', { url: receiver.url }, 'create-1')).json,
      ).toEqual(created.json)
      const box = configuredSecretBox({ secretsKey: secondKey, previousSecretsKeys: [firstKey] })!
      const counts = await resealSecrets(t.db, box)
      expect(counts.webhookSecrets).toBe(2)
      expect(counts.storedAnswers).toBeGreaterThanOrEqual(2)
      expect(await resealSecrets(t.db, box)).toEqual({ webhookSecrets: 0, storedAnswers: 0 })
    } finally {
      await during.close()
    }
    const after = await buildApp({ db: t.db, config: { rateLimit: false, secretsKey: secondKey } })
    try {
      const replayed = await call(
        after,
        'POST',
        `/v1/webhook-endpoints/${created.json.id}/rotate-secret`,
        {},
        'rot-1',
      )
      expect(replayed.json).toEqual({ secret: newSecret })
      expect((await call(after, 'POST', `/v1/webhook-endpoints/${created.json.id}/test`, {})).status).toBe(
        200,
      )
      const [, second] = await receiver.waitFor(2)
      expect(() => verifyWithStandardWebhooks(newSecret, second!)).not.toThrow()
    } finally {
      await after.close()
    }
    const redumped = await dump(t.db)
    for (const s of [secret, newSecret]) expectAbsent(redumped, s)
  })

  it('a malformed or missing key is a configuration error', () => {
    expect(() => resolveConfig({ secretsKey: 'too-short' })).toThrow(/secretsKey/)
    expect(() => resolveConfig({ secretsKey: 'env:CAIPAY_UNSET_SECRETS_KEY' }, {})).toThrow(/not set/)
  })
})
