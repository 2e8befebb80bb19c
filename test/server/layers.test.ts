import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

/** The server's layers (docs/architecture.md, section 3): every import points down. */

const serverDir = path.resolve(import.meta.dirname, '../../src/server')

async function sourceFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true })
  return entries
    .filter((e) => e.isFile() && e.name.endsWith('.ts'))
    .map((e) => path.join(e.parentPath, e.name))
}

/** Every module a file imports (static, dynamic and type-only), resolved to a path. */
async function importsOf(file: string): Promise<string[]> {
  const text = await readFile(file, 'utf8')
  const specifiers = [...text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)].map((m) => m[1]!)
  return specifiers.filter((s) => s.startsWith('.')).map((s) => path.resolve(path.dirname(file), s))
}

async function offenders(layer: string, forbidden: string): Promise<string[]> {
  const found: string[] = []
  const target = path.join(serverDir, forbidden) + path.sep
  for (const file of await sourceFiles(path.join(serverDir, layer))) {
    for (const imported of await importsOf(file)) {
      if (imported.startsWith(target))
        found.push(`${path.relative(serverDir, file)} -> ${path.relative(serverDir, imported)}`)
    }
  }
  return found
}

describe('server layers', () => {
  it('the import scan sees imports (a file known to import routes/ is found)', async () => {
    expect(await offenders('.', 'routes')).toContain('app.ts -> routes/index.js')
  })

  it('no file under chains/ or gateway/ imports from routes/', async () => {
    expect(await offenders('chains', 'routes')).toEqual([])
    expect(await offenders('gateway', 'routes')).toEqual([])
  })

  it('chain executors do not import the gateway (the gateway uses the chains, not the other way)', async () => {
    expect(await offenders('chains', 'gateway')).toEqual([])
  })

  it('the payments domain layer imports no route, gateway or chain module', async () => {
    for (const layer of ['routes', 'gateway', 'chains']) {
      expect(await offenders('payments', layer)).toEqual([])
    }
  })
})
