#!/usr/bin/env node
// Runs the built CLI (dist); in a checkout without a build, runs the TypeScript source through tsx.
import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

const built = new URL('../dist/server/cli.js', import.meta.url)
let cli
if (existsSync(fileURLToPath(built))) {
  cli = await import(built.href)
} else {
  const { register } = await import('tsx/esm/api')
  register()
  cli = await import(new URL('../src/server/cli.ts', import.meta.url).href)
}
const code = await cli.main(process.argv.slice(2))
if (code !== 0) process.exit(code)
