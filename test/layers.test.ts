import { readdir, readFile } from 'node:fs/promises'
import path from 'node:path'
import { describe, expect, it } from 'vitest'

// The wallet-side layers (docs/architecture.md, section 3): wallet core <- chain protocol modules <-
// adapters and the server. Every import points down.

const root = path.resolve(import.meta.dirname, '..')

async function importsUnder(dir: string): Promise<Array<{ file: string; imported: string }>> {
  const entries = await readdir(path.join(root, dir), { withFileTypes: true, recursive: true })
  const found: Array<{ file: string; imported: string }> = []
  for (const entry of entries) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name.endsWith('.test.ts')) continue
    const file = path.join(entry.parentPath, entry.name)
    const text = await readFile(file, 'utf8')
    for (const [, specifier] of text.matchAll(/(?:from|import)\s*\(?\s*['"]([^'"]+)['"]/g)) {
      const imported = specifier!.startsWith('.')
        ? path.relative(root, path.resolve(path.dirname(file), specifier!))
        : specifier!
      found.push({ file: path.relative(root, file), imported })
    }
  }
  return found
}

const offending = (imports: Array<{ file: string; imported: string }>, bad: (imported: string) => boolean) =>
  imports.filter(({ imported }) => bad(imported)).map(({ file, imported }) => `${file} -> ${imported}`)

describe('wallet layers', () => {
  it('the scan sees imports (a known protocol import of the server is found)', async () => {
    const server = await importsUnder('src/server')
    expect(offending(server, (i) => i.startsWith('protocol/'))).toContain(
      'src/server/chains/solana/driver.ts -> protocol/solana/index.js',
    )
  })

  it('the wallet core imports no protocol module, adapter, server code, viem or web3.js', async () => {
    const core = (await importsUnder('src')).filter(({ file }) => !file.startsWith('src/server/'))
    expect(
      offending(
        core.filter(({ file }) => !file.startsWith('src/contract/generate')),
        (i) => /^(protocol|adapters|src\/server)\//.test(i) || /^(viem|@solana\/|node:)/.test(i),
      ),
    ).toEqual([])
  })

  it('protocol modules import only the wallet core and the chain libraries', async () => {
    const protocol = await importsUnder('protocol')
    expect(offending(protocol, (i) => /^(adapters|src\/server|test)\//.test(i))).toEqual([])
  })

  it('no server file reaches into the adapters', async () => {
    expect(offending(await importsUnder('src/server'), (i) => i.startsWith('adapters/'))).toEqual([])
  })
})
