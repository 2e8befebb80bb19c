import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { main } from '../../src/server/cli.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'

// WalletKit gives the WalletConnect Pay SDK the wallet's WalletConnect project id as its app id:
// `caipay apps create --external-id` registers one, its mode stored with it.

const projectId = '0123456789abcdef0123456789abcdef'
let pg: TestDatabase
beforeAll(async () => {
  pg = await createTestDatabase()
})
afterAll(() => pg.drop())

async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = ''
  let stderr = ''
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
    stdout += String(chunk)
    return true
  })
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
    stderr += String(chunk)
    return true
  })
  try {
    return { code: await main([...args, '--database-url', pg.url]), stdout, stderr }
  } finally {
    out.mockRestore()
    err.mockRestore()
  }
}

describe('caipay apps create --external-id', () => {
  it('registers a 32-hex project id with the mode given, once', async () => {
    const created = await cli(['apps', 'create', '--mode', 'test', '--external-id', projectId, '--json'])
    expect(created.code, created.stderr).toBe(0)
    expect(JSON.parse(created.stdout)).toEqual({
      partnerId: expect.stringMatching(/^ptr_/),
      appId: projectId,
    })
    const row = await pg.db.selectFrom('apps').select(['mode']).where('id', '=', projectId).executeTakeFirst()
    expect(row?.mode).toBe('test')
    const again = await cli(['apps', 'create', '--mode', 'live', '--external-id', projectId])
    expect(again.code).toBe(1)
    expect(again.stderr).toBe(`caipay: The app id ${projectId} is already registered.\n`)
  })

  it('refuses anything but 32 lowercase hex as usage', async () => {
    for (const bad of ['0123', projectId.toUpperCase(), `app_test_${projectId}`]) {
      const res = await cli(['apps', 'create', '--mode', 'test', '--external-id', bad])
      expect(res.code, bad).toBe(2)
      expect(res.stderr).toMatch(/^--external-id must be a WalletConnect project id/)
    }
  })
})
