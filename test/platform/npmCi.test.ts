/**
 * A contributor on macOS or Linux arm64 can `npm ci`: checked by running npm itself with
 * process.platform/arch overridden, `npm ci --dry-run` on a copy of package.json and the lockfile.
 */
import { execFile } from 'node:child_process'
import fs from 'node:fs/promises'
import os from 'node:os'
import path from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const exec = promisify(execFile)
const repo = fileURLToPath(new URL('../..', import.meta.url))
const preload = fileURLToPath(new URL('./fakePlatform.cjs', import.meta.url))
const cleanEnv = Object.fromEntries(
  Object.entries(process.env).filter(([key]) => !key.toLowerCase().startsWith('npm_')),
)
let npmCli: string
let work: string

beforeAll(async () => {
  const { stdout } = await exec('npm', ['root', '-g'], { env: cleanEnv })
  npmCli = path.join(stdout.trim(), 'npm', 'bin', 'npm-cli.js')
  work = await fs.mkdtemp(path.join(os.tmpdir(), 'caipay-npm-ci-'))
})
afterAll(() => fs.rm(work, { recursive: true, force: true }))

/** A copy of what `npm ci` reads: package.json, the lockfile and the local file: packages. */
async function copyProject(name: string): Promise<string> {
  const dir = path.join(work, name)
  await fs.mkdir(path.join(dir, 'tools', 'anvil'), { recursive: true })
  for (const file of ['package.json', 'package-lock.json', 'tools/anvil/package.json'])
    await fs.copyFile(path.join(repo, file), path.join(dir, file))
  return dir
}

async function npmCiDryRun(dir: string, platform: string): Promise<{ ok: boolean; output: string }> {
  const args = [
    '--require',
    preload,
    npmCli,
    'ci',
    '--dry-run',
    '--ignore-scripts',
    '--no-audit',
    '--no-fund',
  ]
  return exec(process.execPath, args, {
    cwd: dir,
    env: { ...cleanEnv, CAIPAY_FAKE_PLATFORM: platform },
    timeout: 120_000,
  }).then(
    ({ stdout, stderr }) => ({ ok: true, output: stdout + stderr }),
    (error: { stdout: string; stderr: string }) => ({ ok: false, output: error.stdout + error.stderr }),
  )
}

describe('npm ci on other platforms', () => {
  it.each(['darwin/arm64', 'darwin/x64', 'linux/arm64'])(
    'resolves on %s',
    { timeout: 150_000 },
    async (platform) => {
      const dir = await copyProject(platform.replace('/', '-'))
      const result = await npmCiDryRun(dir, platform)
      expect(result.output).not.toMatch(/EBADPLATFORM/)
      expect(result.ok, result.output).toBe(true)
    },
  )

  it('the preload works: a linux/x64-only package that is not optional stops npm on darwin', {
    timeout: 150_000,
  }, async () => {
    const dir = await copyProject('control')
    const manifest = JSON.parse(await fs.readFile(path.join(dir, 'package.json'), 'utf8'))
    const lock = JSON.parse(await fs.readFile(path.join(dir, 'package-lock.json'), 'utf8'))
    const anvil = '@foundry-rs/anvil-linux-amd64'
    manifest.devDependencies[anvil] = lock.packages[`node_modules/${anvil}`].version
    lock.packages[''].devDependencies[anvil] = manifest.devDependencies[anvil]
    delete lock.packages[`node_modules/${anvil}`].optional
    await fs.writeFile(path.join(dir, 'package.json'), JSON.stringify(manifest))
    await fs.writeFile(path.join(dir, 'package-lock.json'), JSON.stringify(lock))
    const result = await npmCiDryRun(dir, 'darwin/arm64')
    expect(result.ok).toBe(false)
    expect(result.output).toMatch(/EBADPLATFORM/)
  })
})
