import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { createRequire } from 'node:module'
import path from 'node:path'
import { promisify } from 'node:util'
import { gzip as gzipCallback } from 'node:zlib'
import type { FastifyInstance } from 'fastify'

/**
 * The API reference at /docs: Swagger UI (swagger-ui-dist) rendering the generated documents, its files
 * served by this server from the installed package (no CDN: it works offline). Why Swagger UI, and
 * what it costs: docs/api-contract.md.
 */

/** The documents the page offers, the first by default; `page` opens the page on that document. */
export const docsDocuments = [
  { name: 'caipay API', url: '/openapi.json', page: '/docs' },
  { name: '/wcp: WalletConnect Pay SDK wire format', url: '/wcp/openapi.json', page: '/docs/wcp' },
] as const

const gzip = promisify(gzipCallback)

/** The only files of the package that are served (an allow-list: nothing else of it is reachable). */
const assetTypes: Record<string, string> = {
  'swagger-ui.css': 'text/css; charset=utf-8',
  'swagger-ui-bundle.js': 'text/javascript; charset=utf-8',
  'swagger-ui-standalone-preset.js': 'text/javascript; charset=utf-8',
  'favicon-32x32.png': 'image/png',
}

// Try-it calls the server that served the page, whatever the document's `servers` says: the merchant
// API answers no other origin (CORS), and the CSP allows no other.
const initScript = `'use strict'
var documents = ${JSON.stringify(docsDocuments.map(({ name, url }) => ({ name, url })))}
var pages = ${JSON.stringify(docsDocuments.map(({ page }) => page))}
var chosen = documents[Math.max(0, pages.indexOf(location.pathname.replace(/\\/+$/, '')))]
window.ui = SwaggerUIBundle({
  dom_id: '#swagger-ui',
  urls: documents,
  'urls.primaryName': chosen.name,
  presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
  layout: 'StandaloneLayout',
  deepLinking: true,
  displayOperationId: true,
  displayRequestDuration: true,
  defaultModelExpandDepth: 3,
  validatorUrl: null,
  requestInterceptor: function (request) {
    var url = new URL(request.url, location.href)
    request.url = location.origin + url.pathname + url.search
    return request
  },
})
`

const csp = [
  "default-src 'none'",
  "script-src 'self'",
  // Swagger UI adds a style element from its script; scripts stay this server's files only.
  "style-src 'self' 'unsafe-inline'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ')

/** Where the installed swagger-ui-dist is, or undefined when it is not installed. */
function rendererPackage(): { dir: string; version: string } | undefined {
  let manifest: string
  try {
    manifest = createRequire(import.meta.url).resolve('swagger-ui-dist/package.json')
  } catch {
    return undefined
  }
  const { version } = JSON.parse(readFileSync(manifest, 'utf8')) as { version: string }
  return { dir: path.dirname(manifest), version }
}

const missingRenderer =
  'The API reference needs the package "swagger-ui-dist", which is not installed ' +
  '(`npm install caipay-server` brings it). The documents are at /openapi.json and /wcp/openapi.json.'

/**
 * Registers /docs, /docs/wcp and the page's files. Without swagger-ui-dist the server still runs (the
 * reference is not needed to take payments): the pages say what to install, and the log says it once.
 */
export function registerDocs(app: FastifyInstance): void {
  const renderer = rendererPackage()
  if (!renderer) {
    app.log.warn(missingRenderer)
    for (const { page } of docsDocuments) {
      app.get(page, { config: { rateLimit: false } }, async (_request, reply) =>
        reply.code(503).type('text/plain; charset=utf-8').send(missingRenderer),
      )
    }
    return
  }
  const { dir, version } = renderer
  const asset = (file: string) => `/docs/assets/${file}?v=${version}`
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>caipay API reference</title>
<link rel="icon" type="image/png" href="${asset('favicon-32x32.png')}">
<link rel="stylesheet" href="${asset('swagger-ui.css')}">
</head>
<body>
<div id="swagger-ui"></div>
<script src="${asset('swagger-ui-bundle.js')}"></script>
<script src="${asset('swagger-ui-standalone-preset.js')}"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`
  const headers = { 'x-content-type-options': 'nosniff', 'referrer-policy': 'no-referrer' }
  for (const { page } of docsDocuments) {
    app.get(page, { config: { rateLimit: false } }, async (_request, reply) =>
      reply
        .headers({ ...headers, 'content-security-policy': csp, 'cache-control': 'no-cache' })
        .type('text/html; charset=utf-8')
        .send(html),
    )
  }
  app.get('/docs/init.js', { config: { rateLimit: false } }, async (_request, reply) =>
    reply
      .headers({ ...headers, 'cache-control': 'no-cache' })
      .type('text/javascript; charset=utf-8')
      .send(initScript),
  )
  // Read and gzipped once, on first use (2.2 MB becomes 0.6 MB); the URLs carry the package version, so
  // browsers may keep them.
  const loaded = new Map<string, Promise<{ plain: Buffer; gzipped: Buffer }>>()
  const load = async (file: string) => {
    const plain = await readFile(path.join(dir, file))
    return { plain, gzipped: await gzip(plain) }
  }
  app.get<{ Params: { file: string } }>(
    '/docs/assets/:file',
    { config: { rateLimit: false } },
    async (request, reply) => {
      const { file } = request.params
      const type = Object.hasOwn(assetTypes, file) ? assetTypes[file] : undefined
      if (!type) return reply.callNotFound()
      if (!loaded.has(file)) {
        const loading = load(file)
        loaded.set(file, loading)
        loading.catch(() => loaded.delete(file))
      }
      const { plain, gzipped } = await loaded.get(file)!
      reply
        .headers({
          ...headers,
          'cache-control': 'public, max-age=604800, immutable',
          vary: 'accept-encoding',
        })
        .type(type)
      if (!/\bgzip\b/.test(request.headers['accept-encoding'] ?? '')) return reply.send(plain)
      return reply.header('content-encoding', 'gzip').send(gzipped)
    },
  )
}
