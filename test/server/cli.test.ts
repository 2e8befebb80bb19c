import { type ChildProcess, spawn } from 'node:child_process'
import fs from 'node:fs/promises'
import net from 'node:net'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { createPartner } from '../../src/server/accounts/accounts.js'
import { main } from '../../src/server/cli.js'
import { linkBase } from '../../src/server/server.js'
import { createTestDatabase, type TestDatabase } from '../postgres.js'

const bin = fileURLToPath(new URL('../../bin/caipay.js', import.meta.url))
const children: ChildProcess[] = []
const cleanups: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const child of children) if (child.exitCode === null) child.kill('SIGKILL')
  for (const cleanup of cleanups) await cleanup()
})

function run(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [bin, ...args], { env: { ...process.env, DATABASE_URL: '' } })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    child.on('exit', (code) => resolve({ code, stdout, stderr }))
  })
}

/** Runs the CLI in this process (fast), capturing what it prints. */
async function runHere(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
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
    return { code: await main(args), stdout, stderr }
  } finally {
    out.mockRestore()
    err.mockRestore()
  }
}

/** Starts `caipay serve`, resolves once it printed its URL (and the key, when it made one). */
function serve(
  args: string[],
  env: NodeJS.ProcessEnv = { LOG_LEVEL: 'warn' },
): Promise<{
  child: ChildProcess
  url: string
  apiKey: string | undefined
  output: () => string
  exited: Promise<number | null>
}> {
  const child = spawn(process.execPath, [bin, 'serve', '--port', '0', ...args], {
    env: { ...process.env, DATABASE_URL: '', LOG_LEVEL: undefined, ...env },
  })
  children.push(child)
  let out = ''
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)))
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${out}`)), 180_000)
    const onData = (d: Buffer) => {
      out += d
      const url = /listening on (http:\/\/[^\s]+)/.exec(out)?.[1]
      if (url) {
        clearTimeout(timer)
        resolve({ child, url, apiKey: /(svc_test_[A-Za-z0-9]+)/.exec(out)?.[1], output: () => out, exited })
      }
    }
    child.stdout.on('data', onData)
    child.stderr.on('data', (d) => (out += d))
    child.on('close', () => reject(new Error(`serve exited:\n${out}`)))
  })
}

async function api(
  url: string,
  init: { method?: string; headers?: Record<string, string>; body?: unknown } = {},
) {
  const res = await fetch(url, {
    method: init.method ?? 'GET',
    headers: { ...(init.body ? { 'content-type': 'application/json' } : {}), ...init.headers },
    ...(init.body ? { body: JSON.stringify(init.body) } : {}),
  })
  return { status: res.status, json: (await res.json()) as any }
}

async function merchantAndPayment(url: string, apiKey: string) {
  const merchant = await api(`${url}/v1/merchants`, {
    method: 'POST',
    headers: { 'api-key': apiKey, 'idempotency-key': 'cli-1' },
    body: { merchantName: 'CLI shop', merchantEmail: 'cli@example.com' },
  })
  expect(merchant.status).toBe(201)
  const payment = await api(`${url}/v1/payments`, {
    method: 'POST',
    headers: { 'api-key': apiKey, 'merchant-id': merchant.json.merchant.id },
    body: { referenceId: 'cli-order', amount: { unit: 'iso4217/USD', value: '999' } },
  })
  expect(payment.status).toBe(201)
  expect(payment.json.gatewayUrl).toBe(`${url}/pay/${payment.json.paymentId}`)
  return { merchantId: merchant.json.merchant.id as string, paymentId: payment.json.paymentId as string }
}

describe('caipay CLI', () => {
  let pg: TestDatabase
  it('serve --database-url: prints the URL and a test key once; the key works', {
    timeout: 240_000,
  }, async () => {
    pg = await createTestDatabase()
    cleanups.push(() => pg.drop())
    // The template has no partner: this is the empty database of a first start.
    const server = await serve(['--database-url', pg.url])
    expect(server.apiKey).toMatch(/^svc_test_/)
    expect((await api(`${server.url}/healthz`)).json).toEqual({ ok: true })
    const { merchantId, paymentId } = await merchantAndPayment(server.url, server.apiKey!)
    const read = await api(`${server.url}/v1/payments/${paymentId}`, {
      headers: { 'api-key': server.apiKey!, 'merchant-id': merchantId },
    })
    expect(read.json.status).toBe('requires_action')
    expect((await api(`${server.url}/openapi.json`)).json.servers[0].url).toBe(server.url)
    server.child.kill('SIGTERM')
    expect(await server.exited, server.output()).toBe(0)

    const again = await serve(['--database-url', pg.url])
    expect(again.apiKey).toBeUndefined()
    again.child.kill('SIGINT')
    expect(await again.exited).toBe(0)
  })

  it('serve at the default log level: one line per request, written within a second and all of it by exit', async () => {
    const own = await createTestDatabase()
    cleanups.push(() => own.drop())
    const server = await serve(['--database-url', own.url], {})
    const { merchantId, paymentId } = await merchantAndPayment(server.url, server.apiKey!)
    const path = `/v1/payments/${paymentId}/status`
    const reads = 20
    for (let i = 0; i < reads; i++) {
      const read = await fetch(`${server.url}${path}`, {
        headers: { 'api-key': server.apiKey!, 'merchant-id': merchantId },
      })
      expect(read.status).toBe(200)
    }
    // Lines are written in batches, but none waits for more than about a second while the server runs.
    const written = () =>
      server
        .output()
        .split('\n')
        .filter((line) => line.includes(`"url":"${path}"`))
    const deadline = Date.now() + 5000
    while (written().length < reads && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100))
    expect(written()).toHaveLength(reads)
    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)
    const lines = server
      .output()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as Record<string, unknown>)
    const ofReads = lines.filter((line) => line.url === path)
    expect(ofReads).toHaveLength(reads)
    expect(ofReads[0]).toMatchObject({ level: 30, msg: 'request', method: 'GET', status: 200 })
    expect(typeof ofReads[0]!.reqId).toBe('string')
    expect(new Set(ofReads.map((line) => line.reqId)).size).toBe(reads)
    expect(
      lines.filter((line) => line.msg === 'incoming request' || line.msg === 'request completed'),
    ).toEqual([])
    expect(lines.at(-1)).toMatchObject({ msg: 'shutting down' })
  })

  it('keys create and apps create, human and --json; without --partner they use the only partner', {
    timeout: 240_000,
  }, async () => {
    const [bootstrapPartner] = await pg.db.selectFrom('partners').select('id').execute()
    const live = await run(['keys', 'create', '--mode', 'live', '--json', '--database-url', pg.url])
    expect(live.code, live.stderr).toBe(0)
    const created = JSON.parse(live.stdout)
    expect(created.apiKey).toMatch(/^svc_[A-Za-z0-9]{32,}$/)
    expect(created.partnerId).toBe(bootstrapPartner!.id)
    expect(live.stderr).toBe(`Using the only partner, ${created.partnerId} (pass --partner to choose).\n`)
    const wallet = await runHere([
      'keys',
      'create',
      '--mode',
      'test',
      '--role',
      'wallet',
      '--partner',
      created.partnerId,
      '--json',
      '--database-url',
      pg.url,
    ])
    expect(JSON.parse(wallet.stdout)).toMatchObject({
      partnerId: created.partnerId,
      apiKey: expect.stringMatching(/^svc_test_/),
    })
    const app = await runHere([
      'apps',
      'create',
      '--mode',
      'test',
      '--partner',
      created.partnerId,
      '--json',
      '--database-url',
      pg.url,
    ])
    expect(JSON.parse(app.stdout)).toEqual({
      partnerId: created.partnerId,
      appId: expect.stringMatching(/^app_test_/),
    })
    const human = await runHere(['keys', 'create', '--mode', 'test', '--database-url', pg.url])
    expect(human.stdout).toMatch(/svc_test_[A-Za-z0-9]+/)
    const rows = await pg.db
      .selectFrom('api_keys')
      .select('role')
      .where('partner_id', '=', created.partnerId)
      .where('mode', '=', 'test')
      .execute()
    // The first start's key, the wallet key and the human one: all of the one partner.
    expect(rows.map((row) => row.role).sort()).toEqual(['partner', 'partner', 'wallet'])

    const extra = await createPartner(pg.db)
    const ambiguous = await runHere(['keys', 'create', '--mode', 'test', '--database-url', pg.url])
    expect(ambiguous.code).toBe(1)
    expect(ambiguous.stderr).toMatch(
      /^caipay: There are several partners \(ptr_\w+, ptr_\w+\); pass --partner ID\.\n$/,
    )
    await pg.db.deleteFrom('partners').where('id', '=', extra).execute()
  })

  it('an operator runs two partners: partners create|list, keys create|list|revoke, apps list', {
    timeout: 240_000,
  }, async () => {
    const db = ['--database-url', pg.url]
    const server = await serve(db)
    const cliServerUrl = server.url
    const made = await runHere(['partners', 'create', '--name', 'Second shop', '--json', ...db])
    expect(made.code, made.stderr).toBe(0)
    const second = JSON.parse(made.stdout) as { partnerId: string; name: string }
    expect(second).toEqual({ partnerId: expect.stringMatching(/^ptr_/), name: 'Second shop' })
    const third = await runHere(['partners', 'create', ...db])
    const thirdId = /Partner: (ptr_\w+)/.exec(third.stdout)?.[1]
    expect(thirdId).toBeDefined()

    const partners = JSON.parse((await runHere(['partners', 'list', '--json', ...db])).stdout)
    expect(partners.map((p: { id: string }) => p.id)).toEqual(
      expect.arrayContaining([second.partnerId, thirdId]),
    )
    expect(partners.find((p: { id: string }) => p.id === second.partnerId).name).toBe('Second shop')
    const table = await runHere(['partners', 'list', ...db])
    expect(table.stdout.split('\n')[0]).toMatch(/^ID\s+NAME\s+CREATED$/)
    expect(table.stdout).toContain(second.partnerId)

    // With several partners, --partner picks one; each key belongs to its own partner.
    const keyOf = async (partnerId: string) => {
      const out = await runHere(['keys', 'create', '--mode', 'test', '--partner', partnerId, '--json', ...db])
      expect(out.code, out.stderr).toBe(0)
      return JSON.parse(out.stdout) as { partnerId: string; apiKey: string }
    }
    const secondKey = await keyOf(second.partnerId)
    const thirdKey = await keyOf(thirdId!)
    expect([secondKey.partnerId, thirdKey.partnerId]).toEqual([second.partnerId, thirdId])

    const listed = await runHere(['keys', 'list', '--partner', second.partnerId, '--json', ...db])
    const keys = JSON.parse(listed.stdout) as {
      id: string
      prefix: string
      partnerId: string
      revokedAt: null
    }[]
    expect(keys).toHaveLength(1)
    expect(keys[0]).toMatchObject({
      partnerId: second.partnerId,
      mode: 'test',
      role: 'partner',
      revokedAt: null,
    })
    expect(secondKey.apiKey.startsWith(keys[0]!.prefix)).toBe(true)
    // The prefix only: neither listing holds the secret part of any key.
    const everything = (await runHere(['keys', 'list', '--json', ...db])).stdout
    const human = (await runHere(['keys', 'list', ...db])).stdout
    for (const key of [secondKey.apiKey, thirdKey.apiKey]) {
      expect(everything).not.toContain(key)
      expect(human).not.toContain(key)
    }
    expect(human).toContain(keys[0]!.prefix)

    const beforeRevoke = await api(`${cliServerUrl}/v1/merchants`, {
      headers: { 'api-key': secondKey.apiKey },
    })
    expect(beforeRevoke.status).toBe(200)
    const revoked = await runHere(['keys', 'revoke', keys[0]!.id, '--json', ...db])
    expect(revoked.code, revoked.stderr).toBe(0)
    expect(JSON.parse(revoked.stdout)).toMatchObject({ id: keys[0]!.id, revokedAt: expect.any(String) })
    // Every server forgets a revoked key within a round trip (NOTIFY); allow it a few.
    let afterRevoke = await api(`${cliServerUrl}/v1/merchants`, { headers: { 'api-key': secondKey.apiKey } })
    for (let i = 0; i < 40 && afterRevoke.status === 200; i++) {
      await new Promise((resolve) => setTimeout(resolve, 50))
      afterRevoke = await api(`${cliServerUrl}/v1/merchants`, { headers: { 'api-key': secondKey.apiKey } })
    }
    expect([afterRevoke.status, afterRevoke.json.code]).toEqual([401, 'invalid_api_key'])
    // The other partner's key is untouched.
    const other = await api(`${cliServerUrl}/v1/merchants`, { headers: { 'api-key': thirdKey.apiKey } })
    expect(other.status).toBe(200)
    const missing = await runHere(['keys', 'revoke', 'key_missing', ...db])
    expect([missing.code, missing.stderr]).toEqual([1, 'caipay: API key key_missing not found.\n'])
    const noId = await runHere(['keys', 'revoke', ...db])
    expect(noId.code).toBe(2)

    await runHere(['apps', 'create', '--mode', 'live', '--partner', thirdId!, ...db])
    const apps = JSON.parse((await runHere(['apps', 'list', '--partner', thirdId!, '--json', ...db])).stdout)
    expect(apps).toEqual([
      {
        appId: expect.stringMatching(/^app_/),
        partnerId: thirdId,
        mode: 'live',
        createdAt: expect.any(String),
        revokedAt: null,
      },
    ])
    const badMode = await runHere(['apps', 'list', '--mode', 'staging', ...db])
    expect(badMode.code).toBe(2)
    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)
    // The cases after this one expect the one partner of a first start.
    const mine = [second.partnerId, thirdId!]
    await pg.db.deleteFrom('apps').where('partner_id', 'in', mine).execute()
    await pg.db.deleteFrom('api_keys').where('partner_id', 'in', mine).execute()
    await pg.db.deleteFrom('partners').where('id', 'in', mine).execute()
  })

  it("the README's curl walkthrough runs against the server", { timeout: 240_000 }, async () => {
    const readme = await fs.readFile('README.md', 'utf8')
    const block = /<!-- walkthrough:start -->\n```sh\n([\s\S]*?)```\n<!-- walkthrough:end -->/.exec(
      readme,
    )?.[1]
    expect(block).toMatch(/^BASE=.*\nKEY=.*\n/)
    const db = await createTestDatabase()
    cleanups.push(() => db.drop())
    const server = await serve(['--database-url', db.url])
    // The block as written, with the server's address and key in place of the placeholders.
    const script = block!.replace(/^BASE=.*\nKEY=.*\n/, `BASE=${server.url}\nKEY=${server.apiKey}\n`)
    const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('bash', ['-euo', 'pipefail', '-c', script])
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (d) => (stdout += d))
      child.stderr.on('data', (d) => (stderr += d))
      child.on('exit', (code) => resolve({ code, stdout, stderr }))
    })
    server.child.kill('SIGTERM')
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout.trim().split('\n')).toEqual([
      expect.stringMatching(`^${server.url}/pay/pay_\\w+$`),
      'succeeded',
    ])
  })

  it("docs/refunds.md's curl walkthrough runs after the README's", { timeout: 240_000 }, async () => {
    const block = (file: string, name: string) =>
      new RegExp(`<!-- ${name}:start -->\n\`\`\`sh\n([\\s\\S]*?)\`\`\`\n<!-- ${name}:end -->`).exec(file)?.[1]
    const readme = block(await fs.readFile('README.md', 'utf8'), 'walkthrough')
    const refunds = block(await fs.readFile('docs/refunds.md', 'utf8'), 'refunds-walkthrough')
    expect(refunds).toBeDefined()
    const db = await createTestDatabase()
    cleanups.push(() => db.drop())
    const server = await serve(['--database-url', db.url])
    const script = `${readme!.replace(/^BASE=.*\nKEY=.*\n/, `BASE=${server.url}\nKEY=${server.apiKey}\n`)}${refunds}`
    const result = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn('bash', ['-euo', 'pipefail', '-c', script])
      let stdout = ''
      let stderr = ''
      child.stdout.on('data', (d) => (stdout += d))
      child.stderr.on('data', (d) => (stderr += d))
      child.on('exit', (code) => resolve({ code, stdout, stderr }))
    })
    server.child.kill('SIGTERM')
    expect(result.code, result.stderr).toBe(0)
    expect(result.stdout.trim().split('\n').slice(-5)).toEqual([
      'pending',
      expect.stringMatching(/^test:ref_\w+$/),
      '750',
      '2',
      'already_refunded',
    ])
  })

  it('--version, and --help for each command', async () => {
    const version = await runHere(['--version'])
    expect(version.stdout.trim()).toBe(JSON.parse(await fs.readFile('package.json', 'utf8')).version)
    const commands = [
      ['serve'],
      ['partners', 'create'],
      ['partners', 'list'],
      ['keys', 'create'],
      ['keys', 'list'],
      ['keys', 'revoke'],
      ['apps', 'create'],
      ['apps', 'list'],
    ]
    for (const command of commands) {
      const help = await runHere([...command, '--help'])
      expect(help.code).toBe(0)
      expect(help.stdout).toMatch(new RegExp(`^Usage: caipay ${command.join(' ')} `))
    }
  })

  it('startup failures are one line and a non-zero exit: busy port, unreachable database', {
    timeout: 240_000,
  }, async () => {
    const blocker = net.createServer()
    await new Promise<void>((resolve) => blocker.listen(0, '127.0.0.1', resolve))
    const port = (blocker.address() as net.AddressInfo).port
    try {
      const busy = await run(['serve', '--port', String(port), '--database-url', pg.url])
      expect(busy.code).toBe(1)
      expect(busy.stderr).toBe(
        `caipay: Port ${port} on 127.0.0.1 is already in use; choose another with --port (0 picks a free one).\n`,
      )
    } finally {
      blocker.close()
    }
    // A port nothing listens on: taken, then released.
    const closed = net.createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const nobody = (closed.address() as net.AddressInfo).port
    await new Promise((resolve) => closed.close(resolve))
    const down = await run([
      'serve',
      '--port',
      '0',
      '--database-url',
      `postgres://u:secret@127.0.0.1:${nobody}/db`,
    ])
    expect(down.code).toBe(1)
    expect(down.stderr).toBe(
      `caipay: Cannot use the database at 127.0.0.1:${nobody}/db: nothing listens there (ECONNREFUSED). Check --database-url or DATABASE_URL.\n`,
    )
  })

  it('apps create --external-id registers a WalletConnect project id (32 hex) with its mode, once', async () => {
    const projectId = '0123456789abcdef0123456789abcdef'
    const args = ['apps', 'create', '--external-id', projectId, '--database-url', pg.url]
    const created = await runHere([...args, '--mode', 'test', '--json'])
    expect(created.code, created.stderr).toBe(0)
    expect(JSON.parse(created.stdout)).toEqual({
      partnerId: expect.stringMatching(/^ptr_/),
      appId: projectId,
    })
    const row = await pg.db.selectFrom('apps').select('mode').where('id', '=', projectId).executeTakeFirst()
    expect(row?.mode).toBe('test')
    const again = await runHere([...args, '--mode', 'live'])
    expect(again.code).toBe(1)
    // The first line says which partner was used (the only one); the last is the refusal.
    expect(again.stderr).toBe(
      `Using the only partner, ${JSON.parse(created.stdout).partnerId} (pass --partner to choose).\ncaipay: The app id ${projectId} is already registered.\n`,
    )
    for (const bad of ['0123', projectId.toUpperCase(), `app_test_${projectId}`]) {
      const refused = await runHere([
        'apps',
        'create',
        '--mode',
        'test',
        '--external-id',
        bad,
        '--database-url',
        pg.url,
      ])
      expect(refused.code, bad).toBe(2)
      expect(refused.stderr).toMatch(/^caipay: --external-id must be a WalletConnect project id/)
    }
  })

  it('refuses bad usage with a non-zero exit', async () => {
    expect((await runHere(['keys', 'create', '--mode', 'prod', '--database-url', pg.url])).code).toBe(2)
    expect((await runHere(['keys', 'create', '--mode', 'test', '--bogus'])).code).toBe(2)
    expect((await runHere(['frobnicate'])).code).toBe(2)
    expect((await runHere(['serve', '--port', 'x'])).code).toBe(2)
    const both = await runHere(['serve', '--api-only', '--worker-only'])
    expect(both.code).toBe(2)
    expect(both.stderr).toContain('--api-only and --worker-only exclude each other')
    const missing = await runHere([
      'keys',
      'create',
      '--mode',
      'test',
      '--partner',
      'ptr_nope',
      '--database-url',
      pg.url,
    ])
    expect(missing.code).toBe(1)
    expect(missing.stderr).toMatch(/not found/)
    expect((await runHere(['--help'])).stdout).toMatch(/serve +start the payments server/)
    const badConfig = await runHere(['serve', '--config', '/nonexistent/caipay.json'])
    expect(badConfig.code).toBe(1)
    expect(badConfig.stderr).toMatch(/Cannot read config file/)
  })

  it('refuses a bad push.underpaid at startup with the line naming it', async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-config-'))
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }))
    const file = path.join(dir, 'caipay.json')
    await fs.writeFile(file, JSON.stringify({ push: { underpaid: 'keep' } }))
    const refused = await runHere(['serve', '--config', file])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toBe(
      'caipay: Invalid configuration: push.underpaid: expected one of "hold", "refund"\n',
    )
  })

  it('serve --data-dir runs embedded PostgreSQL, shares it with keys create, and stops it on SIGTERM', {
    timeout: 240_000,
  }, async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-cli-'))
    // Under root the cluster runs as the postgres OS user, which must be able to enter the parent.
    await fs.chmod(dir, 0o755)
    cleanups.push(() => fs.rm(dir, { recursive: true, force: true }))
    const dataDir = path.join(dir, 'data')
    const server = await serve(['--data-dir', dataDir])
    expect(server.apiKey).toMatch(/^svc_test_/)
    await merchantAndPayment(server.url, server.apiKey!)
    const key = await run(['keys', 'create', '--mode', 'test', '--json', '--data-dir', dataDir])
    expect(key.code, key.stderr).toBe(0)
    const list = await api(`${server.url}/v1/merchants`, {
      headers: { 'api-key': JSON.parse(key.stdout).apiKey },
    })
    expect(list.status).toBe(200)
    server.child.kill('SIGTERM')
    expect(await server.exited).toBe(0)
    await expect(fs.access(path.join(dataDir, 'postgres', 'postmaster.pid'))).rejects.toThrow()
  })
})

describe('links when bound to every interface', () => {
  const interfaces = {
    lo: [{ address: '127.0.0.1', family: 'IPv4', internal: true }],
    eth0: [{ address: '10.1.2.3', family: 'IPv4', internal: false }],
  } as unknown as ReturnType<typeof os.networkInterfaces>
  it('use the first network address, never 0.0.0.0; a specific host keeps its own URL', () => {
    expect(linkBase('0.0.0.0', 'http://127.0.0.1:8787', interfaces)).toBe('http://10.1.2.3:8787')
    expect(linkBase('::', 'http://[::1]:9000', interfaces)).toBe('http://10.1.2.3:9000')
    expect(linkBase('0.0.0.0', 'http://127.0.0.1:8787', { lo: interfaces.lo })).toBe('http://127.0.0.1:8787')
    expect(linkBase('127.0.0.1', 'http://127.0.0.1:8787', interfaces)).toBe('http://127.0.0.1:8787')
  })
})
