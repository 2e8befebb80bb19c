#!/usr/bin/env node
// The CLI of the caipay package this one depends on (same version), with the server's
// dependencies installed beside it.
import { createRequire } from 'node:module'
import path from 'node:path'
import { pathToFileURL } from 'node:url'

const require = createRequire(import.meta.url)
const root = path.dirname(require.resolve('caipay/package.json'))
const cli = await import(pathToFileURL(path.join(root, 'dist', 'server', 'cli.js')).href)
const code = await cli.main(process.argv.slice(2))
if (code !== 0) process.exit(code)
