/**
 * caipay as its users get it: both packages packed with `npm pack` (which builds them), installed
 * from the tarballs into fresh projects outside this repository (third-party dependencies from
 * the registry, no workspace links), then used the way a wallet developer and a server operator
 * would. One install per project is shared by every case.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { cleanEnv, exec, npm, packTarballs, project, repo } from './pack.js'

const manifest = JSON.parse(await fs.readFile(path.join(repo, 'package.json'), 'utf8')) as {
  version: string
  exports: Record<string, unknown>
}
const subpaths = Object.keys(manifest.exports)
  .filter((key) => key !== './package.json')
  .map((key) => (key === '.' ? 'caipay' : `caipay/${key.slice(2)}`))

let work: string
let tarballs: { caipay: string; server: string }
let wallet: string
let server: string
/** The installed server's embedded database: made by the serve case, used again by the CLI's. */
let dataDir: string

beforeAll(async () => {
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-consumer-'))
  // Open to the postgres OS user: as root, the installed server's embedded database runs as it.
  await fs.chmod(work, 0o755)
  const packed = await packTarballs(work, { server: true })
  tarballs = { caipay: packed.caipay, server: packed.server! }

  wallet = path.join(work, 'wallet')
  server = path.join(work, 'server')
  dataDir = path.join(work, 'data')
  await project(wallet, { caipay: `file:${tarballs.caipay}` })
  // The server package pins caipay to the same version: the override points it at this tarball.
  await project(server, {
    caipay: `file:${tarballs.caipay}`,
    'caipay-server': `file:${tarballs.server}`,
  })
  const serverManifest = JSON.parse(await fs.readFile(path.join(server, 'package.json'), 'utf8'))
  serverManifest.overrides = { caipay: `file:${tarballs.caipay}` }
  await fs.writeFile(path.join(server, 'package.json'), JSON.stringify(serverManifest, null, 2))
  await Promise.all([
    npm(['install', '--prefer-offline'], wallet),
    npm(['install', '--prefer-offline'], server),
  ])
}, 1_800_000)

afterAll(async () => {
  if (work) await fs.rm(work, { recursive: true, force: true })
})

