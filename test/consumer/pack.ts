/**
 * caipay as its users get it: packed with `npm pack` (which builds it) from a copy of this checkout, and
 * fresh projects outside the repository that install the tarballs (third-party dependencies from the
 * registry, no workspace links). Shared by the consumer tests.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

export const exec = promisify(execFile)
export const repo = fileURLToPath(new URL('../..', import.meta.url))

/** npm_* variables of an enclosing `npm test` would point npm at this repository. */
export const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')),
)

/** Generous: on a busy two-core machine the declaration build alone can take minutes. */
export async function npm(args: string[], cwd: string, timeout = 900_000): Promise<string> {
  try {
    const { stdout } = await exec('npm', [...args, '--no-audit', '--no-fund', '--loglevel=error'], {
      cwd,
      env: cleanEnv,
      timeout,
      maxBuffer: 64 * 1024 * 1024,
    })
    return stdout
  } catch (error) {
    const { killed, stderr } = error as { killed?: boolean; stderr?: string }
    const tail = (stderr ?? '')
      .split('\n')
      .filter((line) => /error|ERR!/i.test(line))
      .slice(-15)
      .join('\n')
    throw new Error(
      `npm ${args.join(' ')} in ${cwd} ${killed ? `timed out after ${timeout / 1000} s` : 'failed'}:\n${tail}`,
    )
  }
}

export async function project(dir: string, dependencies: Record<string, string>): Promise<void> {
  await fs.mkdir(dir, { recursive: true })
  const json = { name: path.basename(dir), private: true, type: 'module', dependencies }
  await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify(json, null, 2))
}

/**
 * Packs caipay (and, with `server`, caipay-server) into `work/packed`, from a copy without dist/: `npm
 * pack` must build it (prepack), and the build must not replace the dist/ of this checkout under other
 * tests. Returns the tarballs' paths.
 */
export async function packTarballs(
  work: string,
  { server = false }: { server?: boolean } = {},
): Promise<{ caipay: string; server?: string }> {
  const packed = path.join(work, 'packed')
  await fs.mkdir(packed)
  const source = path.join(work, 'source')
  const skipped = new Set(['node_modules', 'dist', '.git', '.caipay', 'coverage'])
  await fs.cp(repo, source, {
    recursive: true,
    filter: (file) => {
      const parts = path.relative(repo, file).split(path.sep)
      return !skipped.has(parts[0]!) && !parts.includes('node_modules')
    },
  })
  await fs.symlink(path.join(repo, 'node_modules'), path.join(source, 'node_modules'), 'dir')
  await Promise.all([
    npm(['pack', '--pack-destination', packed], source),
    ...(server ? [npm(['pack', '--pack-destination', packed], path.join(source, 'packages', 'server'))] : []),
  ])
  const files = await fs.readdir(packed)
  const find = (pattern: RegExp) => path.join(packed, files.find((file) => pattern.test(file))!)
  return { caipay: find(/^caipay-\d/), ...(server && { server: find(/^caipay-server-\d/) }) }
}
