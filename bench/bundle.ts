import { gzipSync } from 'node:zlib'
import { build } from 'esbuild'

/** Peers are never counted: a wallet app already has them (or does not use that adapter). */
export const peerPackages = [
  'viem',
  '@solana/web3.js',
  '@solana/spl-token',
  '@walletconnect/sign-client',
  '@walletconnect/types',
  '@walletconnect/utils',
]

export interface BundleReport {
  entry: string
  minBytes: number
  gzipBytes: number
  /** Every module that went into the bundle (paths relative to the project). */
  inputs: string[]
  /** Imports left outside the bundle. */
  externals: string[]
}

/** Bundles one entry the way an app's bundler would (browser target, minified) and measures it. */
export async function measureBundle(entry: string): Promise<BundleReport> {
  const result = await build({
    entryPoints: [entry],
    bundle: true,
    minify: true,
    format: 'esm',
    platform: 'browser',
    target: 'es2022',
    write: false,
    metafile: true,
    treeShaking: true,
    external: peerPackages,
    logLevel: 'silent',
  })
  const code = result.outputFiles[0]!.contents
  const output = Object.values(result.metafile.outputs)[0]!
  return {
    entry,
    minBytes: code.byteLength,
    gzipBytes: gzipSync(code, { level: 9 }).byteLength,
    inputs: Object.keys(result.metafile.inputs),
    externals: output.imports.filter((i) => i.external).map((i) => i.path),
  }
}
