import { existsSync } from 'node:fs'
import { defineConfig } from 'tsup'

// Entry points grow as the parts land; each maps to a subpath export in package.json.
const entries: Record<string, string> = {
  index: 'src/index.ts',
  'client/index': 'src/client/index.ts',
  'x402/index': 'src/x402/index.ts',
  'review/index': 'src/review/index.ts',
  'subscriptions/index': 'src/subscriptions/index.ts',
  'server/index': 'src/server/index.ts',
  'server/cli': 'src/server/cli.ts',
  'adapters/evm/index': 'adapters/evm/index.ts',
  'adapters/solana/index': 'adapters/solana/index.ts',
  'adapters/solana-kit/index': 'adapters/solana-kit/index.ts',
  'adapters/walletconnect/index': 'adapters/walletconnect/index.ts',
}

export default defineConfig({
  entry: Object.fromEntries(Object.entries(entries).filter(([, path]) => existsSync(path))),
  format: ['esm', 'cjs'],
  dts: true,
  sourcemap: true,
  clean: true,
  target: 'es2022',
  treeshake: true,
  splitting: true,
  // import.meta.url in the CJS build (the CLI finds its package.json and entry point with it).
  shims: true,
})