describe('the wallet package (npm install caipay)', () => {
  it('installs exactly caipay and zod', async () => {
    const lock = JSON.parse(await fs.readFile(path.join(wallet, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, unknown>
    }
    const installed = Object.keys(lock.packages)
      .filter((key) => key !== '')
      .map((key) => key.replace(/^.*node_modules\//, ''))
      .sort()
    expect(installed).toEqual(['caipay', 'zod'])
  })

  it('ships dist, the CLI, README, LICENSE and CHANGELOG', async () => {
    const root = path.join(wallet, 'node_modules', 'caipay')
    for (const file of [
      'dist/index.js',
      'dist/index.cjs',
      'dist/index.d.ts',
      'bin/caipay.js',
      'LICENSE',
      'CHANGELOG.md',
      'README.md',
    ])
      await expect(fs.access(path.join(root, file)), file).resolves.toBeUndefined()
  })

  it('caipay --help and --version work without the server dependencies; serve names the install line', {
    timeout: 60_000,
  }, async () => {
    const bin = path.join(wallet, 'node_modules', '.bin', 'caipay')
    const help = await exec(bin, ['--help'], { cwd: wallet, env: cleanEnv })
    expect(help.stdout).toMatch(/caipay serve|serve\s+start the payments server/)
    expect(help.stdout).toMatch(/^ {2}deposits stray {3}/m)
    expect(help.stdout).toMatch(/^ {2}deposits recover /m)
    expect((await exec(bin, ['--version'], { cwd: wallet, env: cleanEnv })).stdout.trim()).toBe(
      manifest.version,
    )
    const serve = await exec(bin, ['serve', '--port', '0'], { cwd: wallet, env: cleanEnv }).then(
      () => undefined,
      (error: { code: number; stderr: string }) => error,
    )
    expect(serve?.code).toBe(1)
    const lines = serve!.stderr.trim().split('\n')
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatch(/^caipay: the server needs the package "[^"]+".*npm install caipay-server/)
  })

  it('the wallet core and the merchant client load from ESM and CJS with only those two packages', {
    timeout: 60_000,
  }, async () => {
    const esm = await exec(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "const m = await import('caipay'); const c = await import('caipay/client'); console.log(typeof m.createPayClient, typeof c.createMerchantClient)",
      ],
      { cwd: wallet, env: cleanEnv },
    )
    expect(esm.stdout.trim()).toBe('function function')
    const cjs = await exec(
      process.execPath,
      [
        '-e',
        "console.log(typeof require('caipay').createPayClient, typeof require('caipay/client').createMerchantClient)",
      ],
      { cwd: wallet, env: cleanEnv },
    )
    expect(cjs.stdout.trim()).toBe('function function')
  })
})

describe('the server package (npm install caipay-server)', () => {
  it('depends on the same caipay version, and every subpath loads from ESM and from CJS', {
    timeout: 120_000,
  }, async () => {
    const installed = JSON.parse(
      await fs.readFile(path.join(server, 'node_modules', 'caipay-server', 'package.json'), 'utf8'),
    )
    expect(installed.dependencies.caipay).toBe(manifest.version)
    const probe = subpaths.map((s) => JSON.stringify(s)).join(', ')
    const esm = await exec(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        `for (const s of [${probe}]) { const m = await import(s); console.log(s, Object.keys(m).length) }`,
      ],
      { cwd: server, env: cleanEnv },
    )
    const cjs = await exec(
      process.execPath,
      ['-e', `for (const s of [${probe}]) console.log(s, Object.keys(require(s)).length)`],
      { cwd: server, env: cleanEnv },
    )
    for (const output of [esm.stdout, cjs.stdout]) {
      const counts = Object.fromEntries(
        output
          .trim()
          .split('\n')
          .map((line) => line.split(' ')),
      )
      expect(Object.keys(counts).sort()).toEqual([...subpaths].sort())
      for (const count of Object.values(counts)) expect(Number(count)).toBeGreaterThan(0)
    }
  })

  it.each(['bundler', 'node16', 'node10'] as const)(
    'a program using the public API type-checks under moduleResolution %s',
    { timeout: 180_000 },
    async (resolution) => {
      const dir = path.join(server, `ts-${resolution}`)
      await fs.mkdir(dir, { recursive: true })
      await fs.writeFile(path.join(dir, 'program.ts'), program)
      const module = { bundler: 'esnext', node16: 'node16', node10: 'commonjs' }[resolution]
      const tsconfig = {
        compilerOptions: {
          strict: true,
          noEmit: true,
          target: 'es2022',
          lib: ['es2022', 'dom'],
          module,
          moduleResolution: resolution,
          // The checkout's TypeScript and Node types are the tools; caipay and its dependencies
          // resolve from the consumer project.
          types: ['node'],
          typeRoots: [path.join(repo, 'node_modules', '@types')],
          // Resolution and every use of caipay's types are checked; checking the bodies of all
          // dependency declarations (viem, web3.js, fastify) would take minutes on a small machine.
          skipLibCheck: true,
        },
        files: ['program.ts'],
      }
      await fs.writeFile(path.join(dir, 'tsconfig.json'), JSON.stringify(tsconfig))
      const tsc = path.join(repo, 'node_modules', 'typescript', 'bin', 'tsc')
      const result = await exec(process.execPath, [tsc, '-p', dir], { cwd: dir, env: cleanEnv }).catch(
        (error: { stdout: string }) => ({ stdout: error.stdout, failed: true }),
      )
      expect(result.stdout).toBe('')
      expect('failed' in result).toBe(false)
    },
  )

  it('npx caipay serve starts from the installed package and answers /healthz and /docs', {
    timeout: 180_000,
  }, async () => {
    const bin = path.join(server, 'node_modules', '.bin', 'caipay')
    const child = spawn(bin, ['serve', '--port', '0', '--data-dir', dataDir], {
      cwd: server,
      env: { ...cleanEnv, DATABASE_URL: '', LOG_LEVEL: 'warn' },
    })
    try {
      const url = await listening(child)
      const health = await fetch(`${url}/healthz`)
      expect(await health.json()).toEqual({ ok: true })
      const root = await fetch(`${url}/`, { redirect: 'manual' })
      expect(root.headers.get('location')).toBe('/docs')
      // The API reference's files come from the installed renderer package.
      const docs = await fetch(`${url}/docs`)
      expect(docs.status).toBe(200)
      const files = [...(await docs.text()).matchAll(/(?:src|href)="([^"]+)"/g)].map((m) => m[1]!)
      expect(files.some((file) => file.includes('swagger-ui-bundle.js'))).toBe(true)
      for (const file of files) expect((await fetch(`${url}${file}`)).status, file).toBe(200)
    } finally {
      child.kill('SIGTERM')
    }
    expect(await new Promise((resolve) => child.once('exit', resolve))).toBe(0)
    const serverBin = path.join(server, 'node_modules', '.bin', 'caipay-server')
    expect((await exec(serverBin, ['--version'], { env: cleanEnv })).stdout.trim()).toBe(manifest.version)
  })

  it('caipay deposits stray and recover run from the installed server: an unknown payment is one caipay: line, exit 1', {
    timeout: 180_000,
  }, async () => {
    const bin = path.join(server, 'node_modules', '.bin', 'caipay')
    const help = await exec(bin, ['deposits', 'stray', '--help'], { cwd: server, env: cleanEnv })
    expect(help.stdout).toMatch(/^Usage: caipay deposits stray PAYMENT_ID --config FILE/)
    // An operator's config with one EVM chain; nothing is read from its node before the payment is found.
    const config = path.join(work, 'stray-config.json')
    const chain = 'eip155:31337'
    const signerKey = `0x${randomBytes(32).toString('hex')}`
    await fs.writeFile(
      config,
      JSON.stringify({ chains: { [chain]: { rpcUrl: 'http://127.0.0.1:9', signerKey } } }),
    )
    const unknown = 'pay_unknown000000000000000000'
    const to = `0x${'11'.repeat(20)}`
    for (const args of [
      ['deposits', 'stray', unknown],
      ['deposits', 'recover', unknown, '--chain', chain, '--asset', 'native', '--to', to],
    ]) {
      const run = await exec(bin, [...args, '--config', config, '--data-dir', dataDir], {
        cwd: server,
        env: { ...cleanEnv, DATABASE_URL: '' },
      }).then(
        () => undefined,
        (error: { code: number; stderr: string }) => error,
      )
      expect(run?.code, args.join(' ')).toBe(1)
      expect(run!.stderr).toBe(`caipay: No payment ${unknown}.\n`)
    }
  })

  it('publint and arethetypeswrong report nothing for either tarball', { timeout: 180_000 }, async () => {
    const publint = path.join(repo, 'node_modules', 'publint', 'src', 'cli.js')
    const attw = path.join(repo, 'node_modules', '@arethetypeswrong', 'cli', 'dist', 'index.js')
    for (const tarball of [tarballs.caipay, tarballs.server]) {
      const lint = await exec(process.execPath, [publint, 'run', tarball, '--strict'], { env: cleanEnv })
      expect(lint.stdout).toMatch(/All good!/)
    }
    // The server package has no entry points of its own (a CLI only), so attw checks caipay's.
    const types = await exec(process.execPath, [attw, tarballs.caipay, '--format', 'ascii'], {
      env: cleanEnv,
    })
    expect(types.stdout).toMatch(/No problems found/)
  })
})

function listening(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    let output = ''
    const timer = setTimeout(() => reject(new Error(`serve did not start:\n${output}`)), 120_000)
    const onData = (chunk: Buffer) => {
      output += chunk
      const url = /listening on (http:\/\/\S+)/.exec(output)?.[1]
      if (url) {
        clearTimeout(timer)
        resolve(url)
      }
    }
    child.stdout?.on('data', onData)
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk
    })
    child.once('exit', (code) => reject(new Error(`serve exited (${code}):\n${output}`)))
  })
}

/** Uses every entry's public API; it only has to type-check. */
const program = `import { createPayClient, PayError, type Signer } from 'caipay'
import { evmSigner } from 'caipay/adapters/evm'
import { solanaSigner } from 'caipay/adapters/solana'
import { solanaSigner as kitSolanaSigner } from 'caipay/adapters/solana-kit'
import { walletConnectSigners } from 'caipay/adapters/walletconnect'
import { createMerchantClient } from 'caipay/client'
import { buildApp, resolveConfig, type StartServerOptions } from 'caipay/server'

const signers: Signer[] = []
const pay = createPayClient({ baseUrl: 'http://127.0.0.1:8787', apiKey: 'svc_test_x', signers })
const merchant = createMerchantClient({ baseUrl: 'http://127.0.0.1:8787', apiKey: 'svc_test_x' })
const options: StartServerOptions = { port: 0, config: resolveConfig({}) }
const used: unknown[] = [pay, merchant, options, buildApp, evmSigner, solanaSigner, kitSolanaSigner, walletConnectSigners]
const error: PayError | undefined = undefined
export { used, error }
`
